package supervise

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// panicOnce returns a test hook that panics the first time it sees stage
// for service, and records the service's pid at that moment in pid.
func panicOnce(h **harness, service, stage string, pid *atomic.Int64) func(string, string) {
	var done atomic.Bool
	return func(svc, st string) {
		if svc != service || st != stage || done.Swap(true) {
			return
		}
		if pid != nil {
			pid.Store(int64((*h).sup.Service(svc).Status().PID))
		}
		panic("test panic at " + stage)
	}
}

// TestSupervisionPanicRestartsTheService: a panic on a service's goroutine
// while its process runs is that service's failure: logged with its stack,
// in its status, the orphaned process stopped, and the service restarted
// on the backoff schedule, still supervised; PID 1 (the test binary) lives.
func TestSupervisionPanicRestartsTheService(t *testing.T) {
	var h *harness
	var first atomic.Int64
	h = prepare(t, []Spec{{Name: "svc", Argv: []string{"/bin/sleep", "60"}, Env: testEnv, StopTimeout: 2 * time.Second}},
		Options{testHook: panicOnce(&h, "svc", "supervise", &first)})
	h.sup.Start(h.ctx)
	svc := h.sup.Service("svc")
	var st Status
	waitFor(t, "a restart after the panic", 15*time.Second, func() bool {
		st = svc.Status()
		return st.Restarts == 1 && st.State == StateReady && st.PID != 0
	})
	old := int(first.Load())
	if old == 0 || st.PID == old {
		t.Fatalf("pid before the panic %d, after %d; want a new process", old, st.PID)
	}
	if !strings.Contains(st.LastError, "supervising svc: panic: test panic at supervise") {
		t.Errorf("last error %q; want the panic", st.LastError)
	}
	if st.LastExit == nil || st.LastExit.Signal != syscall.SIGTERM {
		t.Errorf("last exit %v; want the orphaned process stopped by SIGTERM", st.LastExit)
	}
	if err := syscall.Kill(old, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the process left by the panicked run (pid %d) is still there: kill(0) = %v", old, err)
	}
	log := h.console.String()
	for _, want := range []string{
		`msg="panic recovered" service=svc goroutine="supervise svc" panic="test panic at supervise" stack=`,
		`msg="stopping the service's process: its supervision panicked" service=svc pid=`,
		`msg="service exited" service=svc restarts=1 next_in=100ms err="supervising svc: panic: test panic at supervise"`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("console lacks %s", want)
		}
	}
	select {
	case <-svc.Ready():
	default:
		t.Error("the service never reported ready")
	}
}

// TestPanicOnEveryStartIsBackedOff: a panic on every pass does not spin
// and does not hang Stop; the status shows it all along.
func TestPanicOnEveryStartIsBackedOff(t *testing.T) {
	h := newHarness(t, []Spec{{Name: "svc", Argv: []string{"/bin/sleep", "60"}, Env: testEnv, StopTimeout: time.Second}},
		Options{testHook: func(_, stage string) {
			if stage == "start" {
				panic("always")
			}
		}})
	svc := h.sup.Service("svc")
	start := time.Now()
	waitFor(t, "two restarts", 15*time.Second, func() bool { return svc.Status().Restarts >= 2 })
	if took := time.Since(start); took < time.Second {
		t.Errorf("two panicking passes in %v: a panic on every pass must be held to one a second", took)
	}
	st := svc.Status()
	if st.PID != 0 || !strings.Contains(st.LastError, "supervising svc: panic: always") || st.ReadyMs != 0 {
		t.Errorf("status %+v; want no process, never ready, the panic as the last error", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start = time.Now()
	if err := svc.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Stop took %v", took)
	}
	if st := svc.Status(); st.State != StateStopped {
		t.Errorf("state %s after Stop", st.State)
	}
}

// panicProber panics at its first check and is ready after.
type panicProber struct{ calls atomic.Int32 }

func (p *panicProber) Check(context.Context) (string, error) {
	if p.calls.Add(1) == 1 {
		panic("probe bug")
	}
	return "ok", nil
}

// TestProbePanicFailsTheRun: a panic in the readiness check fails that
// run's probe: the process is stopped and restarted, and says why.
func TestProbePanicFailsTheRun(t *testing.T) {
	h := newHarness(t, []Spec{{Name: "svc", Argv: []string{"/bin/sleep", "60"}, Env: testEnv, StopTimeout: time.Second}},
		Options{Probers: map[string]Prober{"svc": &panicProber{}}})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := h.sup.WaitReady(ctx, "svc"); err != nil {
		t.Fatal(err)
	}
	st := h.sup.Service("svc").Status()
	if st.Restarts != 1 || st.LastExit == nil || st.LastExit.Signal != syscall.SIGTERM ||
		!strings.Contains(st.LastError, "readiness probe: panic: probe bug") {
		t.Errorf("status %+v; want one restart after a SIGTERM for the probe's panic", st)
	}
	if !strings.Contains(h.console.String(), `reason="readiness probe: panic: probe bug"`) {
		t.Errorf("console does not give the reason for the exit")
	}
}

// TestOutputReaderPanic: a panic in the output reader stops the lines but
// still closes its done channel at the end of the output, and keeps
// draining the pipe, so the service neither blocks on a full pipe nor dies
// of SIGPIPE: it writes well over a pipe's 64 KiB and exits 3 on its own.
func TestOutputReaderPanic(t *testing.T) {
	var h *harness
	h = prepare(t, []Spec{{Name: "svc",
		Argv: sh(`echo first; i=0; while [ $i -lt 20000 ]; do echo "line $i"; i=$((i+1)); done; exit 3`),
		Env:  testEnv, StopTimeout: time.Second}},
		Options{testHook: panicOnce(&h, "svc", "line", nil)})
	svc := h.sup.Service("svc")
	proc, done, err := svc.start()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the reader never closed its done channel after a panic")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := proc.Wait(ctx)
	if err != nil || st.Signal != 0 || st.Code != 3 {
		t.Errorf("service ended %v, %v; want exit status 3 (not SIGPIPE, not stuck)", st, err)
	}
	if tail := svc.Tail(0); slices.Contains(tail, "line 19999") {
		t.Errorf("lines still reached the ring after the reader's panic: %d lines", len(tail))
	}
	if s := svc.Status(); !strings.Contains(s.LastError, "reading the output: panic: test panic at line") {
		t.Errorf("last error %q; want the reader's panic", s.LastError)
	}
}

// TestCallbackPanics: a panicking OnChange or AfterReady is the callback's
// failure, not the service's: it still becomes ready, its dependents start.
func TestCallbackPanics(t *testing.T) {
	h := newHarness(t, []Spec{
		{Name: "a", Argv: []string{"/bin/sleep", "60"}, Env: testEnv, StopTimeout: time.Second},
		{Name: "b", Argv: []string{"/bin/sleep", "60"}, Env: testEnv, StopTimeout: time.Second, DependsOn: []string{"a"}},
	}, Options{
		OnChange:   func(string, State) { panic("report bug") },
		AfterReady: map[string]func(context.Context) error{"a": func(context.Context) error { panic("hook bug") }},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := h.sup.WaitReady(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	for _, st := range h.sup.Status() {
		if st.State != StateReady || st.Restarts != 0 {
			t.Errorf("status %+v; want ready, never restarted", st)
		}
	}
	if st := h.sup.Service("a").Status(); st.LastError != "after-ready hook: panic: hook bug" {
		t.Errorf("a's last error %q; want the hook's panic", st.LastError)
	}
}
