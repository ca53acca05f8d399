package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/berth-node/berth/kmod"
	"github.com/berth-node/berth/manifest"
	"github.com/berth-node/berth/mounts/verity"
	"golang.org/x/sys/unix"
)

// Modules the root phase needs to mount the initramfs's root image: a
// loop device, and the image's file system.
const (
	rootLoopModule   = "loop"
	rootErofsModule  = "erofs"
	modulesPhaseName = "modules"
)

// phaseModules loads the image manifest's preload list and the modules of
// present devices by modalias. Nothing here is fatal: a node may still
// boot without a module, and the report says which failed.
//
// Only what the root phase needs is loaded before the phase ends. The
// devices' modules (the coldplug) and the rest of the preload list load
// beside the root phase, as side steps: the network phase waits for the
// coldplug (its NIC driver), the host phase for the preload (overlay).
// A disk boot finds its root on a disk whose driver the coldplug loads,
// so there everything loads first, as one step.
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
	if m, err := manifest.Load(manifest.DefaultPath); err != nil {
		errs = append(errs, fmt.Errorf("no preload list: %w", err))
	} else {
		preload = m.Preload
		b.node.manifest = m
	}
	_, diskBoot := b.cl.Get(verity.ParamKey)
	now, later := splitPreload(preload, diskBoot, b.cfg.Root != "")
	b.startDevLinks(ctx)
	if diskBoot {
		// No settle wait on the boot path: devices that drivers add late
		// are the hotplug loop's, which runs for as long as PID 1 does.
		loaded, err := kmod.LoadAndColdplug(ctx, log, ix, "/sys", kmod.Options{Preload: now, NoSettle: true})
		b.rep.Modules = append(b.rep.Modules, loaded...)
		if err != nil {
			errs = append(errs, fmt.Errorf("loading modules: %w", err))
		}
		b.startHotplug(ctx, ix)
		log.Info("modules loaded", "count", len(b.rep.Modules))
		return errors.Join(errs...)
	}
	if len(now) > 0 {
		loaded, err := kmod.Load(ctx, log, ix, now...)
		b.rep.Modules = append(b.rep.Modules, loaded...)
		if err != nil {
			errs = append(errs, fmt.Errorf("loading the root's modules: %w", err))
		}
		log.Info("root's modules loaded", "modules", loaded)
	}
	var cold []string
	coldStep := b.goSide(log, sideColdplug, modulesPhaseName, "loading the devices' modules", func() error {
		loaded, err := kmod.LoadAndColdplug(ctx, log, ix, "/sys", kmod.Options{NoSettle: true})
		cold = loaded
		b.startHotplug(ctx, ix)
		log.Info("devices' modules loaded", "count", len(loaded))
		if err != nil {
			return fmt.Errorf("coldplug: %w", err)
		}
		return nil
	})
	coldStep.apply = func() { b.rep.Modules = append(b.rep.Modules, cold...) }
	var pre []string
	preStep := b.goSide(log, sidePreload, modulesPhaseName, "loading the preload modules", func() error {
		// After the coldplug, which the network phase waits for: the two
		// at once would share two CPUs four loads each.
		<-coldStep.done
		if len(later) == 0 {
			return nil
		}
		loaded, err := kmod.Load(ctx, log, ix, later...)
		pre = loaded
		log.Info("preload modules loaded", "modules", loaded)
		if err != nil {
			return fmt.Errorf("preload: %w", err)
		}
		return nil
	})
	preStep.apply = func() { b.rep.Modules = append(b.rep.Modules, pre...) }
	return errors.Join(errs...)
}

// splitPreload divides the preload list into what is loaded before the
// modules phase ends and what loads beside the later phases. A disk boot
// loads everything first; a boot from the initramfs's root image needs
// only the loop device and erofs first; staying on the initramfs
// (berth.root=none), nothing.
func splitPreload(preload []string, diskBoot, rootImage bool) (now, later []string) {
	if diskBoot {
		return preload, nil
	}
	for _, m := range preload {
		if rootImage && slices.Contains([]string{rootLoopModule, rootErofsModule}, kmod.Name(m)) {
			now = append(now, m)
		} else {
			later = append(later, m)
		}
	}
	return now, later
}

// startHotplug starts the loop that loads the modules of devices added
// from now on.
func (b *boot) startHotplug(ctx context.Context, ix *kmod.Index) {
	hlog := b.log.With("phase", "hotplug")
	b.goSafe(hlog, "hotplug", func() {
		err := kmod.Hotplug(ctx, hlog, ix, "/sys", func(mods []string) {
			hlog.Info("modules loaded for a new device", "modules", mods)
		})
		if err != nil {
			hlog.Warn("no module loading for devices added after boot", "err", err)
		}
	})
}

// loadModules loads modules a later phase needs up front, and is the one
// place besides the modules phase itself that adds to the report's list.
// Without a module index (the modules phase failed) it does nothing: the
// kernel's own requests through /sbin/modprobe are what is left.
func (b *boot) loadModules(ctx context.Context, log *slog.Logger, mods ...string) error {
	if b.node.kmod == nil || len(mods) == 0 {
		return nil
	}
	loaded, err := kmod.Load(ctx, log, b.node.kmod, mods...)
	b.rep.Modules = append(b.rep.Modules, loaded...)
	return err
}
