// Package watch polls IMDS for EC2's lifecycle notices (spot
// interruption, rebalance recommendation, ASG target state) and acts on
// lifecycle.Tracker's decisions: it logs them, hands the report its
// status, and calls the shutdown callback for the one notice that ends
// the node. What to do is decided in package lifecycle; this package only
// asks IMDS and calls back.
package watch

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/berth-node/berth/config/imds"
	"github.com/berth-node/berth/config/lifecycle"
)

// DefaultInterval is how often each path is polled. EC2 gives a spot
// instance two minutes; aws-node-termination-handler polls every 2 s and
// EC2's own guidance says every 5 s.
const DefaultInterval = 5 * time.Second

// Options configure a Watcher.
type Options struct {
	// Client asks IMDS; its token handling, answer bounds and refusal of
	// redirects are what the watcher relies on. Give it NoTimings.
	Client *imds.Client
	Policy lifecycle.Policy
	// Interval is the time between rounds; DefaultInterval when zero.
	Interval time.Duration
	Log      *slog.Logger
	// Now is the wall clock for the records; time.Now when nil.
	Now func() time.Time
	// Shutdown is called once, with the notice that asks for the node's
	// shutdown. It must not block for long: the polls wait for it.
	Shutdown func(lifecycle.Notice)
	// Status is called with the report section whenever it changes.
	Status func(lifecycle.Status)
}

// Watcher polls until its context ends.
type Watcher struct {
	opts Options
	// mu guards tracker, for Status from other goroutines.
	mu      sync.Mutex
	tracker *lifecycle.Tracker
}

// New returns a watcher for opts.
func New(opts Options) *Watcher {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Watcher{opts: opts, tracker: lifecycle.NewTracker(opts.Policy, opts.Interval)}
}

// Status is the report section as it stands.
func (w *Watcher) Status() lifecycle.Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.tracker.Status()
}

// Run polls every interval until ctx ends, the first round at once.
func (w *Watcher) Run(ctx context.Context) {
	sigs := w.opts.Policy.Polled()
	if len(sigs) == 0 {
		w.opts.Log.Info("lifecycle notices not watched: every berth.dev/on-* annotation says ignore")
		w.publish()
		return
	}
	paths := make([]string, len(sigs))
	for i, s := range sigs {
		paths[i] = s.Path()
	}
	w.opts.Log.Info("watching IMDS for lifecycle notices", "paths", paths, "interval", w.opts.Interval,
		"spot", w.opts.Policy.Spot, "rebalance", w.opts.Policy.Rebalance, "asg", w.opts.Policy.ASG)
	w.publish()
	tick := time.NewTicker(w.opts.Interval)
	defer tick.Stop()
	for {
		w.Round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Round polls each watched path once and acts on what it finds. The
// round is bounded by the interval, so a hung IMDS never piles polls up.
func (w *Watcher) Round(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, w.opts.Interval)
	defer cancel()
	changed := false
	var down *lifecycle.Notice
	for _, sig := range w.opts.Policy.Polled() {
		body, err := w.opts.Client.Get(ctx, sig.Path())
		r := lifecycle.Result{Body: body}
		switch {
		case errors.Is(err, imds.ErrNotFound):
			r.NotFound = true
		case err != nil:
			if ctx.Err() != nil && errors.Is(err, context.Canceled) {
				return // shutting down: not a failure of IMDS
			}
			r.Err = err
		}
		w.mu.Lock()
		d := w.tracker.Observe(w.opts.Now(), sig, r)
		w.mu.Unlock()
		changed = w.act(sig, d) || changed
		if d.Action == lifecycle.ActionShutdown {
			down = d.Notice
		}
	}
	if changed {
		w.publish()
	}
	// After the report has the notice: the shutdown may end the machine
	// before anything else is written.
	if down != nil && w.opts.Shutdown != nil {
		w.opts.Shutdown(*down)
	}
}

// act logs a decision and calls back; it says whether the status changed.
func (w *Watcher) act(sig lifecycle.Signal, d lifecycle.Decision) bool {
	log := w.opts.Log
	if d.Recovered {
		log.Info("IMDS answers again", "path", sig.Path(), "failures", d.Failures)
	}
	if d.LogErr != nil {
		log.Warn("polling IMDS for a lifecycle notice failed; will keep polling", "path", sig.Path(),
			"not_logged_since_last", d.Suppressed, "err", d.LogErr)
	}
	if d.Withdrawn != nil {
		log.Info("lifecycle notice withdrawn", "notice", d.Withdrawn.String())
	}
	if d.Notice == nil {
		return d.LogErr != nil
	}
	attrs := []any{"signal", string(sig), "notice", d.Notice.String(), "action", string(d.Action)}
	if d.Why != "" {
		attrs = append(attrs, "why", d.Why)
	}
	if d.Action == lifecycle.ActionShutdown {
		log.Warn("lifecycle notice: "+d.Message(), attrs...)
	} else {
		log.Info("lifecycle notice: "+d.Message(), attrs...)
	}
	return true
}

func (w *Watcher) publish() {
	if w.opts.Status != nil {
		w.opts.Status(w.Status())
	}
}
