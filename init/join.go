package main

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-node/berth/runtime/supervise"
)

// joinWatcher follows kubelet's log for the node's registration, and until
// it happens repeats on the console the last reason kubelet gave, so a node
// that cannot join says why instead of looping silently.
type joinWatcher struct {
	log        *slog.Logger
	registered chan struct{}
	// onRegistered, if set, is called once when kubelet says it registered
	// the node (boot.noteRegistered puts the time in the report).
	onRegistered func()
	once         sync.Once
	mu           sync.Mutex
	lastErr      string
}

// kubeletRegistered matches kubelet's "Successfully registered node" line.
var kubeletRegistered = regexp.MustCompile(`Successfully registered node`)

// joinErrors are the kubelet lines that say why a node cannot join; other
// errors kubelet logs while it waits (CSINode, checkpoints) say nothing
// about the join and would mislead.
var joinErrors = regexp.MustCompile(`x509: |connection refused|no route to host|i/o timeout|Unauthorized|forbidden|certificate|Unable to register node|failed to run Kubelet|bootstrap|getting credentials|no such host`)

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
	if joinErrors.MatchString(l) {
		w.mu.Lock()
		w.lastErr = l
		w.mu.Unlock()
	}
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
		case <-tick.C:
			w.mu.Lock()
			last := w.lastErr
			w.mu.Unlock()
			if last == "" {
				last = waitingCause(sup.Status())
			}
			if last == "" {
				if k := sup.Service("kubelet"); k != nil {
					last = k.Status().LastError
				}
			}
			if last == "" {
				last = "kubelet has not said why yet"
			}
			w.log.Error("node not registered yet", "cause", joinCause(last))
		}
	}
}

// noteRegistered records the node's registration in the report and, once
// the report is out, rewrites /run/berth/boot.json with it.
func (b *boot) noteRegistered() {
	ms := b.clock().Milliseconds()
	b.repMu.Lock()
	defer b.repMu.Unlock()
	b.rep.RegisteredMs = ms
	if b.reported {
		if err := b.rep.Write(b.reportPath); err != nil {
			b.log.Warn("updating the boot report", "phase", "join", "file", b.reportPath, "err", err)
		}
	}
}

// joinCause shortens a kubelet log line to the part that says why: the
// err="..." value when the line has one (klog's structured form).
func joinCause(l string) string {
	if i := strings.Index(l, `err="`); i >= 0 {
		if q, err := strconv.QuotedPrefix(l[i+len(`err=`):]); err == nil {
			if s, err := strconv.Unquote(q); err == nil {
				return s
			}
		}
	}
	return l
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
		why := s.LastErrorLine
		if why == "" {
			why = s.LastError
		}
		if why == "" {
			why = "it has not said why yet"
		}
		return fmt.Sprintf("kubelet is waiting for %s (%s, %d restarts): %s", s.Name, s.State, s.Restarts, why)
	}
	return ""
}
