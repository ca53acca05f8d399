package safe

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func testLog() (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return slog.New(slog.NewTextHandler(&lockedWriter{w: &buf}, nil)), &buf
}

func TestGoRecoversAndReports(t *testing.T) {
	log, buf := testLog()
	got := make(chan *Panic, 1)
	Go(log, "worker", func() { panic("boom") }, func(p *Panic) { got <- p })
	select {
	case p := <-got:
		if p.Goroutine != "worker" || p.Value != "boom" || !strings.Contains(string(p.Stack), "safe_test.go") {
			t.Errorf("panic %+v: want worker/boom with a stack naming the test", p)
		}
		if p.Error() != "panic: boom" {
			t.Errorf("error text %q", p.Error())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("onPanic not called")
	}
	if !strings.Contains(buf.String(), "panic recovered") || !strings.Contains(buf.String(), "goroutine=worker") {
		t.Errorf("log lacks the panic line: %s", buf.String())
	}
}

func TestGoWithoutPanicDoesNotReport(t *testing.T) {
	done := make(chan struct{})
	var reported atomic.Bool
	Go(nil, "fine", func() { close(done) }, func(*Panic) { reported.Store(true) })
	<-done
	time.Sleep(10 * time.Millisecond)
	if reported.Load() {
		t.Error("onPanic called without a panic")
	}
}

func TestCallTurnsPanicIntoError(t *testing.T) {
	log, _ := testLog()
	err := Call(log, "phase", func() error { panic(errors.New("nil map")) })
	var p *Panic
	if !errors.As(err, &p) || p.Goroutine != "phase" {
		t.Fatalf("Call = %v, want a *Panic for phase", err)
	}
	want := errors.New("plain")
	if err := Call(log, "phase", func() error { return want }); err != want {
		t.Errorf("Call passed %v, want the function's own error", err)
	}
}

func TestLoopRestartsAfterPanic(t *testing.T) {
	log, _ := testLog()
	var calls atomic.Int32
	done := make(chan struct{})
	loop(log, "reaper", func() {
		if calls.Add(1) < 3 {
			panic("again")
		}
		close(done)
	}, time.Millisecond)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("loop ran %d times, want a third run after two panics", calls.Load())
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("%d runs, want 3", n)
	}
}
