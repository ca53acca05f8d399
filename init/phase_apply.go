package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/berth-node/berth/fsutil"
	"github.com/berth-node/berth/plan"
)

// phaseApply writes the plan's files, atomically, and its description.
func phaseApply(ctx context.Context, b *boot, log *slog.Logger) error {
	p := b.node.plan
	if p == nil {
		log.Info("skipped: nothing planned")
		return nil
	}
	if err := p.WriteTo("/"); err != nil {
		return err
	}
	keepDNS(b, log)
	if err := fsutil.WriteFileAtomic(plan.DescribePath, p.Describe(), plan.DescribeMode); err != nil {
		return err
	}
	var errs []error
	for _, s := range p.Sysctls {
		if err := writeSysctl(s.Key, s.Value); err != nil {
			errs = append(errs, err)
		}
	}
	rep := b.configReport()
	for _, f := range p.Files {
		rep.Files = append(rep.Files, f.Path)
	}
	log.Info("files written", "count", len(p.Files), "plan", plan.DescribePath)
	return errors.Join(errs...)
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
