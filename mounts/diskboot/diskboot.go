// Package diskboot boots a node from the berth disk image (disk.raw, see
// image/disk and the table in mounts/partition): it finds the root slot
// (berth-root-a or berth-root-b) whose dm-verity tree has the root hash
// the command line seals (ChooseSlot), sets up dm-verity on it, reads it
// whole so that a tampered block stops the boot, switches root onto it,
// and then grows, formats when blank and mounts the berth-data partition
// of the same disk and binds /var/lib/kubelet and /var/log onto it, so
// that kubelet's state and the logs survive a reboot. A berth-data partition on any other disk (an
// attached volume, another node's snapshot) is left alone.
//
// It is PID 1's root phase on a disk boot (berth.verity= on the kernel
// command line); what it needs from PID 1 (module loading, a tool runner
// through the reaper, the manifest's tools) comes in Options.
//
// A direct-kernel boot (QEMU's -kernel/-initrd) of an image whose root is
// not in the initramfs goes the same way with Options.Serial: its root is
// root.erofs with its hash tree appended, a whole read-only disk found by
// its serial, with the verity parameters from the initramfs's manifest. It
// has no data partition.
package diskboot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/berth-node/berth/mounts"
	"github.com/berth-node/berth/mounts/partition"
	"github.com/berth-node/berth/mounts/raid"
	"github.com/berth-node/berth/mounts/verity"
)

const (
	// VerityName is the device-mapper name of the verified root.
	VerityName = "berth-root"
	// DiskWait bounds the wait for the root disk: nvme is loaded by
	// coldplug in the modules phase, and the controller then probes
	// asynchronously (seconds under TCG).
	DiskWait = 60 * time.Second
)

// Options are what a disk boot needs from PID 1.
type Options struct {
	// Verity is the berth.verity= value: the root partition's dm-verity
	// parameters (verity.ParseParam).
	Verity string
	// Slot is the berth.slot= value, "" when the command line has none:
	// a hint, sealed by older images, naming the root slot, which must
	// then hold the root. Without it the root is the slot whose dm-verity
	// tree has the sealed root hash (ChooseSlot). A direct-kernel boot's
	// root disk (Serial) has no slots.
	Slot string
	// LoadModules loads kernel modules: dm_verity before the root is set
	// up (an error stops the boot), ext4 before the data partition is
	// mounted (an error is only logged). Nil loads none.
	LoadModules func(ctx context.Context, mods ...string) error
	// Run runs a tool (mkfs.ext4) and returns its combined output; under
	// PID 1 it must go through the reaper. Nil means os/exec.
	Run func(ctx context.Context, cmd *exec.Cmd) ([]byte, error)
	// Tools maps tool names to paths: the image manifest's Tools. Without
	// an entry, mkfs.ext4 is /usr/sbin/mkfs.ext4.
	Tools map[string]string
	// NewRoot, Carry and Release are as in mounts.SwitchRootOptions.
	NewRoot string
	Carry   []string
	Release []string
	// Switched, when set, is called once the root is switched, before the
	// data partition: the caller's module index moves to the root's then
	// (ext4 is loaded after it).
	Switched func()
	// ClassBlock is sysfs's class/block directory; "" means
	// partition.ClassBlock. Tests point it at a fixture.
	ClassBlock string
	// Serial, when set, is the serial of a direct-kernel boot's root
	// disk, found instead of the berth-root partition. Its blocks are
	// verified as they are read rather than all before the switch: the
	// whole read would cost as much as the initramfs unpack the root disk
	// saves (seconds under TCG), and a tampered block still fails its
	// read. No data partition is looked for.
	Serial string
}

func (o Options) classBlock() string {
	if o.ClassBlock == "" {
		return partition.ClassBlock
	}
	return o.ClassBlock
}

