package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/runtime/kubelet/joincause"
	"github.com/berth-node/berth/runtime/supervise"
)

// joinWatcher follows kubelet's log for the node's registration, and until
// it happens repeats on the console the reason kubelet gives, so a node
// that cannot join says why instead of looping silently. Which line is the
// reason is joincause's decision.
type joinWatcher struct {
	log        *slog.Logger
	registered chan struct{}
	// onRegistered, if set, is called once when kubelet says it registered
	// the node (boot.noteRegistered puts the time in the report).
	onRegistered func()
	once         sync.Once
	mu           sync.Mutex
	causes       joincause.Tracker
}

// kubeletRegistered matches kubelet's "Successfully registered node" line.
var kubeletRegistered = regexp.MustCompile(`Successfully registered node`)

func (w *joinWatcher) line(l string) {
	if kubeletRegistered.MatchString(l) {
		w.once.Do(func() {
			close(w.registered)
			if w.onRegistered != nil {
				w.onRegistered()
			}
		})
		return
	}
	w.mu.Lock()
	w.causes.Observe(l, time.Now())
	w.mu.Unlock()
}

// kubeletCause is the cause kubelet's own lines give at now, or "".
func (w *joinWatcher) kubeletCause(now time.Time) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.causes.Cause(now)
}

// cause is what the console says at now: kubelet's own cause, else why
// kubelet has not started, else the supervisor's complaint about it.
func (w *joinWatcher) cause(now time.Time, sup *supervise.Supervisor) string {
	c := w.kubeletCause(now)
	if c == "" {
		c = waitingCause(sup.Status())
	}
	if c == "" {
		if k := sup.Service("kubelet"); k != nil {
			c = k.Status().LastError
		}
	}
	if c == "" {
		c = "kubelet has not said why yet"
	}
	return c
}

func (w *joinWatcher) run(ctx context.Context, sup *supervise.Supervisor) {
	tick := time.NewTicker(joinNagInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.registered:
			w.log.Info("node registered with the API server")
			return
		case now := <-tick.C:
			w.log.Error("node not registered yet", "cause", w.cause(now, sup))
		}
	}
}

// noteRegistered records the node's registration in the report and, once
// the report is out, rewrites /run/berth/boot.json with it.
func (b *boot) noteRegistered() {
	ms := b.clock().Milliseconds()
	b.updateReport("join", func(r *report.Report) { r.RegisteredMs = ms })
}

// waitingCause says why kubelet has not run at all: the first service
// before it that is not ready, in that service's own words (containerd
// crash-looping on a bad config, say). Empty once kubelet has started.
func waitingCause(sts []supervise.Status) string {
	i := slices.IndexFunc(sts, func(s supervise.Status) bool { return s.Name == "kubelet" })
	if i < 0 || !sts[i].StartedAt.IsZero() {
		return ""
	}
	for _, s := range sts[:i] {
		if s.State == supervise.StateReady {
			continue
		}
		// What its last failed run died of comes first: a run starting
		// again logs errors that are no cause (containerd's CNI complaint).
		why := cmp.Or(s.ExitErrorLine, s.LastErrorLine, s.LastError, "it has not said why yet")
		return fmt.Sprintf("kubelet is waiting for %s (%s, %d restarts): %s", s.Name, s.State, s.Restarts, why)
	}
	return ""
}
