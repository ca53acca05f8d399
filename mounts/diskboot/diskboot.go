// Package diskboot boots a node from the berth disk image (disk.raw, see
// image/disk and the table in mounts/partition): it finds the berth-root
// partition, sets up dm-verity on it, reads it whole so that a tampered
// block stops the boot, switches root onto it, and then grows, formats
// when blank and mounts the berth-data partition of the same disk and
// binds /var/lib/kubelet and /var/log onto it, so that kubelet's state and
// the logs survive a reboot. A berth-data partition on any other disk (an
// attached volume, another node's snapshot) is left alone.
//
// It is PID 1's root phase on a disk boot (berth.verity= on the kernel
// command line); what it needs from PID 1 (module loading, a tool runner
// through the reaper, the manifest's tools) comes in Options.
package diskboot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
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
	// NewRoot and Carry are as in mounts.SwitchRootOptions.
	NewRoot string
	Carry   []string
	// ClassBlock is sysfs's class/block directory; "" means
	// partition.ClassBlock. Tests point it at a fixture.
	ClassBlock string
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
	part, err := partition.WaitNamed(ctx, opts.classBlock(), partition.NameRoot, DiskWait)
	if err != nil {
		return nil, fmt.Errorf("disk boot: %w", err)
	}
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
	vstart := time.Now()
	if err := verity.ReadAll(ctx, dev); err != nil {
		var ce *verity.CorruptError
		if errors.As(err, &ce) {
			log.Error("ROOT FILESYSTEM VERIFICATION FAILED: not booting a tampered node", "partition", part, "err", err)
		}
		return nil, fmt.Errorf("disk boot: verifying root partition %s: %w", part, err)
	}
	vr := &mounts.VerityRoot{Partition: part, Device: dev, RootHash: p.RootHash, Verified: true,
		SetupMs: setup.Milliseconds(), VerifyMs: time.Since(vstart).Milliseconds(), DataBytes: int64(p.DataBlocks) * verity.BlockSize}
	log.Info("root verified", "partition", part, "dev", dev, "setup_ms", vr.SetupMs, "verify_ms", vr.VerifyMs, "bytes", vr.DataBytes)
	res, err := mounts.SwitchRoot(ctx, log, mounts.SwitchRootOptions{
		Image:       dev,
		BlockDevice: true,
		NewRoot:     opts.NewRoot,
		Carry:       opts.Carry,
	})
	if err != nil {
		return nil, fmt.Errorf("disk boot: switching to verity root %s: %w", dev, err)
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
