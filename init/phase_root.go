package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"time"

	"github.com/berth-node/berth/config/manifest"
	"github.com/berth-node/berth/init/kmod"
	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/mounts"
	"github.com/berth-node/berth/mounts/diskboot"
	"github.com/berth-node/berth/mounts/partition"
	"github.com/berth-node/berth/mounts/verity"
)

// phaseRoot moves onto the read-only root image before any service starts:
// runc cannot pivot_root out of an initramfs.
//
// A disk boot (berth.verity= on the command line, put there by the image
// build) takes the root from the disk's verity-protected partition instead.
// A direct-kernel boot of an image whose manifest names a root disk takes
// it from that disk, behind dm-verity with the manifest's parameters;
// berth.root=PATH still loop-mounts PATH, as for an image built with the
// root in the initramfs (mkimage -root-in-initramfs, or an older one).
func phaseRoot(ctx context.Context, b *boot, log *slog.Logger) error {
	if err := checkImageArch(log, b.node.manifest, runningArch()); err != nil {
		return err
	}
	if v, ok := b.cl.Get(verity.ParamKey); ok {
		slot, _ := b.cl.Get(partition.SlotKey)
		return switchToVerityRoot(ctx, b, log, v, slot, "")
	}
	if b.cfg.Root == "" {
		log.Info("staying on the initramfs (berth.root=none)")
		return nil
	}
	if r := rootDisk(b.node.manifest); r != nil && !b.cfg.RootSet {
		return switchToVerityRoot(ctx, b, log, r.Verity, "", r.Serial)
	}
	carry, release := b.rootModules()
	res, err := mounts.SwitchRoot(ctx, log, mounts.SwitchRootOptions{
		Image:   b.cfg.Root,
		NewRoot: newRoot,
		Carry:   carry,
		Release: release,
	})
	if err != nil {
		hint := "berth.root=none boots without one"
		if errors.Is(err, fs.ErrNotExist) {
			hint += "; a disk image's command line must carry " + verity.ParamKey + "="
		}
		return fmt.Errorf("switching to root image %s (%s): %w", b.cfg.Root, hint, err)
	}
	b.switchedRoot(log)
	b.rep.Root = res
	b.releaseInitramfs(res)
	return nil
}

// rootDisk is the manifest's root disk, or nil when the root is not on a
// disk of its own (in the initramfs, or a disk image's partition).
func rootDisk(m *manifest.Manifest) *manifest.Root {
	if m == nil || m.Root == nil || m.Root.Serial == "" || m.Root.Verity == "" {
		return nil
	}
	return m.Root
}

// switchToVerityRoot is phaseRoot on a disk boot (berth.verity=value; slot
// is berth.slot=, a hint an older image's UKI carries, "" when none) or,
// with serial, on the manifest's root disk:
// mounts/diskboot does the work, with PID 1's module loading, reaper and
// manifest tools.
func switchToVerityRoot(ctx context.Context, b *boot, log *slog.Logger, value, slot, serial string) error {
	carry, release := b.rootModules()
	opts := diskboot.Options{
		Verity:   value,
		Slot:     slot,
		Serial:   serial,
		Run:      b.reaper.Output,
		NewRoot:  newRoot,
		Carry:    carry,
		Release:  release,
		Switched: func() { b.switchedRoot(log) },
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
	b.releaseInitramfs(res)
	return nil
}

// rootModules says what the switch does with the initramfs's modules. An
// image that records its early modules has every module on the root as
// well: the initramfs's copies are released, their memory freed. An older
// image has them only in the initramfs, and they are carried into the
// root. The manifest (/etc/berth) is always carried: it describes the root
// and so cannot be in it.
func (b *boot) rootModules() (carry, release []string) {
	if m := b.node.manifest; m != nil && len(m.EarlyModules) > 0 {
		return []string{"/etc/berth"}, []string{modulesRoot}
	}
	return []string{modulesRoot, "/etc/berth"}, nil
}

// switchedRoot starts loading the root's module index, which lists every
// module (the initramfs's lists the early ones), beside the next phases:
// reading it from the verified root costs 10-25 ms under TCG, which the
// network phase's waits hide. moduleIndex takes it up when a later phase
// loads a module (storage, host, apply). Hotplug keeps the early index: it
// holds every device driver, and its paths now resolve on the root.
func (b *boot) switchedRoot(log *slog.Logger) {
	if b.node.kmod == nil {
		return
	}
	if m := b.node.manifest; m == nil || len(m.EarlyModules) == 0 {
		return // carried: the same index
	}
	dir := b.node.kmod.Dir
	next := make(chan *kmod.Index, 1)
	b.node.kmodNext = next
	b.goSafe(log, "module-index", func() {
		var ix *kmod.Index
		// Sent even on a panic, so moduleIndex never waits forever.
		defer func() { next <- ix }()
		var err error
		if ix, err = kmod.LoadIndex(dir); err != nil {
			log.Warn("the root's module index is unreadable; only the early modules load", "dir", dir, "err", err)
		}
	})
}

// moduleIndex is the module index to load from: the root's once it is
// read (waiting for switchedRoot's load if one is under way), else the
// initramfs's. The phases call it from the main goroutine.
func (b *boot) moduleIndex() *kmod.Index {
	if next := b.node.kmodNext; next != nil {
		b.node.kmodNext = nil
		t := time.NewTimer(moduleIndexWait)
		defer t.Stop()
		select {
		case ix := <-next:
			if ix != nil {
				b.node.kmod = ix
			}
		case <-t.C:
			b.log.Warn("the root's module index did not load in time; only the early modules load",
				"phase", "root", "dir", b.node.kmod.Dir, "waited", moduleIndexWait)
		}
	}
	return b.node.kmod
}

// moduleIndexWait bounds moduleIndex's wait for the root's index: a few
// small files from the root disk, read in milliseconds unless the disk
// hangs, and then boot goes on with the early modules.
const moduleIndexWait = 30 * time.Second

// releaseInitramfs deletes the initramfs's copies of what the root has
// (its modules) beside the next phases: it frees memory, and nothing
// waits for it. The report's root section records what went.
func (b *boot) releaseInitramfs(res *mounts.SwitchResult) {
	log := b.log.With("phase", "root")
	b.goSafe(log, "release-initramfs", func() {
		paths, n := res.ReleaseOld(log)
		if len(paths) == 0 {
			return
		}
		b.updateReport("root", func(*report.Report) { res.Released, res.ReleasedBytes = paths, n })
		log.Info("initramfs copies released", "paths", strings.Join(paths, ","), "bytes", n)
	})
}
