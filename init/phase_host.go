package main

import (
	"context"
	"log/slog"
	"os"
	"strings"

	"github.com/berth-node/berth/init/kmod"
	"github.com/berth-node/berth/internal/efivar"
	"github.com/berth-node/berth/mounts"
	"github.com/berth-node/berth/mounts/hostfs"
	"github.com/berth-node/berth/mounts/localstorage"
	"github.com/berth-node/berth/update/status"
)

// phaseHost shapes the filesystem as EKS add-ons expect of an Amazon Linux
// or Bottlerocket host (mounts/hostfs): writable /opt/cni/bin and /opt/csi,
// /etc/cni/net.d, /var/run → /run, bpffs, shared propagation, kubelet's
// plugin directories. It runs after storage, whose binds over
// /var/lib/kubelet the plugin directories must be made in and whose mounts
// must be shared, and before apply and services, which start what uses
// them. Not fatal: a node without bpffs or a writable /opt/cni/bin still
// runs the pods that need neither, and the report says what is missing.
// Last, it points the kernel's module requests at PID 1's own executable
// (kmod.ServeRequestsFrom), so the on-demand loads of boot and of the
// add-ons never exec berth cold from the compressed root.
func phaseHost(ctx context.Context, b *boot, log *slog.Logger) error {
	opts := hostfs.Options{Root: "/", Shared: hostSharedMounts(b), SaveSuffix: bootIDPrefix()}
	// The kernel asks for bpf_preload on every bpffs mount. A kernel that
	// has the module gets it loaded now, from the index, so the request
	// is answered without running /sbin/modprobe; one that has none
	// (Debian's 6.1: CONFIG_BPF_PRELOAD is off) gets its request turned
	// away without running it.
	if ix := b.moduleIndex(); ix != nil {
		if ix.Known(bpfPreloadModule) {
			if err := b.loadModules(ctx, log, bpfPreloadModule); err != nil {
				log.Warn("bpf_preload not loaded; bpffs will have no maps.debug or progs.debug", "err", err)
			}
		} else {
			opts.NoBPFPreload = true
		}
	}
	b.rep.Firmware = firmwareState(ctx, b, log)
	b.rep.Update = updateStatus(ctx, b, log)
	res, err := hostfs.Run(ctx, log, opts)
	b.rep.Host = res
	// From here on (the FORWARD policy's nf_tables is the first request of
	// a boot) the kernel runs PID 1's in-memory berth as modprobe.
	if err := kmod.ServeRequestsFrom(kmod.RequestKnob, kmod.RequestLink, kmod.SelfExe); err != nil {
		log.Warn("the kernel's module requests stay with /sbin/modprobe", "err", err)
	} else {
		log.Debug("the kernel's module requests go to PID 1's executable", "modprobe", kmod.RequestLink)
	}
	var overlays []string
	for _, o := range res.Overlays {
		overlays = append(overlays, o.Target+"="+o.Status)
	}
	log.Info("host layout", "overlays", strings.Join(overlays, ","), "var_run", res.VarRun.Action,
		"made_shared", strings.Join(res.MadeShared, ","), "errors", len(res.Errors), "ms", res.DurationMs)
	return err
}

// bpfPreloadModule pins the BPF iterators maps.debug and progs.debug in
// every bpffs; the kernel asks for it when bpffs is mounted.
const bpfPreloadModule = "bpf_preload"

// hostSharedMounts are the mounts the root and storage phases made, which
// must be shared too: the data partition and its binds on a disk boot, the
// instance-store filesystems and their binds.
func hostSharedMounts(b *boot) []string {
	var out []string
	if sr, ok := b.rep.Root.(*mounts.SwitchResult); ok && sr.Data != nil && sr.Data.Mount != "" {
		out = append(out, sr.Data.Mount)
		out = append(out, sr.Data.Binds...)
	}
	if s := b.node.storage; s != nil && s.Status == localstorage.StatusReady {
		for _, f := range s.Filesystems {
			out = append(out, f.Mount)
		}
		for _, bd := range s.Binds {
			out = append(out, bd.Target)
		}
	}
	return out
}

// bootIDPrefix names what is moved aside this boot; empty when the boot ID
// cannot be read (hostfs then uses a fixed name).
func bootIDPrefix() string {
	id, err := os.ReadFile(bootIDPath)
	if err != nil {
		return ""
	}
	s := strings.TrimSpace(string(id))
	if len(s) > 8 {
		s = s[:8]
	}
	return s
}

// firmwareState mounts efivarfs (read-only) on a UEFI boot and reads what
// the firmware says of Secure Boot and systemd-boot of the entry it
// started; nil on a boot without UEFI.
func firmwareState(ctx context.Context, b *boot, log *slog.Logger) *efivar.Firmware {
	if _, err := os.Stat(efivar.FirmwareDir); err != nil {
		return nil
	}
	if err := b.loadModules(ctx, log, "efivarfs"); err != nil {
		log.Warn("efivarfs module not loaded", "err", err)
	}
	if _, err := efivar.Mount(); err != nil {
		log.Warn("UEFI variables unreadable; the report cannot say whether Secure Boot is on", "err", err)
		return &efivar.Firmware{UEFI: true, Error: err.Error()}
	}
	f := efivar.State(efivar.Dir)
	log.Info("firmware", "uefi", f.UEFI, "secure_boot", f.SecureBoot, "setup_mode", f.SetupMode, "loader", f.Loader, "entry", f.Entry)
	if f.Error != "" {
		log.Warn("UEFI variables", "err", f.Error)
	}
	return &f
}

// updateStatus says which image version runs from which root slot, and
// whether systemd-boot started it on trial, from what firmwareState just
// read: no other file or variable is read for it.
func updateStatus(ctx context.Context, b *boot, log *slog.Logger) *status.Status {
	// The slot the root phase found by hash, not berth.slot=: a release's
	// one UKI boots from either slot, and an older one's hint was checked.
	var slot, slotBy string
	if r, ok := b.rep.Root.(*mounts.SwitchResult); ok && r.Verity != nil {
		slot, slotBy = r.Verity.Slot, r.Verity.SlotBy
	}
	var version string
	if m := b.node.manifest; m != nil {
		version = m.BerthVersion
	}
	s := status.Of(status.Facts{Firmware: b.rep.Firmware, Slot: slot, SlotBy: slotBy, Version: version})
	level := slog.LevelInfo
	if s.Error != "" {
		level = slog.LevelWarn
	}
	log.Log(ctx, level, "update state", "version", s.Version, "slot", s.Slot, "slot_by", s.SlotBy, "boot", s.Boot, "entry", s.Entry,
		"trial", s.Trial, "tries_left", s.TriesLeft, "tries_done", s.TriesDone, "err", s.Error)
	return &s
}
