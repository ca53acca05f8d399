package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/berth-node/berth/mounts"
	"github.com/berth-node/berth/mounts/diskboot"
	"github.com/berth-node/berth/mounts/verity"
)

// phaseRoot moves onto the read-only root image before any service starts:
// runc cannot pivot_root out of an initramfs.
//
// A disk boot (berth.verity= on the command line, put there by the image
// build) takes the root from the disk's verity-protected partition instead.
func phaseRoot(ctx context.Context, b *boot, log *slog.Logger) error {
	if err := checkImageArch(log, b.node.manifest, runningArch()); err != nil {
		return err
	}
	if v, ok := b.cl.Get(verity.ParamKey); ok {
		return switchToVerityRoot(ctx, b, log, v)
	}
	if b.cfg.Root == "" {
		log.Info("staying on the initramfs (berth.root=none)")
		return nil
	}
	res, err := mounts.SwitchRoot(ctx, log, mounts.SwitchRootOptions{
		Image:   b.cfg.Root,
		NewRoot: newRoot,
		Carry:   []string{modulesRoot, "/etc/berth"},
	})
	if err != nil {
		hint := "berth.root=none boots without one"
		if errors.Is(err, fs.ErrNotExist) {
			hint += "; a disk image's command line must carry " + verity.ParamKey + "="
		}
		return fmt.Errorf("switching to root image %s (%s): %w", b.cfg.Root, hint, err)
	}
	b.rep.Root = res
	return nil
}

// switchToVerityRoot is phaseRoot on a disk boot (berth.verity=value):
// mounts/diskboot does the work, with PID 1's module loading, reaper and
// manifest tools.
func switchToVerityRoot(ctx context.Context, b *boot, log *slog.Logger, value string) error {
	opts := diskboot.Options{
		Verity:  value,
		Run:     reaperRunner(b.reaper),
		NewRoot: newRoot,
		Carry:   []string{modulesRoot, "/etc/berth"},
		LoadModules: func(ctx context.Context, mods ...string) error {
			return b.loadModules(ctx, log, mods...)
		},
	}
	if b.node.manifest != nil {
		opts.Tools = b.node.manifest.Tools
	}
	res, err := diskboot.SwitchRoot(ctx, log, opts)
	if err != nil {
		return err
	}
	b.rep.Root = res
	return nil
}
