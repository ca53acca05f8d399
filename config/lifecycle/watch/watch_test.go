package watch

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-node/berth/config/imds"
	"github.com/berth-node/berth/config/lifecycle"
	"github.com/berth-node/berth/qemu-tests/imdsserver"
)

// interval is the watcher's poll interval here, which also bounds each
// round: at 50 ms a round starved for a moment on a loaded 2-core host
// (a -race run beside a TCG guest) ran out, and "no notice, no error"
// failed for want of CPU, not of a correct watcher.
const interval = 500 * time.Millisecond

// rig is a watcher against the IMDS stand-in, with what it called back.
type rig struct {
	srv *imdsserver.Server
	w   *Watcher

	mu        sync.Mutex
	shutdowns []lifecycle.Notice
	status    lifecycle.Status
	logs      bytes.Buffer
}

func newRig(t *testing.T, p lifecycle.Policy) *rig {
	t.Helper()
	srv, err := imdsserver.New(imdsserver.Config{Instance: imdsserver.DefaultInstance()})
	if err != nil {
		t.Fatal(err)
	}
	url, stop, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	r := &rig{srv: srv}
	log := slog.New(slog.NewTextHandler(lockedWriter{r}, nil))
	c := imds.New(imds.Options{Endpoints: []string{url}, NoTimings: true, AttemptTimeout: 200 * time.Millisecond,
		BackoffBase: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond})
	t.Cleanup(c.Close)
	r.w = New(Options{Client: c, Policy: p, Interval: interval, Log: log,
		Shutdown: func(n lifecycle.Notice) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.shutdowns = append(r.shutdowns, n)
		},
		Status: func(s lifecycle.Status) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.status = s
		}})
	return r
}

type lockedWriter struct{ r *rig }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	return w.r.logs.Write(p)
}

func (r *rig) run(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("the watcher did not stop within 5 s of its context's end")
		}
	})
}

func (r *rig) snapshot() ([]lifecycle.Notice, lifecycle.Status, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]lifecycle.Notice(nil), r.shutdowns...), r.status, r.logs.String()
}

// waitFor polls cond for up to 30 s: a bound, not a timing (ten polls at
// the rig's interval take 5 s).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: not within 30 s", what)
}

// No notice: 404s, no callback, no error lines. A spot notice appears:
// the shutdown callback is called once, with the notice, however many
// polls see it after; the status names it.
func TestWatcherSpotNotice(t *testing.T) {
	r := newRig(t, lifecycle.DefaultPolicy())
	r.run(t)
	waitFor(t, "three polls of each path", func() bool {
		n := 0
		for _, q := range r.srv.Requests() {
			if q.Path == "/latest/meta-data/spot/instance-action" {
				n++
			}
		}
		return n >= 3
	})
	if s, st, logs := r.snapshot(); len(s) != 0 || st.Errors != 0 || strings.Contains(logs, "level=WARN") {
		t.Fatalf("with no notice: shutdowns %v, errors %d, logs:\n%s", s, st.Errors, logs)
	}
	at := time.Now().Add(2 * time.Minute).UTC().Truncate(time.Second)
	appeared := time.Now()
	if err := r.srv.SetSpotAction("terminate", at); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the shutdown callback", func() bool { s, _, _ := r.snapshot(); return len(s) > 0 })
	t.Logf("notice to callback: %s (interval %s)", time.Since(appeared).Round(time.Millisecond), interval)
	time.Sleep(5 * interval) // more polls that see the same notice
	s, st, logs := r.snapshot()
	want := lifecycle.Notice{Signal: lifecycle.Spot, Detail: "terminate", Time: at}
	if len(s) != 1 || s[0] != want {
		t.Fatalf("shutdown callbacks %+v, want exactly one with %+v", s, want)
	}
	if st.Shutdown == nil || st.Shutdown.Notice != want || st.Shutdown.Action != lifecycle.ActionShutdown {
		t.Errorf("status shutdown record: %+v", st.Shutdown)
	}
	if !strings.Contains(logs, "lifecycle notice: spot interruption notice: terminate at "+at.Format(time.RFC3339)+": starting the graceful shutdown") {
		t.Errorf("no console line naming the notice:\n%s", logs)
	}
	for _, q := range r.srv.Requests() {
		if q.Method == "GET" && !q.TokenPresent {
			t.Errorf("GET %s without a session token", q.Path)
		}
	}
}

