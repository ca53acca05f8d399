package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/berth-node/berth/image/disk"
	"github.com/berth-node/berth/kmod"
	"github.com/berth-node/berth/mounts"
	"github.com/berth-node/berth/mounts/sigprobe"
	"golang.org/x/sys/unix"
)

// The disk image's data partition: where state that must survive a reboot
// lives on a disk boot (everything else is tmpfs, rebuilt every boot).
const (
	dataPartName = disk.NameData
	dataMount    = "/mnt/berth-data"
	dataLabel    = "berth-data"
)

// dataBinds are the directories kept on the data partition: kubelet's
// state (its client certificate, rotated after the bootstrap) and logs.
func dataBinds() []string { return []string{"/var/lib/kubelet", "/var/log"} }

// dataFSAction decides what to do with what the data partition holds:
// make the filesystem on a blank one (first boot), mount an ext4 one, and
// refuse anything else rather than format over data berth did not write.
func dataFSAction(sig sigprobe.Signature) (mkfs bool, err error) {
	switch sig.Kind {
	case sigprobe.Blank:
		return true, nil
	case sigprobe.Ext4:
		return false, nil
	}
	return false, fmt.Errorf("partition %s holds %s, not the ext4 berth makes; not formatting it", dataPartName, sig.Kind)
}

// setupDataPartition grows berth-data to the end of its disk (first boot,
// or after the volume was enlarged), makes its filesystem when it is
// blank, mounts it and binds dataBinds onto it. Runs after the switch, so
// /var is the new root's tmpfs and the manifest's mkfs is reachable.
func setupDataPartition(ctx context.Context, b *boot, log *slog.Logger) (*mounts.DataPartition, error) {
	start := time.Now()
	part, err := waitPartition(ctx, "/sys/class/block", dataPartName, 5*time.Second)
	if err != nil {
		return nil, err
	}
	dp := &mounts.DataPartition{Partition: part, Mount: dataMount}
	name := filepath.Base(part)
	real, err := filepath.EvalSymlinks(filepath.Join("/sys/class/block", name))
	if err != nil {
		return dp, fmt.Errorf("finding the disk of %s: %w", part, err)
	}
	dp.Disk = "/dev/" + filepath.Base(filepath.Dir(real))
	pnoText, err := os.ReadFile(filepath.Join(real, "partition"))
	if err != nil {
		return dp, fmt.Errorf("reading the partition number of %s: %w", part, err)
	}
	pno, err := strconv.Atoi(strings.TrimSpace(string(pnoText)))
	if err != nil {
		return dp, fmt.Errorf("partition number of %s: %w", part, err)
	}
	grown, size, err := growData(dp.Disk, pno)
	if err != nil {
		return dp, err
	}
	dp.Grown, dp.SizeBytes = grown, size

	head := make([]byte, sigprobe.ReadLen)
	pf, err := os.Open(part)
	if err != nil {
		return dp, fmt.Errorf("opening %s: %w", part, err)
	}
	n, err := io.ReadFull(pf, head)
	pf.Close()
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return dp, fmt.Errorf("reading %s: %w", part, err)
	}
	mkfs, err := dataFSAction(sigprobe.Probe(head[:n]))
	if err != nil {
		return dp, err
	}
	if b.node.kmod != nil {
		loaded, err := kmod.Load(ctx, log, b.node.kmod, "ext4")
		b.rep.Modules = append(b.rep.Modules, loaded...)
		if err != nil {
			log.Warn("loading ext4", "err", err)
		}
	}
	if mkfs {
		tool := "/usr/sbin/mkfs.ext4"
		if b.node.manifest != nil && b.node.manifest.Tools["mkfs.ext4"] != "" {
			tool = b.node.manifest.Tools["mkfs.ext4"]
		}
		mctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		// -E nodiscard: an EBS volume from a snapshot reads zero already,
		// and discarding gigabytes costs boot time.
		// The reaper bounds the wait with mctx; it refuses CommandContext.
		cmd := exec.Command(tool, "-q", "-F", "-L", dataLabel, "-E", "nodiscard", part)
		out, err := reaperRunner(b.reaper)(mctx, cmd)
		cancel()
		if err != nil {
			return dp, fmt.Errorf("making ext4 on %s: %w: %s", part, err, strings.TrimSpace(string(out)))
		}
		dp.Formatted = true
	} else if grown {
		// Only resize2fs could grow an existing ext4; the image ships none.
		log.Warn("data partition grown but its filesystem kept its size", "partition", part)
	}
	if err := os.MkdirAll(dataMount, 0o755); err != nil {
		return dp, fmt.Errorf("creating %s: %w", dataMount, err)
	}
	if err := unix.Mount(part, dataMount, "ext4", unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return dp, fmt.Errorf("mounting %s (ext4) on %s: %w", part, dataMount, err)
	}
	for _, d := range dataBinds() {
		src := filepath.Join(dataMount, strings.TrimPrefix(d, "/"))
		if err := os.MkdirAll(src, 0o755); err != nil {
			return dp, fmt.Errorf("creating %s: %w", src, err)
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return dp, fmt.Errorf("creating %s: %w", d, err)
		}
		if err := unix.Mount(src, d, "", unix.MS_BIND, ""); err != nil {
			return dp, fmt.Errorf("binding %s onto %s: %w", src, d, err)
		}
		dp.Binds = append(dp.Binds, d)
	}
	dp.DurationMs = time.Since(start).Milliseconds()
	log.Info("data partition ready", "partition", part, "grown", dp.Grown, "formatted", dp.Formatted, "bytes", dp.SizeBytes, "ms", dp.DurationMs)
	return dp, nil
}

