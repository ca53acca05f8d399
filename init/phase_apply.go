package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/berth-node/berth/init/kmod"
	"github.com/berth-node/berth/init/plan"
	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/internal/fsutil"
	"github.com/berth-node/berth/network"
	"github.com/berth-node/berth/runtime/kubelet"
)

// phaseApply writes the plan's files, atomically, and its description.
func phaseApply(ctx context.Context, b *boot, log *slog.Logger) error {
	p := b.node.plan
	if p == nil {
		log.Info("skipped: nothing planned")
		return nil
	}
	rep := &report.Apply{}
	b.rep.Apply = rep
	// Read before writing: afterwards the image's files are gone.
	for _, path := range p.Overridden(os.ReadFile) {
		log.Warn("registry mirrors from berth.dev/registry-mirrors replace the image's hosts.toml", "path", path)
		rep.Overridden = append(rep.Overridden, path)
	}
	if err := p.WriteTo("/"); err != nil {
		return err
	}
	keepDNS(b, log)
	if err := fsutil.WriteFileAtomic(plan.DescribePath, p.Describe(), plan.DescribeMode); err != nil {
		return err
	}
	writePulledRecords(log, rep, "/", p.PulledRecords, time.Now())
	blockModules(b, log, rep, p.BlockedModules)
	sysctls, held := heldForTrial(b.rep.Update, p.Sysctls)
	if len(held) > 0 {
		log.Info("sysctls held armed for the trial boot, until it is blessed", "keys", held)
	}
	errs := applySysctls(ctx, b, log, rep, p.KernelModules, sysctls)
	applyHostname(log, rep, p.Hostname)
	b.retime(ctx, log, p.NTPServers)
	for _, f := range p.Files {
		rep.Files = append(rep.Files, f.Path)
	}
	log.Info("files written", "count", len(p.Files), "plan", plan.DescribePath)
	return errors.Join(errs...)
}

// writePulledRecords merges the plan's pull records of preloaded images
// into kubelet's (kubelet.MergePulledRecord) under root, before kubelet
// starts: kubelet reads them all once at its start and keeps them in
// memory. A record berth cannot read or write is left as it is and
// reported; the node works without it until kubelet pulls one of those
// images under another name.
func writePulledRecords(log *slog.Logger, rep *report.Apply, root string, recs []kubelet.PulledRecord, now time.Time) {
	if len(recs) == 0 {
		return
	}
	fail := func(path string, err error) {
		log.Warn("leaving kubelet's pull record of a preloaded image as it is", "path", path, "err", err)
		rep.PulledRecordErrors = append(rep.PulledRecordErrors, fmt.Sprintf("%s: %v", path, err))
	}
	if err := os.MkdirAll(filepath.Join(root, kubelet.PulledRecordsDir), 0o700); err != nil {
		fail(kubelet.PulledRecordsDir, err)
		return
	}
	for _, r := range recs {
		path := kubelet.PulledRecordPath(r.ImageRef)
		at := filepath.Join(root, path)
		old, err := os.ReadFile(at)
		if errors.Is(err, fs.ErrNotExist) {
			old, err = nil, nil
		}
		if err != nil {
			fail(path, err)
			continue
		}
		out, changed, err := kubelet.MergePulledRecord(old, r, now)
		if err != nil {
			fail(path, err)
			continue
		}
		if !changed {
			continue
		}
		if err := fsutil.WriteFileAtomic(at, out, 0o600); err != nil {
			fail(path, err)
			continue
		}
		rep.PulledRecords = append(rep.PulledRecords, path)
	}
	log.Info("kubelet pull records of preloaded images", "images", len(recs), "written", len(rep.PulledRecords), "dir", kubelet.PulledRecordsDir)
}