// An ASG termination asks for the shutdown, a rebalance only logs, a
// withdrawn notice is logged as such.
func TestWatcherASGAndRebalance(t *testing.T) {
	r := newRig(t, lifecycle.DefaultPolicy())
	if err := r.srv.SetLifecycleState("InService"); err != nil {
		t.Fatal(err)
	}
	if err := r.srv.SetRebalance(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	r.run(t)
	waitFor(t, "two notices recorded", func() bool { _, st, _ := r.snapshot(); return len(st.Notices) == 2 })
	if s, _, _ := r.snapshot(); len(s) != 0 {
		t.Fatalf("InService and a rebalance recommendation asked for a shutdown: %+v", s)
	}
	if err := r.srv.SetRebalance(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := r.srv.SetLifecycleState("Terminated"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the shutdown callback", func() bool { s, _, _ := r.snapshot(); return len(s) == 1 })
	waitFor(t, "the withdrawal logged", func() bool { _, _, l := r.snapshot(); return strings.Contains(l, "lifecycle notice withdrawn") })
	s, _, _ := r.snapshot()
	if s[0] != (lifecycle.Notice{Signal: lifecycle.ASG, Detail: "Terminated"}) {
		t.Errorf("shutdown for %+v", s[0])
	}
}

// A broken IMDS is logged once, not once a poll, and never stops the
// watcher: when it answers again, a notice still gets through. An expired
// token is replaced without an error.
func TestWatcherErrorsBoundedAndRecovers(t *testing.T) {
	r := newRig(t, lifecycle.Policy{Spot: lifecycle.ActionShutdown, Rebalance: lifecycle.ActionIgnore, ASG: lifecycle.ActionIgnore})
	if err := r.srv.SetFault(imdsserver.Fault{Mode: imdsserver.FaultStatus, Status: 500}); err != nil {
		t.Fatal(err)
	}
	r.run(t)
	waitFor(t, "ten failed polls", func() bool { return r.w.Status().Errors >= 10 })
	r.srv.ClearFault()
	_, _, logs := r.snapshot()
	if n := strings.Count(logs, "polling IMDS for a lifecycle notice failed"); n != 1 {
		t.Errorf("%d error lines for 10+ failures, want 1:\n%s", n, logs)
	}
	r.srv.ExpireTokens()
	if err := r.srv.SetSpotAction("stop", time.Now().Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the shutdown callback after recovery", func() bool { s, _, _ := r.snapshot(); return len(s) == 1 })
	_, st, logs := r.snapshot()
	if !strings.Contains(logs, "IMDS answers again") {
		t.Errorf("no recovery line:\n%s", logs)
	}
	if len(st.Polling) != 1 || st.Polling[0] != lifecycle.Spot.Path() {
		t.Errorf("polling %v, want only the spot path", st.Polling)
	}
	for _, q := range r.srv.Requests() {
		if strings.Contains(q.Path, "rebalance") || strings.Contains(q.Path, "autoscaling") {
			t.Errorf("an ignored path was polled: %s", q.Path)
		}
	}
}

// Every signal ignored: nothing is polled and Run returns.
func TestWatcherAllIgnored(t *testing.T) {
	r := newRig(t, lifecycle.Policy{Spot: lifecycle.ActionIgnore, Rebalance: lifecycle.ActionIgnore, ASG: lifecycle.ActionIgnore})
	r.w.Run(context.Background())
	if q := r.srv.Requests(); len(q) != 0 {
		t.Errorf("requests with everything ignored: %+v", q)
	}
}
