package main

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestSideSteps(t *testing.T) {
	b, buf := testBoot()
	release := make(chan struct{})
	var order []string
	var applied bool
	err := b.run(context.Background(), []phase{
		{name: "host", run: func(ctx context.Context, b *boot, log *slog.Logger) error {
			s := b.goSide(log, "bpffs", "host", "mounting bpffs", func() error {
				<-release
				return errors.New("mounting bpffs: no such device")
			})
			s.apply = func() { applied = true }
			return errors.New("overlay failed")
		}},
		{name: "apply", run: func(ctx context.Context, b *boot, log *slog.Logger) error {
			order = append(order, "apply")
			close(release)
			return nil
		}},
		{name: "bus", run: func(ctx context.Context, b *boot, log *slog.Logger) error {
			b.goSide(log, "bug", "bus", "panicking", func() error { panic("bug") })
			return nil
		}},
	})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if len(order) != 1 {
		t.Fatal("the phase after host did not run while host's side step waited for it")
	}
	if !applied {
		t.Error("the side step's result was not applied at the join")
	}
	if got, want := b.rep.Phases[0].Error, "overlay failed; mounting bpffs: no such device"; got != want {
		t.Errorf("host phase error %q, want %q", got, want)
	}
	if got := b.rep.Phases[2].Error; got != "panicking: panic: bug" {
		t.Errorf("bus phase error %q, want the panic named", got)
	}
	if !strings.Contains(buf.String(), "panic recovered") {
		t.Errorf("console lacks the panic:\n%s", buf.String())
	}
	if len(b.sides) != 0 {
		t.Errorf("%d side steps left after the join", len(b.sides))
	}
}

func TestSideStepBounded(t *testing.T) {
	b, buf := testBoot()
	b.sideBound = 20 * time.Millisecond
	stuck := make(chan struct{})
	defer close(stuck)
	var applied bool
	err := b.run(context.Background(), []phase{
		{name: "host", run: func(ctx context.Context, b *boot, log *slog.Logger) error {
			s := b.goSide(log, "bpffs", "host", "mounting bpffs", func() error { <-stuck; return nil })
			s.apply = func() { applied = true }
			return nil
		}},
	})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if applied {
		t.Error("a step that had not ended was applied")
	}
	if got := b.rep.Phases[0].Error; got != "mounting bpffs: still running after 20ms" {
		t.Errorf("host phase error %q", got)
	}
	if !strings.Contains(buf.String(), "phase failed beside the later phases") {
		t.Errorf("console does not say the side step is late:\n%s", buf.String())
	}
}
