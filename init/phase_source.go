package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/berth-node/berth/config/imds"
	"github.com/berth-node/berth/config/platform"
	"github.com/berth-node/berth/config/sources"
	"github.com/berth-node/berth/config/userdataurl"
	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/mounts/seeddisk"
)

// sysRoot is sysfs, where DMI says whether this is an EC2 instance.
const sysRoot = "/sys"

// phaseSource decides where user data comes from (config/sources), before
// the network phase: a NoCloud seed's network-config configures the
// network, and a machine that DMI says is not EC2 must spend no time on
// IMDS. On EC2 it reads DMI and nothing else. Elsewhere it scans the block
// devices for a seed and, when there is one, reads it now, so that the
// network phase takes its network-config and the config phase its
// user-data and meta-data. Fatal: a seed that is there but wrong (an empty
// user-data, a network-config berth cannot apply), two seeds or a bad
// berth.userdata= stop the boot as a bad NodeConfig does.
func phaseSource(ctx context.Context, b *boot, log *slog.Logger) error {
	ud, udSet := b.cl.Get(userdataurl.CmdlineKey)
	in := sources.Inputs{
		EC2:         platform.DetectEC2(os.DirFS(sysRoot)),
		IMDS:        imds.ParseOverride(b.cl.Get(imds.CmdlineKey)),
		UserData:    ud,
		UserDataSet: udSet,
	}
	d, err := sources.Decide(in)
	if err == nil && d.NeedScan {
		sc := seeddisk.Find(ctx, log, seeddisk.ClassBlock, "/dev")
		in.Seeds = &sc
		d, err = sources.Decide(in)
	}
	rep := &report.Source{Use: d.Use, Entries: d.Entries, EC2: in.EC2}
	b.rep.Source = rep
	b.node.source = &d
	for _, e := range d.Entries {
		log.Info("config source", "source", e.Source, "used", e.Used, "where", e.Where, "why", e.Why)
	}
	if err != nil {
		return err
	}
	if d.Use != sources.Seed {
		return nil
	}
	v := d.Seed
	if err := b.loadModules(ctx, log, seeddisk.Modules(v.FS)...); err != nil {
		return fmt.Errorf("loading the %s modules for the NoCloud seed %s: %w", v.FS, v.Device, err)
	}
	seed, err := seeddisk.Read(ctx, log, v, seeddisk.MountDir)
	if err != nil {
		return err
	}
	rep.Seed = &report.Seed{
		Volume:        v,
		InstanceID:    seed.Seed.MetaData.InstanceID,
		LocalHostname: seed.Seed.MetaData.LocalHostname,
		Network:       seed.Network,
		Warnings:      seed.Warnings,
	}
	for _, w := range seed.Warnings {
		log.Warn("NoCloud seed "+v.Device+": "+w.Error(), "device", v.Device)
	}
	if err := seeddisk.Err(seed, v.Device); err != nil {
		// One line each, as a bad NodeConfig's problems are, before the
		// FATAL line that sums them up.
		for _, p := range seed.Errors {
			log.Error("NoCloud seed "+v.Device+": "+p.Error(), "device", v.Device)
		}
		return err
	}
	b.node.seed = seed
	log.Info("NoCloud seed read", "device", v.Device, "fs", v.FS, "instance_id", seed.Seed.MetaData.InstanceID,
		"local_hostname", seed.Seed.MetaData.LocalHostname, "network_config", seed.Network != nil)
	return nil
}
