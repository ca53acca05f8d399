package diskboot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-node/berth/mounts"
	"github.com/berth-node/berth/mounts/mkfs"
	"github.com/berth-node/berth/mounts/partition"
	"github.com/berth-node/berth/mounts/sigprobe"
)

// The disk image's data partition: where state that must survive a reboot
// lives on a disk boot (everything else is tmpfs, rebuilt every boot).
const (
	// DataMount is where the data partition is mounted.
	DataMount = "/mnt/berth-data"
	// DataLabel is the ext4 label berth gives it.
	DataLabel = "berth-data"
)

// dataWait bounds the wait for the data partition on the disk the root
// came from (its partitions appear together, so it is there already
// unless the disk has none). A variable for the tests.
var dataWait = 5 * time.Second

// DataBinds are the directories kept on the data partition: kubelet's
// state (its client certificate, rotated after the bootstrap), logs, and
// the update agent's state (which update is pending, what became of the
// last), which must outlive the reboots of an update.
func DataBinds() []string { return []string{"/var/lib/kubelet", "/var/log", "/var/lib/berth/update"} }

// dataFSAction decides what to do with what the data partition holds:
// make the filesystem on a blank one (first boot), mount an ext4 one, and
// refuse anything else rather than format over data berth did not write.
func dataFSAction(sig sigprobe.Signature) (format bool, err error) {
	switch sig.Kind {
	case sigprobe.Blank:
		return true, nil
	case sigprobe.Ext4:
		return false, nil
	}
	return false, fmt.Errorf("partition %s holds %s, not the ext4 berth makes; not formatting it", partition.NameData, sig.Kind)
}

