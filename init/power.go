package main

import (
	"context"
	"errors"
	"log/slog"
	"syscall"
	"time"

	"github.com/berth-node/berth/config/cmdline"
	"github.com/berth-node/berth/init/power"
	"github.com/berth-node/berth/init/shutdown"
	"github.com/berth-node/berth/internal/safe"
	"github.com/berth-node/berth/runtime/logind"
)

// startPowerServer acts on power requests (signals, power button) for as
// long as PID 1 lives.
func (b *boot) startPowerServer(ctx context.Context) {
	safe.Loop(b.log, "power-server", func() {
		for {
			select {
			case <-ctx.Done():
				return
			case req := <-b.power:
				b.shutdown(ctx, req)
			}
		}
	})
}

// addStopper registers what the shutdown sequence stops, in reverse order
// of registration: each phase registers its own (storage, services, logind).
func (b *boot) addStopper(s shutdown.Stopper) {
	b.downMu.Lock()
	defer b.downMu.Unlock()
	b.services = append(b.services, s)
}

// requestShutdown asks for a graceful power-off for reason (a spot notice,
// an ASG lifecycle state): the same path as the power button, so kubelet
// gets PrepareForShutdown and drains first. It never blocks: when the
// backlog is full, shutdowns are already on their way.
//
// The request is logged before it is sent, as the signal and ACPI paths
// do: once sent, the power server may log the shutdown's first steps
// before this goroutine runs again, and the console must say why the node
// goes down before it shows it going (seen on a loaded host: the
// PrepareForShutdown line came first).
func (b *boot) requestShutdown(log *slog.Logger, reason string) {
	log.Info("shutdown requested", "reason", reason)
	select {
	case b.power <- power.Request{Mode: power.PowerOff, Reason: reason}:
	default:
		log.Warn("shutdown request dropped: others are pending and the first goes ahead", "reason", reason)
	}
}

// shutdownReport is boot.json's shutdown section.
type shutdownReport struct {
	Reason  string          `json:"reason"`
	Mode    string          `json:"mode"`
	StartMs int64           `json:"startMs"`
	Steps   []shutdown.Step `json:"steps"`
	// Inhibitors is the PrepareForShutdown step's detail: kubelet's
	// graceful node shutdown, when it holds an inhibitor.
	Inhibitors *logind.Result `json:"inhibitors,omitempty"`
}

// noteShutdown updates boot.json's shutdown section and rewrites the file:
// during a long drain, boot.json says which step the node is in.
func (b *boot) noteShutdown(update func(*shutdownReport)) {
	b.repMu.Lock()
	defer b.repMu.Unlock()
	sr, _ := b.rep.Shutdown.(*shutdownReport)
	if sr == nil {
		return
	}
	update(sr)
	err := b.writeReport()
	switch {
	case err == nil:
	case errors.Is(err, syscall.EROFS):
		// The unmount step made /run read-only: the steps after it
		// are on the console only, as they must be.
		b.log.Debug("boot report not updated after the unmount", "phase", "shutdown", "err", err)
	default:
		b.log.Warn("updating the boot report", "phase", "shutdown", "file", b.reportPath, "err", err)
	}
}

// shutdown runs the shutdown sequence; one at a time, since a power
// request and berth.onfail may both ask. It returns only if the sequence
// failed to end the machine.
func (b *boot) shutdown(ctx context.Context, req power.Request) {
	b.downMu.Lock()
	defer b.downMu.Unlock()
	b.log.Info("power request", "phase", "shutdown", "reason", req.Reason, "mode", req.Mode.String())
	if b.endShell != nil {
		b.endShell()
	}
	b.repMu.Lock()
	b.rep.Shutdown = &shutdownReport{Reason: req.Reason, Mode: req.Mode.String(), StartMs: b.clock().Milliseconds(), Steps: []shutdown.Step{}}
	b.repMu.Unlock()
	if err := safe.Call(b.log, "shutdown", func() error {
		return shutdown.SequenceWith(ctx, b.log, b.sys, b.services, req.Mode, b.timeouts, func(st shutdown.Step) {
			b.noteShutdown(func(sr *shutdownReport) { sr.Steps = append(sr.Steps, st) })
		})
	}); err != nil {
		b.log.Error("shutdown did not end the machine; waiting for another request", "phase", "shutdown", "err", err)
	}
}

// onFailAction is the decision half of berth.onfail.
type onFailAction struct {
	stay  bool
	mode  power.Mode
	delay time.Duration
}

func decideOnFail(o cmdline.OnFail) onFailAction {
	switch o.Action {
	case cmdline.Stay:
		return onFailAction{stay: true}
	case cmdline.Halt:
		return onFailAction{mode: power.Halt}
	case cmdline.PowerOff:
		return onFailAction{mode: power.PowerOff}
	}
	return onFailAction{mode: power.Reboot, delay: o.Delay}
}

// onFail follows the berth.onfail policy after a fatal boot error. A power
// request during the reboot countdown is served meanwhile by the power
// server, and ends the machine first.
func (b *boot) onFail(ctx context.Context, o cmdline.OnFail) {
	log := b.log.With("phase", "onfail")
	a := decideOnFail(o)
	if a.stay {
		log.Error("boot failed; staying up as berth.onfail asks (power button and signals still work)", "policy", o.String())
		return // the power server goes on serving requests
	}
	log.Error("boot failed; following berth.onfail", "policy", o.String(), "action", a.mode.String(), "in_s", int(a.delay/time.Second))
	if a.delay > 0 {
		deadline := time.NewTimer(a.delay)
		defer deadline.Stop()
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		left := a.delay
	wait:
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				left -= 10 * time.Second
				if left > 0 {
					log.Error("boot failed; "+a.mode.String()+" soon", "in_s", int(left/time.Second))
				}
			case <-deadline.C:
				break wait
			}
		}
	}
	b.shutdown(ctx, power.Request{Mode: a.mode, Reason: "berth.onfail " + o.String()})
}
