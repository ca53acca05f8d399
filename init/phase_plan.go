package main

import (
	"context"
	"errors"
	"log/slog"
	"runtime"

	"github.com/berth-node/berth/config/manifest"
	"github.com/berth-node/berth/init/plan"
	"github.com/berth-node/berth/init/report"
	"golang.org/x/sys/unix"
)

// phasePlan decides every file and service; pure, so a failure here is a
// config problem, named by the plan.
func phasePlan(ctx context.Context, b *boot, log *slog.Logger) error {
	if b.node.config == nil {
		log.Info("skipped: no NodeConfig")
		return nil
	}
	md := b.node.instance
	if md == nil {
		return errors.New("no instance metadata (berth.imds=off): the plan needs instance id, type and zone")
	}
	man := b.node.manifest
	if man == nil {
		man = &manifest.Manifest{}
	}
	host := plan.Host{CPUs: runtime.NumCPU(), MemoryMiB: memoryMiB()}
	if n := b.node.net; n != nil {
		host.Nameservers = n.DNS
		host.SearchDomains = n.Search
	}
	p, err := plan.Build(plan.Inputs{Config: b.node.config.Config, Instance: md, Manifest: man, Host: host})
	if err != nil {
		return err
	}
	b.node.plan = p
	sum := &report.Plan{NodeName: p.NodeName, NodeIP: p.NodeIP, ProviderID: p.ProviderID, MaxPods: p.MaxPods, Warnings: p.Warnings}
	for _, s := range p.Services {
		sum.Services = append(sum.Services, s.Name)
	}
	b.rep.Plan = sum
	for _, w := range p.Warnings {
		log.Warn(w)
	}
	log.Info("planned", "node", p.NodeName, "max_pods", p.MaxPods, "files", len(p.Files), "services", len(p.Services))
	return nil
}

func memoryMiB() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit) >> 20
}
