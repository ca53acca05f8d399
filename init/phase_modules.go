package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/berth-node/berth/config/manifest"
	"github.com/berth-node/berth/init/kmod"
	"golang.org/x/sys/unix"
)

// phaseModules loads the image manifest's preload list and the modules of
// present devices by modalias. Nothing here is fatal: a node may still
// boot without a module, and the report says which failed.
func phaseModules(ctx context.Context, b *boot, log *slog.Logger) error {
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return fmt.Errorf("uname: %w", err)
	}
	dir := modulesRoot + "/" + unix.ByteSliceToString(uts.Release[:])
	ix, err := kmod.LoadIndex(dir)
	if err != nil {
		return fmt.Errorf("loading module index from %s: %w", dir, err)
	}
	b.node.kmod = ix
	var errs []error
	var preload []string
	if m, raw, err := manifest.LoadDeferred(manifest.DefaultPath); err != nil {
		errs = append(errs, fmt.Errorf("no preload list: %w", err))
	} else {
		preload = m.Preload
		b.node.manifest = m
		b.decodeAccepts(log, raw)
	}
	// No settle wait on the boot path: devices that drivers add late are
	// the hotplug loop's, which runs for as long as PID 1 does.
	loaded, err := kmod.LoadAndColdplug(ctx, log, ix, "/sys", kmod.Options{Preload: preload, NoSettle: true})
	b.rep.Modules = append(b.rep.Modules, loaded...)
	if err != nil {
		errs = append(errs, fmt.Errorf("loading modules: %w", err))
	}
	hlog := b.log.With("phase", "hotplug")
	b.goSafe(hlog, "hotplug", func() {
		err := kmod.Hotplug(ctx, hlog, ix, "/sys", b.node.moduleBlocked, func(mods []string) {
			hlog.Info("modules loaded for a new device", "modules", mods)
		})
		if err != nil {
			hlog.Warn("no module loading for devices added after boot", "err", err)
		}
	})
	b.startDevLinks(ctx)
	log.Info("modules loaded", "count", len(b.rep.Modules))
	return errors.Join(errs...)
}

// loadModules loads modules a later phase needs up front, and is the one
// place besides the modules phase itself that adds to the report's list.
// Without a module index (the modules phase failed) it does nothing: the
// kernel's own requests through /sbin/modprobe are what is left.
func (b *boot) loadModules(ctx context.Context, log *slog.Logger, mods ...string) error {
	ix := b.moduleIndex()
	if ix == nil || len(mods) == 0 {
		return nil
	}
	loaded, err := kmod.Load(ctx, log, ix, mods...)
	b.rep.Modules = append(b.rep.Modules, loaded...)
	return err
}
