package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/berth-node/berth/kmod"
	"github.com/berth-node/berth/mounts"
	"github.com/berth-node/berth/mounts/raid"
	"github.com/berth-node/berth/mounts/verity"
)

// Disk-boot layout names, as image/disk writes them.
const (
	rootPartName = "berth-root"
	verityName   = "berth-root"
	// diskWait bounds the wait for the root disk: nvme is loaded by
	// coldplug in the modules phase, and the controller then probes
	// asynchronously (seconds under TCG).
	diskWait = 60 * time.Second
)

// ueventPartition returns the /dev path of the partition a uevent file
// describes when its PARTNAME is name.
func ueventPartition(uevent, name string) (string, bool) {
	var devname, partname string
	sc := bufio.NewScanner(strings.NewReader(uevent))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		switch k {
		case "DEVNAME":
			devname = v
		case "PARTNAME":
			partname = v
		}
	}
	if devname == "" || partname != name {
		return "", false
	}
	return "/dev/" + devname, true
}

// findPartitions lists the partitions named name under a sysfs
// class/block directory, sorted.
func findPartitions(classBlock, name string) ([]string, error) {
	ents, err := os.ReadDir(classBlock)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", classBlock, err)
	}
	var found []string
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(classBlock, e.Name(), "uevent"))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("reading %s uevent: %w", e.Name(), err)
		}
		if dev, ok := ueventPartition(string(data), name); ok {
			found = append(found, dev)
		}
	}
	sort.Strings(found)
	return found, nil
}

// waitPartition waits until exactly one partition named name exists and
// its device node is there. Two of them (a second berth disk attached) is
// an error: booting the wrong root would be worse than not booting.
func waitPartition(ctx context.Context, classBlock, name string, wait time.Duration) (string, error) {
	deadline := time.Now().Add(wait)
	for {
		found, err := findPartitions(classBlock, name)
		if err != nil {
			return "", err
		}
		switch {
		case len(found) > 1:
			return "", fmt.Errorf("%d partitions named %s (%s): attach only one berth disk", len(found), name, strings.Join(found, ", "))
		case len(found) == 1:
			if _, err := os.Stat(found[0]); err == nil {
				return found[0], nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no partition named %s appeared within %s (is the disk attached, and its driver (nvme) in the image?)", name, wait)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("waiting for partition %s: %w", name, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// switchToVerityRoot is phaseRoot on a disk boot: the root partition
// behind dm-verity, checked whole before anything runs from it.
//
// Reading the whole device costs one pass over the root (about 40 MB/s
// under TCG, far more on EC2) but makes "a tampered block stops the boot"
// true at one place, with one clear error; without it a bad block would
// surface as EIO in whichever process happened to read it, possibly after
// the node joined.
func switchToVerityRoot(ctx context.Context, b *boot, log *slog.Logger, value string) error {
	p, err := verity.ParseParam(value)
	if err != nil {
		return fmt.Errorf("disk boot: refusing to boot an unverifiable root: %w", err)
	}
	part, err := waitPartition(ctx, "/sys/class/block", rootPartName, diskWait)
	if err != nil {
		return fmt.Errorf("disk boot: %w", err)
	}
	if b.node.kmod != nil {
		if _, err := kmod.Load(ctx, log, b.node.kmod, "dm_verity"); err != nil {
			return fmt.Errorf("disk boot: loading dm_verity: %w", err)
		}
	}
	start := time.Now()
	dev, err := verity.Setup(ctx, log, raid.ControlPath, verityName, p.On(part))
	if err != nil {
		return fmt.Errorf("disk boot: %w", err)
	}
	setup := time.Since(start)
	vstart := time.Now()
	if err := verity.ReadAll(ctx, dev); err != nil {
		var ce *verity.CorruptError
		if errors.As(err, &ce) {
			log.Error("ROOT FILESYSTEM VERIFICATION FAILED: not booting a tampered node", "partition", part, "err", err)
		}
		return fmt.Errorf("disk boot: verifying root partition %s: %w", part, err)
	}
	vr := &mounts.VerityRoot{Partition: part, Device: dev, RootHash: p.RootHash, Verified: true,
		SetupMs: setup.Milliseconds(), VerifyMs: time.Since(vstart).Milliseconds(), DataBytes: int64(p.DataBlocks) * verity.BlockSize}
	log.Info("root verified", "partition", part, "dev", dev, "setup_ms", vr.SetupMs, "verify_ms", vr.VerifyMs, "bytes", vr.DataBytes)
	res, err := mounts.SwitchRoot(ctx, log, mounts.SwitchRootOptions{
		Image:       dev,
		BlockDevice: true,
		NewRoot:     newRoot,
		Carry:       []string{modulesRoot, "/etc/berth"},
	})
	if err != nil {
		return fmt.Errorf("disk boot: switching to verity root %s: %w", dev, err)
	}
	res.Verity = vr
	b.rep.Root = res
	// Not fatal: a node without its data partition still runs, on tmpfs,
	// and the report and the log say why.
	dp, err := setupDataPartition(ctx, b, log)
	if err != nil {
		log.Error("data partition not set up; /var/lib/kubelet and /var/log stay on tmpfs", "err", err)
		if dp == nil {
			dp = &mounts.DataPartition{}
		}
		dp.Error = err.Error()
	}
	res.Data = dp
	return nil
}
