package main

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"runtime"

	"github.com/berth-node/berth/config/manifest"
	"github.com/berth-node/berth/config/nocloud"
	"github.com/berth-node/berth/config/sources"
	"github.com/berth-node/berth/config/userdataurl"
	"github.com/berth-node/berth/init/plan"
	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/network"
	"golang.org/x/sys/unix"
)

// phasePlan decides every file and service; pure, so a failure here is a
// config problem, named by the plan.
func phasePlan(ctx context.Context, b *boot, log *slog.Logger) error {
	if b.node.config == nil {
		log.Info("skipped: no NodeConfig")
		return nil
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
	in := plan.Inputs{Config: b.node.config.Config, Instance: b.node.instance, Manifest: man, Host: host}
	if in.Instance == nil {
		d := b.node.source
		if d == nil || d.Use == sources.IMDS {
			return errors.New("no instance metadata (berth.imds=off): the plan needs instance id, type and zone")
		}
		// Not an EC2 instance: the plan names and sizes the node as
		// plan.Machine says; its IP is the one the network phase set up.
		in.Machine = offEC2Machine(d, b.node.seed)
		in.Host.NodeIP = firstIPv4(b.node.net)
	}
	p, err := plan.Build(in)
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

// offEC2Machine is what identifies a node that is not an EC2 instance,
// from the source phase's choice: a seed's meta-data, or nothing but where
// the user data came from.
func offEC2Machine(d *sources.Decision, seed *nocloud.Inspection) *plan.Machine {
	switch d.Use {
	case sources.Seed:
		m := &plan.Machine{Source: "NoCloud seed " + d.Seed.Device}
		if seed != nil {
			m.InstanceID, m.Hostname = seed.Seed.MetaData.InstanceID, seed.Seed.MetaData.LocalHostname
		}
		return m
	case sources.URL:
		return &plan.Machine{Source: userdataurl.CmdlineKey + "=" + d.URL.Where}
	}
	return &plan.Machine{Source: "the image"}
}

// firstIPv4 is the first IPv4 address the network phase configured, ""
// when none.
func firstIPv4(n *network.Result) string {
	if n == nil {
		return ""
	}
	for _, a := range n.Addresses {
		if p, err := netip.ParsePrefix(a); err == nil && p.Addr().Is4() {
			return p.Addr().String()
		}
	}
	return ""
}

func memoryMiB() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit) >> 20
}
