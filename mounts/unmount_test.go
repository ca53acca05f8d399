package mounts

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/internal/safe"
	"github.com/berth-node/berth/internal/syncbuf"
)

// TestUnmountPanicIsItsError: a panic on the unmount goroutine is logged
// with its stack and comes back at once as UnmountAll's error, so the
// shutdown goes on to reboot.
func TestUnmountPanicIsItsError(t *testing.T) {
	var buf syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	start := time.Now()
	err := boundedUnmount(context.Background(), log, func(context.Context, *slog.Logger) error { panic("unmount bug") })
	if took := time.Since(start); took > unmountTimeout/2 {
		t.Errorf("took %v: it waited for the deadline", took)
	}
	var p *safe.Panic
	if !errors.As(err, &p) || err.Error() != "unmounting: panic: unmount bug" {
		t.Errorf("err = %v; want the panic", err)
	}
	if out := buf.String(); !strings.Contains(out, `msg="panic recovered" goroutine=unmount panic="unmount bug" stack=`) {
		t.Errorf("the panic was not logged with its stack:\n%s", out)
	}
}

// TestUnmountHangIsAbandoned: an unmount that hangs is given up at the
// deadline.
func TestUnmountHangIsAbandoned(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := boundedUnmount(ctx, nil, func(context.Context, *slog.Logger) error { <-release; return nil })
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "an unmount is hanging") {
		t.Errorf("err = %v; want the deadline", err)
	}
}