// growData grows partition pno (berth-data) of diskDev to the disk's end
// when it does not reach it yet, and tells the kernel its new size. It
// returns whether it grew and the partition's size in bytes.
func growData(diskDev string, pno int) (bool, int64, error) {
	f, err := os.OpenFile(diskDev, os.O_RDWR, 0)
	if err != nil {
		return false, 0, fmt.Errorf("opening disk %s: %w", diskDev, err)
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return false, 0, fmt.Errorf("sizing disk %s: %w", diskDev, err)
	}
	l, err := disk.Read(f, size)
	if err != nil {
		return false, 0, fmt.Errorf("reading the partition table of %s: %w", diskDev, err)
	}
	nl, err := disk.Grow(l, size)
	if errors.Is(err, disk.ErrGrown) {
		p, _, _ := l.Find(dataPartName)
		return false, int64(p.LastLBA-p.FirstLBA+1) * disk.SectorSize, nil
	}
	if err != nil {
		return false, 0, fmt.Errorf("disk %s: %w", diskDev, err)
	}
	if err := disk.Write(f, nl); err != nil {
		return false, 0, fmt.Errorf("writing the grown partition table of %s: %w", diskDev, err)
	}
	if err := f.Sync(); err != nil {
		return false, 0, fmt.Errorf("flushing the partition table of %s: %w", diskDev, err)
	}
	p, _, _ := nl.Find(dataPartName)
	bp := unix.BlkpgPartition{Start: int64(p.FirstLBA) * disk.SectorSize, Length: int64(p.LastLBA-p.FirstLBA+1) * disk.SectorSize, Pno: int32(pno)}
	arg := unix.BlkpgIoctlArg{Op: unix.BLKPG_RESIZE_PARTITION, Datalen: int32(unsafe.Sizeof(bp)), Data: (*byte)(unsafe.Pointer(&bp))}
	// BLKPG, not BLKRRPART: the root partition on the same disk is in
	// use (dm-verity, mounted), and a re-read refuses a busy disk.
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.BLKPG, uintptr(unsafe.Pointer(&arg))); errno != 0 {
		return false, 0, fmt.Errorf("telling the kernel partition %d of %s grew (BLKPG): %w", pno, diskDev, errno)
	}
	return true, bp.Length, nil
}