// findData waits up to wait for the one berth-data partition on rootDisk
// (the disk the verified root came from) whose device node is ready, and
// returns it with the berth-data partitions found on other disks, which
// are ignored: an attached EBS volume, or a snapshot of another berth
// node, is not this node's data. Two on the root disk is an error, as two
// roots are. The ignored list is set on an error too.
func findData(ctx context.Context, classBlock, rootDisk string, wait time.Duration, ready func(string) bool) (string, []partition.Candidate, error) {
	deadline := time.Now().Add(wait)
	for {
		cands, err := partition.FindNamedDisks(classBlock, partition.NameData)
		if err != nil {
			return "", nil, err
		}
		var on []string
		var elsewhere []partition.Candidate
		for _, c := range cands {
			if c.Disk == rootDisk {
				on = append(on, c.Partition)
			} else {
				elsewhere = append(elsewhere, c)
			}
		}
		switch {
		case len(on) > 1:
			return "", elsewhere, fmt.Errorf("%d partitions named %s on the root disk %s (%s): not choosing one", len(on), partition.NameData, rootDisk, strings.Join(on, ", "))
		case len(on) == 1 && ready(on[0]):
			return on[0], elsewhere, nil
		}
		if time.Now().After(deadline) {
			if len(on) == 1 {
				return "", elsewhere, fmt.Errorf("partition %s (%s) has no device node after %s", on[0], partition.NameData, wait)
			}
			msg := fmt.Sprintf("no partition named %s on the root disk %s within %s", partition.NameData, rootDisk, wait)
			if len(elsewhere) > 0 {
				var ps []string
				for _, c := range elsewhere {
					ps = append(ps, c.Partition+" on "+c.Disk)
				}
				msg += fmt.Sprintf("; refusing the %s on other disks (%s): only the root disk's is the node's", partition.NameData, strings.Join(ps, ", "))
			}
			return "", elsewhere, errors.New(msg)
		}
		select {
		case <-ctx.Done():
			return "", elsewhere, fmt.Errorf("waiting for partition %s: %w", partition.NameData, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// devNodeReady says the device node exists (devtmpfs may lag sysfs).
func devNodeReady(dev string) bool {
	_, err := os.Stat(dev)
	return err == nil
}

// ignoredText is how the report names a berth-data partition left alone.
func ignoredText(c partition.Candidate, rootDisk string) string {
	return fmt.Sprintf("%s (not on the root disk %s)", c.Partition, rootDisk)
}

// setupDataPartition grows berth-data to the end of its disk (first boot,
// or after the volume was enlarged), makes its filesystem when it is
// blank, mounts it and binds DataBinds onto it. Only the berth-data on the
// disk of rootPart (the verified root partition) is used; one on another
// disk is not touched, and is listed in Ignored and logged. Runs after the
// switch, so /var is the new root's tmpfs and the manifest's mkfs is
// reachable.
func setupDataPartition(ctx context.Context, log *slog.Logger, opts Options, rootPart string) (*mounts.DataPartition, error) {
	start := time.Now()
	classBlock := opts.classBlock()
	dp := &mounts.DataPartition{}
	rootDisk, err := partition.DiskOf(classBlock, rootPart)
	if err != nil {
		return dp, fmt.Errorf("the root partition's disk: %w", err)
	}
	part, elsewhere, err := findData(ctx, classBlock, rootDisk, dataWait, devNodeReady)
	for _, c := range elsewhere {
		log.Warn("ignoring a berth-data partition that is not on the root disk; not touching it", "partition", c.Partition, "disk", c.Disk, "root_disk", rootDisk)
		dp.Ignored = append(dp.Ignored, ignoredText(c, rootDisk))
	}
	if err != nil {
		return dp, err
	}
	dp.Partition, dp.Disk, dp.Mount = part, rootDisk, DataMount
	name := filepath.Base(part)
	real, err := filepath.EvalSymlinks(filepath.Join(classBlock, name))
	if err != nil {
		return dp, fmt.Errorf("finding the sysfs directory of %s: %w", part, err)
	}
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
	format, err := dataFSAction(sigprobe.Probe(head[:n]))
	if err != nil {
		return dp, err
	}
	if opts.LoadModules != nil {
		if err := opts.LoadModules(ctx, "ext4"); err != nil {
			log.Warn("loading ext4", "err", err)
		}
	}
	if format {
		tool, _ := mkfs.Tool(opts.Tools, "ext4")
		// -E nodiscard: an EBS volume from a snapshot reads zero already,
		// and discarding gigabytes costs boot time.
		if err := mkfs.Run(ctx, opts.Run, tool, "-q", "-F", "-L", DataLabel, "-E", "nodiscard", part); err != nil {
			return dp, fmt.Errorf("making ext4 on %s: %w", part, err)
		}
		dp.Formatted = true
	} else if grown {
		// Only resize2fs could grow an existing ext4; the image ships none.
		log.Warn("data partition grown but its filesystem kept its size", "partition", part)
	}
	if err := os.MkdirAll(DataMount, 0o755); err != nil {
		return dp, fmt.Errorf("creating %s: %w", DataMount, err)
	}
	if err := unix.Mount(part, DataMount, "ext4", unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return dp, fmt.Errorf("mounting %s (ext4) on %s: %w", part, DataMount, err)
	}
	for _, d := range DataBinds() {
		src := filepath.Join(DataMount, strings.TrimPrefix(d, "/"))
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
	l, err := partition.ReadDisk(f, size)
	if err != nil {
		return false, 0, fmt.Errorf("reading the partition table of %s: %w", diskDev, err)
	}
	nl, err := partition.Grow(l, size)
	if errors.Is(err, partition.ErrGrown) {
		p, _, _ := l.Find(partition.NameData)
		return false, p.Size(), nil
	}
	if err != nil {
		return false, 0, fmt.Errorf("disk %s: %w", diskDev, err)
	}
	if err := partition.WriteDisk(f, nl); err != nil {
		return false, 0, fmt.Errorf("writing the grown partition table of %s: %w", diskDev, err)
	}
	if err := f.Sync(); err != nil {
		return false, 0, fmt.Errorf("flushing the partition table of %s: %w", diskDev, err)
	}
	p, _, _ := nl.Find(partition.NameData)
	// BLKPG, not BLKRRPART: the root partition on the same disk is in
	// use (dm-verity, mounted), and a re-read refuses a busy disk.
	if err := partition.ResizePartition(f, pno, p.Offset(), p.Size()); err != nil {
		return false, 0, fmt.Errorf("telling the kernel partition %d of %s grew (BLKPG): %w", pno, diskDev, err)
	}
	return true, p.Size(), nil
}