// SwitchRoot is the root phase on a disk boot: the root partition behind
// dm-verity, checked whole before anything runs from it, then the data
// partition. It returns the switch's result, with Verity and Data set, for
// the boot report; an error means the boot must stop. A data partition
// that cannot be set up is not an error: the node runs on tmpfs, and
// Data.Error and the log say why.
//
// Reading the whole device costs one pass over the root (about 40 MB/s
// under TCG, far more on EC2) but makes "a tampered block stops the boot"
// true at one place, with one clear error; without it a bad block would
// surface as EIO in whichever process happened to read it, possibly after
// the node joined.
func SwitchRoot(ctx context.Context, log *slog.Logger, opts Options) (*mounts.SwitchResult, error) {
	p, err := verity.ParseParam(opts.Verity)
	if err != nil {
		return nil, fmt.Errorf("disk boot: refusing to boot an unverifiable root: %w", err)
	}
	if opts.Serial != "" {
		return switchToRootDisk(ctx, log, opts, p)
	}
	choice, err := findRoot(ctx, log, opts.classBlock(), p, opts.Slot, DiskWait, SlotGrace, devNodeReady, os.Open)
	if err != nil {
		return nil, fmt.Errorf("disk boot: %w", err)
	}
	slot, part := choice.Slot, choice.Partition
	if opts.LoadModules != nil {
		if err := opts.LoadModules(ctx, "dm_verity"); err != nil {
			return nil, fmt.Errorf("disk boot: loading dm_verity: %w", err)
		}
	}
	start := time.Now()
	dev, err := verity.Setup(ctx, log, raid.ControlPath, VerityName, p.On(part))
	if err != nil {
		return nil, fmt.Errorf("disk boot: %w", err)
	}
	setup := time.Since(start)
	setReadahead(log, opts.classBlock(), dev)
	vstart := time.Now()
	if err := verity.ReadAll(ctx, dev); err != nil {
		var ce *verity.CorruptError
		if errors.As(err, &ce) {
			log.Error("ROOT FILESYSTEM VERIFICATION FAILED: not booting a tampered node", "partition", part, "err", err)
		}
		return nil, fmt.Errorf("disk boot: verifying root partition %s: %w", part, err)
	}
	vr := &mounts.VerityRoot{Partition: part, Slot: string(slot), SlotBy: choice.By, Device: dev, RootHash: p.RootHash, Verified: true,
		SetupMs: setup.Milliseconds(), VerifyMs: time.Since(vstart).Milliseconds(), DataBytes: int64(p.DataBlocks) * verity.BlockSize}
	log.Info("root verified", "slot", slot, "partition", part, "dev", dev, "setup_ms", vr.SetupMs, "verify_ms", vr.VerifyMs, "bytes", vr.DataBytes)
	res, err := mounts.SwitchRoot(ctx, log, mounts.SwitchRootOptions{
		Image:       dev,
		BlockDevice: true,
		NewRoot:     opts.NewRoot,
		Carry:       opts.Carry,
		Release:     opts.Release,
	})
	if err != nil {
		return nil, fmt.Errorf("disk boot: switching to verity root %s: %w", dev, err)
	}
	if opts.Switched != nil {
		opts.Switched()
	}
	res.Verity = vr
	// Not fatal: a node without its data partition still runs, on tmpfs,
	// and the report and the log say why.
	dp, err := setupDataPartition(ctx, log, opts, part)
	if err != nil {
		log.Error("data partition not set up; /var/lib/kubelet and /var/log stay on tmpfs", "err", err)
		if dp == nil {
			dp = &mounts.DataPartition{}
		}
		dp.Error = err.Error()
	}
	res.Data = dp
	return res, nil
}

// switchToRootDisk is SwitchRoot for a direct-kernel boot's root disk
// (Options.Serial): no whole read, no data partition.
func switchToRootDisk(ctx context.Context, log *slog.Logger, opts Options, p verity.Param) (*mounts.SwitchResult, error) {
	if opts.LoadModules != nil {
		// Coldplug has usually loaded virtio_blk by now; loading it here
		// too keeps the root phase from depending on how far it got. The
		// disk may come through another driver, so only the wait decides.
		if err := opts.LoadModules(ctx, "virtio_blk"); err != nil {
			log.Warn("virtio_blk not loaded; waiting for the root disk anyway", "serial", opts.Serial, "err", err)
		}
		if err := opts.LoadModules(ctx, "dm_verity"); err != nil {
			return nil, fmt.Errorf("root disk: loading dm_verity: %w", err)
		}
	}
	start := time.Now()
	disk, err := WaitSerial(ctx, opts.classBlock(), opts.Serial, RootDiskWait)
	if err != nil {
		return nil, fmt.Errorf("root disk: %w", err)
	}
	found := time.Since(start)
	start = time.Now()
	dev, err := verity.Setup(ctx, log, raid.ControlPath, VerityName, p.On(disk))
	if err != nil {
		return nil, fmt.Errorf("root disk %s: %w", disk, err)
	}
	setReadahead(log, opts.classBlock(), dev)
	vr := &mounts.VerityRoot{Partition: disk, Device: dev, RootHash: p.RootHash,
		SetupMs: time.Since(start).Milliseconds(), DataBytes: int64(p.DataBlocks) * verity.BlockSize}
	log.Info("root disk set up; blocks are verified as read", "disk", disk, "serial", opts.Serial, "dev", dev,
		"wait_ms", found.Milliseconds(), "setup_ms", vr.SetupMs, "bytes", vr.DataBytes)
	res, err := mounts.SwitchRoot(ctx, log, mounts.SwitchRootOptions{
		Image:       dev,
		BlockDevice: true,
		NewRoot:     opts.NewRoot,
		Carry:       opts.Carry,
		Release:     opts.Release,
	})
	if err != nil {
		return nil, fmt.Errorf("root disk: switching to verity root %s on %s: %w", dev, disk, err)
	}
	if opts.Switched != nil {
		opts.Switched()
	}
	res.Verity = vr
	return res, nil
}

// RootReadaheadKiB is the verity root's readahead. The kernel's default
// (128 KiB) turns reading a large binary into many small verified reads:
// under TCG, reading kubelet and containerd (126 MB) from a virtio root
// disk took 3.6-5.3 s with it and 1.4-1.9 s with 1 or 4 MiB. A root image
// holds programs that are read whole, so the larger window wastes little.
const RootReadaheadKiB = 4096

// setReadahead sets dev's readahead (sysfs's queue/read_ahead_kb under
// classBlock) to RootReadaheadKiB. A failure costs only speed, so it is
// logged, not returned.
func setReadahead(log *slog.Logger, classBlock, dev string) {
	p := filepath.Join(classBlock, filepath.Base(dev), "queue", "read_ahead_kb")
	if err := os.WriteFile(p, []byte(strconv.Itoa(RootReadaheadKiB)), 0o644); err != nil {
		log.Warn("root readahead left at the kernel's default", "dev", dev, "err", err)
	}
}
