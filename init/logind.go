package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/berth-node/berth/init/plan"
	"github.com/berth-node/berth/runtime/logind"
)

// startLogind serves the system bus with login1 and systemd1 for kubelet's
// graceful node shutdown, and puts the PrepareForShutdown step into the
// shutdown sequence ahead of kubelet's stop. Called before kubelet starts,
// once kubelet's stopper is registered, so it runs first on the way down.
// A failure only costs the graceful shutdown: berth's pod stopper still
// stops the pods, as it did before.
func (b *boot) startLogind(ctx context.Context, log *slog.Logger, p *plan.Plan) {
	kubelet := false
	for _, s := range p.Services {
		kubelet = kubelet || s.Name == "kubelet"
	}
	if !kubelet {
		return
	}
	llog := b.log.With("phase", "logind")
	srv, err := logind.Listen(logind.Options{Log: llog})
	if err != nil {
		log.Warn("kubelet's graceful node shutdown is unavailable: berth's pod stopper alone will stop the pods", "err", err)
		return
	}
	b.goSafe(llog, "logind", func() {
		if err := srv.Serve(ctx); err != nil {
			llog.Error("the system bus stopped serving; kubelet's graceful node shutdown is lost", "err", err)
		}
	})
	log.Info("system bus served for kubelet's shutdown inhibitor", "socket", logind.SystemBusSocket, "inhibit_delay_max", srv.InhibitDelayMax().String())
	b.addStopper(logindStopper{srv: srv, b: b})
}

// logindStopper is the shutdown step "emit PrepareForShutdown, wait for
// the inhibitors". It stops nothing itself.
type logindStopper struct {
	srv *logind.Server
	b   *boot
}

// Name implements shutdown.Stopper.
func (logindStopper) Name() string { return "PrepareForShutdown" }

// stopMargin is what the step's bound adds to the wait's own: the signal
// sends, the status margin and the bookkeeping.
const stopMargin = 5 * time.Second

// statusMargin is how long kubelet keeps running after it released its
// inhibitor: it releases as soon as the pods are dead, while its status
// manager is still sending their terminated-by-node-shutdown status to the
// API server. On a systemd host logind's own shutdown takes at least this
// long before kubelet gets SIGTERM; without the pause the API server only
// learns of the pods when the node lease expires.
const statusMargin = 2 * time.Second

// StopTimeout implements shutdown.Bounded: the wait is kubelet's
// shutdownGracePeriod (as logind.conf.d now says) plus margins.
func (l logindStopper) StopTimeout() time.Duration { return l.srv.WaitBound() + stopMargin }

// Stop implements shutdown.Stopper.
func (l logindStopper) Stop(ctx context.Context) error {
	res := l.srv.PrepareForShutdown(ctx)
	l.b.noteShutdown(func(sr *shutdownReport) { sr.Inhibitors = &res })
	if len(res.Inhibitors) > 0 && !res.TimedOut {
		select {
		case <-time.After(statusMargin):
		case <-ctx.Done():
		}
	}
	return nil
}
