package agent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/berth-node/berth/mounts/partition"
	"github.com/berth-node/berth/mounts/raid"
	"github.com/berth-node/berth/mounts/verity"
)

// BootDisk is the disk the root was found on: its ESP and root slots, by
// their GPT partition names (image/disk's layout), on that disk only, so
// that another berth disk attached to the machine is never written.
type BootDisk struct {
	// ClassBlock is sysfs's /sys/class/block.
	ClassBlock string
	// Disk is the boot disk's /dev path (the running slot's disk).
	Disk string
	// MountDir is where the ESP is mounted while berth writes it.
	MountDir string
}

// find is the partition named name on the boot disk.
func (d BootDisk) find(name string) (string, error) {
	cs, err := partition.FindNamedDisks(d.ClassBlock, name)
	if err != nil {
		return "", fmt.Errorf("finding partition %s: %w", name, err)
	}
	var on []string
	for _, c := range cs {
		if c.Disk == d.Disk {
			on = append(on, c.Partition)
		}
	}
	switch len(on) {
	case 0:
		return "", fmt.Errorf("no partition named %s on the boot disk %s", name, d.Disk)
	case 1:
		return on[0], nil
	}
	return "", fmt.Errorf("%d partitions named %s on the boot disk %s (%s): not choosing one", len(on), name, d.Disk, strings.Join(on, ", "))
}

// Slot is slot s's partition and its size in bytes (sysfs's size is in
// 512-byte sectors whatever the device's block size).
func (d BootDisk) Slot(s partition.Slot) (string, int64, error) {
	dev, err := d.find(s.PartName())
	if err != nil {
		return "", 0, err
	}
	b, err := os.ReadFile(filepath.Join(d.ClassBlock, filepath.Base(dev), "size"))
	if err != nil {
		return "", 0, fmt.Errorf("the size of %s: %w", dev, err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("the size of %s: %w", dev, err)
	}
	return dev, n * 512, nil
}

// MountESP mounts the ESP (vfat) on MountDir, without exec, suid or
// device files; unmount syncs and unmounts it.
func (d BootDisk) MountESP(ctx context.Context) (string, func() error, error) {
	dev, err := d.find(partition.NameESP)
	if err != nil {
		return "", nil, err
	}
	if err := os.MkdirAll(d.MountDir, 0o700); err != nil {
		return "", nil, fmt.Errorf("mounting the ESP %s: %w", dev, err)
	}
	// The kernel asks /sbin/modprobe for vfat and its code pages
	// (nls_cp437, nls_ascii) at the first mount.
	// dirsync: vfat writes a directory's entries (a stage's or a
	// blessing's rename) at once, not when its buffers are flushed; esp
	// also syncs the filesystem after each rename.
	if err := unix.Mount(dev, d.MountDir, "vfat", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC|unix.MS_DIRSYNC, "umask=0077"); err != nil {
		return "", nil, fmt.Errorf("mounting the ESP %s (vfat) on %s: %w", dev, d.MountDir, err)
	}
	return d.MountDir, func() error {
		if err := unix.Unmount(d.MountDir, 0); err != nil {
			return fmt.Errorf("unmounting the ESP from %s: %w", d.MountDir, err)
		}
		return nil
	}, nil
}

// verifyName is the dm-verity device an update's check sets up over the
// slot it wrote; the root's own is diskboot.VerityName.
const verifyName = "berth-update-verify"

// VerifySlot checks slot dev through the kernel's dm-verity with p, as
// the next boot will: a read-only verity device over it, read whole (a
// block that does not match fails its read), then removed. It returns the
// bytes of the slot image it vouches for (its data and hash tree).
func VerifySlot(ctx context.Context, log *slog.Logger, dev string, p verity.Param) (n int64, err error) {
	// A device left by a check that was cut off (berth restarted mid-way)
	// goes first; its absence is not an error.
	_ = raid.Remove(ctx, raid.ControlPath, verifyName)
	vdev, err := verity.Setup(ctx, log, raid.ControlPath, verifyName, p.On(dev))
	if err != nil {
		return 0, fmt.Errorf("checking slot %s through dm-verity: %w", dev, err)
	}
	defer func() {
		if rerr := raid.Remove(ctx, raid.ControlPath, verifyName); rerr != nil && err == nil {
			err = fmt.Errorf("removing the check's dm-verity device over %s: %w", dev, rerr)
		}
	}()
	if err := verity.ReadAll(ctx, vdev); err != nil {
		return 0, fmt.Errorf("checking slot %s through dm-verity: %w", dev, err)
	}
	return int64(p.DataBlocks+verity.TreeBlocks(p.DataBlocks)) * verity.BlockSize, nil
}