// applySysctls loads the modules user data asks for, writes the plan's
// sysctls and returns the errors of the required ones. The modules some
// keys live in are loaded first, with the user's (a user's sysctl may
// live in a module the user names): the modules phase's preload list may
// not have them, and a key that does not exist yet cannot be written. A
// module that does not load, and any other failed write, is logged and
// put in the report's warnings, naming the module or key; boot goes on
// without it.
func applySysctls(ctx context.Context, b *boot, log *slog.Logger, rep *report.Apply, userMods []string, sysctls []kubelet.Sysctl) []error {
	mods := slices.Clone(userMods)
	for _, m := range kubelet.SysctlModules(sysctls) {
		if !slices.Contains(mods, m) {
			mods = append(mods, m)
		}
	}
	if len(mods) > 0 {
		if err := b.loadModules(ctx, log, mods...); err != nil {
			log.Warn("loading the modules user data and sysctls need", "modules", mods, "err", err)
			rep.ModuleErrors = append(rep.ModuleErrors, err.Error())
		}
	}
	var errs []error
	for _, s := range sysctls {
		err := writeSysctl(s.Key, s.Value)
		switch {
		case err == nil:
		case s.Required:
			errs = append(errs, err)
		default:
			if s.Module != "" {
				err = fmt.Errorf("%w (the key comes with module %s)", err, s.Module)
			}
			log.Warn("sysctl not set", "key", s.Key, "err", err)
			rep.SysctlErrors = append(rep.SysctlErrors, err.Error())
		}
	}
	return errs
}

// blockModules hands the modules user data blocks to the hotplug loop
// (berth modprobe reads them from the plan's file, written just before),
// and warns of each that is in the kernel already: the image's preload
// list and the devices present at boot were loaded before user data was
// read, and berth unloads nothing.
func blockModules(b *boot, log *slog.Logger, rep *report.Apply, blocked []string) {
	if len(blocked) == 0 {
		return
	}
	set := map[string]bool{}
	for _, m := range blocked {
		set[kmod.Name(m)] = true
		if _, err := os.Stat("/sys/module/" + kmod.Name(m)); err == nil {
			log.Warn("a module user data blocks is in the kernel already (built in, preloaded by the image, or a device's at boot); it stays", "module", m)
			rep.ModuleErrors = append(rep.ModuleErrors, fmt.Sprintf("%s: blocked by user data, but in the kernel already (built in, or loaded before user data was read)", m))
		}
	}
	b.node.blockedModules.Store(&set)
	log.Info("modules blocked by user data", "modules", blocked)
}

// applyHostname sets the machine's hostname the plan decided (user
// data's, over instance metadata's, which the config phase set). Not
// fatal: the node's name is kubelet's --hostname-override, not this.
func applyHostname(log *slog.Logger, rep *report.Apply, name string) {
	if name == "" {
		return
	}
	if err := network.SetHostname(name); err != nil {
		log.Error("setting the hostname from user data", "hostname", name, "err", err)
		return
	}
	rep.Hostname = name
	log.Info("hostname from user data", "hostname", name)
}

// writeSysctl sets one kernel parameter. /proc/sys takes no temporary
// files, so this is the one write berth does in place; the kernel applies
// it whole or not at all.
func writeSysctl(key, value string) error {
	path := "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", key, value, err)
	}
	if _, err := f.WriteString(value + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("sysctl %s=%s: writing %s: %w", key, value, path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", key, value, err)
	}
	return nil
}

// keepDNS tells the DHCP renewer which of resolv.conf's settings the
// NodeConfig owns, so a renewal does not overwrite them with the lease's.
// Only the fields the NodeConfig set are pinned; one it left empty goes on
// following DHCP, as it did at boot.
func keepDNS(b *boot, log *slog.Logger) {
	p := b.node.plan
	if p.DNS == nil || b.node.netH == nil || b.node.config == nil || b.node.config.Config == nil {
		return
	}
	set := b.node.config.Config.Spec.Instance.Network
	var ns, search []string
	if len(set.Nameservers) > 0 {
		ns = p.DNS.Nameservers
	}
	if len(set.Domains) > 0 {
		search = p.DNS.Search
	}
	if err := b.node.netH.SetDNSOverride(ns, search); err != nil {
		log.Error("DHCP renewals may overwrite spec.instance.network's resolv.conf settings", "err", err)
	}
}
