package main

import (
	"context"
	"log/slog"

	"github.com/berth-node/berth/config/imds"
	"github.com/berth-node/berth/config/lifecycle"
	"github.com/berth-node/berth/config/lifecycle/watch"
	"github.com/berth-node/berth/config/nodeconfig"
	"github.com/berth-node/berth/config/sources"
	"github.com/berth-node/berth/init/report"
)

// startLifecycle starts the watcher of EC2's lifecycle notices (spot
// interruption, rebalance recommendation, ASG target state) once the
// config phase has read IMDS and the NodeConfig, whose berth.dev/on-*
// annotations say what to do. It runs for the node's life; a notice that
// asks for the shutdown becomes a power request, as the ACPI power button
// does, so it takes whatever shutdown sequence the button takes. Nothing
// here can fail the boot: IMDS errors are the watcher's to log.
func (b *boot) startLifecycle(ctx context.Context, ov imds.Override, use sources.Kind) {
	log := b.log.With("phase", "lifecycle")
	switch {
	case ov.Off:
		log.Info("lifecycle notices not watched: berth.imds=off")
		return
	case use != sources.IMDS:
		// Spot, rebalance and ASG notices come from EC2's IMDS only.
		log.Info("lifecycle notices not watched: user data comes from " + string(use) + ", not IMDS")
		return
	case b.node.instance == nil:
		log.Warn("lifecycle notices not watched: IMDS did not give the instance metadata at boot")
		return
	}
	policy := lifecycle.DefaultPolicy()
	if r := b.node.config; r != nil && r.Config != nil {
		p, err := nodeconfig.LifecyclePolicy(r.Config)
		if err != nil {
			// The config phase has reported it; say what the watcher does instead.
			log.Warn("lifecycle annotations at fault; their defaults apply", "err", err)
		}
		policy = p
	}
	w := watch.New(watch.Options{
		Client:   imds.New(imds.Options{Logger: log, NoTimings: true, Endpoints: ov.Endpoints()}),
		Policy:   policy,
		Log:      log,
		Shutdown: func(n lifecycle.Notice) { b.lifecycleShutdown(log, n) },
		Status:   b.refreshLifecycle,
	})
	b.goSafe(log, "lifecycle", func() { w.Run(ctx) })
}

// lifecycleShutdown asks the power server for the shutdown a notice calls
// for: the power button's path, so kubelet's graceful shutdown runs first.
func (b *boot) lifecycleShutdown(log *slog.Logger, n lifecycle.Notice) {
	b.requestShutdown(log, n.String())
}

// refreshLifecycle takes the watcher's status into the report's lifecycle
// section and, once the boot report is out, rewrites boot.json with it.
func (b *boot) refreshLifecycle(st lifecycle.Status) {
	b.updateReport("lifecycle", func(r *report.Report) { r.Lifecycle = &st })
}
