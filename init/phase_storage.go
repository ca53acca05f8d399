package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/berth-node/berth/mounts/instancestore"
	"github.com/berth-node/berth/mounts/localstorage"
)

// phaseStorage puts instance-store disks under containerd's and kubelet's
// state before anything is written there. Its own policy decides whether a
// failure is fatal (localstorage returns an error only then).
func phaseStorage(ctx context.Context, b *boot, log *slog.Logger) error {
	if b.node.plan == nil || b.node.plan.Storage == nil || b.node.plan.Storage.Strategy == "" {
		log.Info("skipped: no spec.instance.localStorage strategy")
		b.rep.Storage = &localstorage.Result{Status: localstorage.StatusSkipped, Reason: "no spec.instance.localStorage strategy in the NodeConfig"}
		return nil
	}
	ls := b.node.plan.Storage
	scfg, err := instancestore.LoadConfig(instancestore.ConfigPath)
	if err != nil {
		return fmt.Errorf("instance-store matcher config: %w", err)
	}
	opts := localstorage.Options{
		Strategy:   localstorage.Strategy(ls.Strategy),
		MountPath:  ls.MountPath,
		Match:      scfg.Match,
		Filesystem: scfg.Filesystem,
		Fatal:      scfg.Fatal,
		Force:      scfg.Force,
	}
	for _, d := range ls.DisabledMounts {
		opts.DisabledMounts = append(opts.DisabledMounts, string(d))
	}
	var tools map[string]string
	if b.node.manifest != nil {
		tools = b.node.manifest.Tools
	}
	if err := b.loadModules(ctx, log, b.node.plan.StorageModules...); err != nil {
		log.Warn("loading storage modules", "err", err)
	}
	env := localstorage.DefaultEnv(tools)
	env.Run = b.reaper.Output
	res, err := localstorage.Run(ctx, log, opts, env)
	b.node.storage = res
	if res != nil {
		b.rep.Storage = res
		// Registered here, by the phase that mounted: the stop sequence
		// runs stoppers in reverse, so this one, first in the list, runs
		// after the services phase's (kubelet, the pods, containerd).
		b.addStopper(storageStopper{res: res, log: b.log.With("phase", "shutdown")})
	}
	return err
}

// storageStopper unmounts the instance-store binds and array after
// containerd has stopped, before the final sync and power-off.
type storageStopper struct {
	res *localstorage.Result
	log *slog.Logger
}

func (storageStopper) Name() string { return "instance-store" }

func (s storageStopper) Stop(ctx context.Context) error {
	return localstorage.Teardown(ctx, s.log, s.res, localstorage.DefaultEnv(nil))
}
