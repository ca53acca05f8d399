package shutdown

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-node/berth/init/power"
	"github.com/berth-node/berth/internal/safe"
)

// TestBoundedPanicIsFnsError: a panic in fn comes back at once as fn's
// error, not as the deadline's.
func TestBoundedPanicIsFnsError(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	err := bounded(ctx, discard(), "test", func() error { panic("step bug") })
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("bounded took %v", took)
	}
	var p *safe.Panic
	if !errors.As(err, &p) || p.Value != "step bug" || p.Goroutine != "shutdown: test" {
		t.Errorf("bounded = %v; want the panic as a *safe.Panic", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("bounded waited for its deadline: %v", err)
	}
}

// panicService panics in Stop.
type panicService struct{ sys *fakeSystem }

func (panicService) Name() string { return "buggy" }
func (s panicService) Stop(context.Context) error {
	s.sys.rec("stop buggy")
	panic("stop bug")
}

// panicUnmount is a fakeSystem whose UnmountAll panics.
type panicUnmount struct{ *fakeSystem }

func (p panicUnmount) UnmountAll(context.Context, *slog.Logger) error {
	p.rec("unmount")
	panic("unmount bug")
}

// TestSequenceGoesOnAfterPanics: a panicking step is that step's failure,
// logged; the shutdown still reaches reboot.
func TestSequenceGoesOnAfterPanics(t *testing.T) {
	var buf strings.Builder
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), nil))
	fs := &fakeSystem{}
	sys := panicUnmount{fs}
	svcs := []Stopper{&fakeService{name: "containerd", sys: fs}, panicService{fs}}
	if err := Sequence(context.Background(), log, sys, svcs, power.PowerOff, fastTimeouts()); err == nil {
		t.Fatal("Sequence returned nil after reboot returned")
	}
	fs.mu.Lock()
	calls := fs.calls
	fs.mu.Unlock()
	if want := []string{"stop buggy", "stop containerd", "sync", "unmount", "reboot poweroff"}; !reflect.DeepEqual(calls, want) {
		t.Errorf("calls = %q\nwant    %q", calls, want)
	}
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	for _, s := range []string{
		`msg="panic recovered" phase=shutdown goroutine="shutdown: stop buggy" panic="stop bug"`,
		`msg="service did not stop cleanly" phase=shutdown service=buggy`,
		`err="panic: stop bug"`,
		`msg="unmount incomplete" phase=shutdown`,
		`err="panic: unmount bug"`,
		`msg="calling reboot"`,
	} {
		if !strings.Contains(out, s) {
			t.Errorf("log lacks %q:\n%s", s, out)
		}
	}
}
