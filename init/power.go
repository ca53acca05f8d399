package main

import (
	"context"
	"time"

	"github.com/berth-node/berth/cmdline"
	"github.com/berth-node/berth/power"
	"github.com/berth-node/berth/safe"
	"github.com/berth-node/berth/shutdown"
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
				b.shutdown(ctx, req.Mode)
			}
		}
	})
}

// addService registers a started service for the shutdown sequence.
func (b *boot) addService(s shutdown.Stopper) {
	b.downMu.Lock()
	defer b.downMu.Unlock()
	b.services = append(b.services, s)
}

// shutdown runs the shutdown sequence; one at a time, since a power
// request and berth.onfail may both ask. It returns only if the sequence
// failed to end the machine.
func (b *boot) shutdown(ctx context.Context, mode power.Mode) {
	b.downMu.Lock()
	defer b.downMu.Unlock()
	if err := safe.Call(b.log, "shutdown", func() error {
		return shutdown.Sequence(ctx, b.log, b.sys, b.services, mode, b.timeouts)
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
	b.shutdown(ctx, a.mode)
}
