// Package agent is berth's update agent on the node: for as long as PID 1
// runs, it settles what became of the last update (it took, it was rolled
// back, it was cut off), carries a trial boot to its end (bless the new
// version once the Node has stayed Ready, or mark it bad and reboot into
// the previous one), applies the update the node's own Node object asks
// for (annotation berth.dev/update-to), and says where it stands on the
// Node (berth.dev/update-state and its neighbours), in boot.json and on
// the console.
//
// What to do is decided by pure functions: Settle and Act here, and
// packages trial and apply; this package reads the Node, acts on the ESP
// and the slots (packages esp and apply) and keeps its state in a file on
// the data partition.
package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/berth-node/berth/mounts/partition"
	"github.com/berth-node/berth/mounts/verity"
	"github.com/berth-node/berth/runtime/nodeobject"
	"github.com/berth-node/berth/update/apply"
	"github.com/berth-node/berth/update/bootcount"
	"github.com/berth-node/berth/update/esp"
	"github.com/berth-node/berth/update/nodeapi"
	"github.com/berth-node/berth/update/repo"
	"github.com/berth-node/berth/update/status"
	"github.com/berth-node/berth/update/trial"
)

// Annotations on the node's Node object and the update states, as
// package nodeapi names them (the rollout controller reads the same).
const (
	AnnotationUpdateTo       = nodeapi.AnnotationUpdateTo
	AnnotationAllowDowngrade = nodeapi.AnnotationAllowDowngrade
	AnnotationVersion        = nodeapi.AnnotationVersion
	AnnotationSlot           = nodeapi.AnnotationSlot
	AnnotationState          = nodeapi.AnnotationState
	AnnotationReason         = nodeapi.AnnotationReason

	StateIdle        = nodeapi.StateIdle
	StateDownloading = nodeapi.StateDownloading
	StateRebooting   = nodeapi.StateRebooting
	StateTrial       = nodeapi.StateTrial
	StateBlessed     = nodeapi.StateBlessed
	StateRolledBack  = nodeapi.StateRolledBack
	StateRefused     = nodeapi.StateRefused
	StateFailed      = nodeapi.StateFailed
)

// Node is the node's own Node object; *nodeobject.Client is one.
type Node interface {
	Get(ctx context.Context) (nodeobject.Node, error)
	Annotate(ctx context.Context, set map[string]*string) error
}

// Disk reaches the boot disk's ESP and root slots.
type Disk interface {
	// MountESP mounts the EFI System Partition and says where, and how
	// to unmount it.
	MountESP(ctx context.Context) (dir string, unmount func() error, err error)
	// Slot is slot s's partition device on the boot disk, and its size.
	Slot(s partition.Slot) (dev string, size int64, err error)
}

// Repository is where updates come from.
type Repository struct {
	// MetadataURL is the TUF repository; empty turns updates off.
	MetadataURL, TargetsURL string
	// TrustedRoot is the root.json the image carries.
	TrustedRoot []byte
}

// Options are what Run needs. Every func may be nil but Reboot.
type Options struct {
	Log *slog.Logger
	// Node reads and annotates the Node; nil when the node joins no
	// cluster (then nothing is judged by Ready, and no trigger comes).
	Node Node
	// Status is this boot's (status.Of).
	Status status.Status
	// Arch is the node's architecture (GOARCH).
	Arch string
	// BootStart is when this boot began, by the wall clock.
	BootStart time.Time
	Trial     trial.Config
	Repo      Repository
	// StateDir keeps state.json and the repository's metadata cache,
	// on the data partition (/var/lib/berth/update).
	StateDir string
	Disk     Disk
	// Reboot asks PID 1 for its ordered reboot (kubelet's graceful node
	// shutdown first) and returns at once.
	Reboot func(reason string)
	// Changed is called with the state whenever its outcome changes,
	// for boot.json.
	Changed func(State)
	// Verify checks a written slot (apply.Request.Verify); nil checks it
	// in user space. On a node, VerifySlot: the kernel's dm-verity.
	Verify func(ctx context.Context, dev string, p verity.Param) (int64, error)
	// HangPanic arms (true) or disarms the kernel's panics on a hang (a
	// hung task, a soft lockup): a trial boot keeps them armed until it
	// is blessed, so that a hang becomes a panic, a reboot and a spent
	// try. nil leaves them alone.
	HangPanic func(armed bool) error
	// Poll is how often the Node is read (default 10 s).
	Poll time.Duration
	Now  func() time.Time
}

// DefaultPoll is how often the agent reads its Node.
const DefaultPoll = 10 * time.Second

type agent struct {
	o     Options
	log   *slog.Logger
	s     State
	trial bool
	// booted is systemd-boot's entry for this boot (Name empty off it).
	booted bootcount.Entry
	// readySince is when this boot's current unbroken Ready began, as
	// the agent saw it; zero when the Node is not Ready.
	readySince time.Time
	// published is what was last annotated, so that an unchanged state
	// is not patched again.
	published map[string]string
	retryAt   time.Time
	backoff   time.Duration
	// failed is the trigger (Raw) the backoff is for: a trigger that
	// changes, or is removed and set again, is the operator asking
	// anew, and is tried at once.
	failed string
	// waiting is the wait last logged, so it is said once.
	waiting string
	done    bool
	// esp is what the ESP held when the agent started; only the agent
	// changes it, so a trial judges by it without mounting the ESP at
	// every look.
	esp []bootcount.Entry
}

// Run runs the agent until ctx ends or it has asked for a reboot. Errors
// it meets are logged and reported, never returned: a node must keep
// running whatever its updates do.
func Run(ctx context.Context, o Options) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Poll == 0 {
		o.Poll = DefaultPoll
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	a := &agent{o: o, log: o.Log, trial: o.Status.Trial, published: map[string]string{}}
	a.start(ctx)
	for !a.done {
		wait := a.step(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// start loads the state and settles the last update.
func (a *agent) start(ctx context.Context) {
	s, err := loadState(a.o.StateDir)
	if err != nil {
		a.log.Warn("update state", "err", err)
	}
	a.s = s
	var entries []bootcount.Entry
	if a.o.Status.Boot == status.BootSystemdBoot && a.o.Disk != nil {
		if a.booted, err = bootcount.Parse(a.o.Status.Entry); err != nil {
			a.log.Warn("update: the booted entry", "entry", a.o.Status.Entry, "err", err)
		}
		if entries, err = a.entries(ctx); err != nil {
			a.log.Warn("update: listing the UKIs on the ESP", "err", err)
		}
		a.esp = entries
	}
	before := a.s.Last
	a.s = Settle(a.s, a.o.Status.Version, a.trial, entries, a.o.Now().UTC())
	if a.trial && a.s.Pending == nil {
		// The state was lost (a new data partition): the trial goes on,
		// from what the ESP says.
		a.s.Pending = &Pending{Phase: PhaseStaged, To: a.o.Status.Version, Entry: a.booted.Name, Slot: a.o.Status.Slot, At: a.o.Now().UTC()}
		a.s.Last = &status.LastUpdate{Result: ResultTrial, To: a.o.Status.Version, Slot: a.o.Status.Slot, Entry: a.booted.Name,
			Reason: fmt.Sprintf("%s booted on trial", a.o.Status.Version), At: a.o.Now().UTC()}
	}
	if a.s.Last != before {
		a.save()
		a.log.Info("update: last update", "result", a.s.Last.Result, "from", a.s.Last.From, "to", a.s.Last.To, "reason", a.s.Last.Reason)
	}
	a.changed()
	if a.trial {
		a.hangPanic(true)
	}
	if a.o.Repo.MetadataURL == "" {
		a.log.Info("updates: no repository configured (image default or berth.dev/update-repository); the Node's berth.dev/update-to is not acted on")
	}
}

// step does what is due and says when to look again.
func (a *agent) step(ctx context.Context) time.Duration {
	now := a.o.Now()
	var node nodeobject.Node
	var err error
	seen := false
	if a.o.Node != nil {
		node, err = a.o.Node.Get(ctx)
		switch {
		case err == nil:
			seen = true
		case errors.Is(err, nodeobject.ErrNotFound), errors.Is(err, fs.ErrNotExist):
			a.log.Debug("update: the Node is not there yet", "err", err)
		default:
			a.log.Warn("update: reading the Node", "err", err)
		}
	}
	a.observe(node, seen, now)
	if a.trial {
		return a.judge(ctx, now)
	}
	if seen {
		a.publish(ctx)
		if t, ok, err := TriggerOf(node.Annotations); err != nil {
			a.refuse(ctx, "", err.Error())
		} else if ok {
			a.act(ctx, t, now)
		} else {
			a.untrigger()
		}
	}
	return a.o.Poll
}

// hangPanic arms or disarms the kernel's panics on a hang.
func (a *agent) hangPanic(armed bool) {
	if a.o.HangPanic == nil {
		return
	}
	if err := a.o.HangPanic(armed); err != nil {
		a.log.Warn("update: the kernel's panics on a hang", "armed", armed, "err", err)
		return
	}
	a.log.Info("update: the kernel's panics on a hang", "armed", armed)
}

// untrigger forgets the last trigger once the Node no longer carries one:
// the operator's request is over, and the same one set again is a new
// request (a release mended after a refusal, a repository after a
// failure). A version that rolled back stays refused all the same.
func (a *agent) untrigger() {
	if was := cmp.Or(a.s.Handled, a.failed); was != "" {
		a.log.Info("update: the Node no longer asks for an update; the same request set again is acted on again", "was", was)
	}
	a.failed = ""
	if a.s.Handled != "" {
		a.s.Handled = ""
		a.save()
	}
}

// observe tracks this boot's unbroken Ready. A Ready whose heartbeat is
// older than this boot is the previous version's, which the Node object
// outlives: it proves nothing about this one.
func (a *agent) observe(n nodeobject.Node, seen bool, now time.Time) {
	ready := seen && n.Ready == "True" && !n.ReadyHeartbeat.Before(a.o.BootStart.Truncate(time.Second))
	switch {
	case !ready:
		a.readySince = time.Time{}
	case a.readySince.IsZero():
		a.readySince = now
		a.log.Info("update: the Node is Ready in this boot", "heartbeat", n.ReadyHeartbeat.UTC().Format(time.RFC3339))
	}
}

// judge runs one look of a trial boot.
func (a *agent) judge(ctx context.Context, now time.Time) time.Duration {
	if a.esp == nil {
		es, err := a.entries(ctx)
		if err != nil {
			a.log.Warn("update: trial: listing the UKIs on the ESP", "err", err)
			return a.o.Poll
		}
		a.esp = es
	}
	d, err := trial.Decide(a.o.Trial, trial.Observation{Booted: a.booted, Entries: a.esp, BootStart: a.o.BootStart, Now: now,
		Ready: !a.readySince.IsZero(), ReadySince: a.readySince})
	if err != nil {
		a.log.Warn("update: trial", "err", err)
		return a.o.Poll
	}
	switch d.Action {
	case trial.Wait:
		a.publish(ctx)
		return min(a.o.Poll, max(time.Second, d.Until.Sub(now)))
	case trial.None:
		a.log.Warn("update: trial not judged", "reason", d.Reason)
		a.trial = false
	case trial.Bless:
		a.bless(ctx, d.Reason)
	case trial.Revert:
		a.revert(ctx, d)
	}
	return a.o.Poll
}

func (a *agent) bless(ctx context.Context, reason string) {
	var good bootcount.Entry
	err := a.withESP(ctx, func(dir string) error {
		var err error
		good, err = esp.ESP{Root: dir, Log: a.log}.Bless(a.booted)
		return err
	})
	if err != nil {
		a.log.Error("update: blessing the trial boot (tried again at the next look)", "entry", a.booted.Name, "err", err)
		return
	}
	a.trial = false
	a.hangPanic(false)
	// This boot is no trial any more: an update may follow at once.
	a.o.Status.Trial, a.o.Status.Entry, a.o.Status.State = false, good.Name, bootcount.Good.String()
	a.o.Status.TriesLeft, a.o.Status.TriesDone = 0, 0
	a.booted = good
	last := a.lastOf(ResultBlessed, fmt.Sprintf("blessed: %s", reason))
	last.Entry = good.Name
	a.s.Last, a.s.Pending = last, nil
	a.save()
	a.log.Info("update: blessed", "version", a.o.Status.Version, "entry", good.Name, "reason", reason)
	a.changed()
	a.publish(ctx)
}

func (a *agent) revert(ctx context.Context, d trial.Decision) {
	err := a.withESP(ctx, func(dir string) error {
		_, err := esp.ESP{Root: dir, Log: a.log}.MarkBad(a.booted)
		return err
	})
	if err != nil {
		a.log.Error("update: marking the trial boot bad (tried again at the next look)", "entry", a.booted.Name, "err", err)
		return
	}
	if a.s.Pending == nil {
		a.s.Pending = &Pending{To: a.o.Status.Version}
	}
	a.s.Pending.Phase, a.s.Pending.Reason = PhaseReverted, d.Reason
	a.s.Last = a.lastOf(ResultRolledBack, d.Reason)
	a.trial = false
	a.save()
	a.log.Error("update: trial failed; rebooting into the previous version", "version", a.o.Status.Version, "next", d.To.Name, "reason", d.Reason)
	a.changed()
	a.publish(ctx)
	a.done = true
	a.o.Reboot(fmt.Sprintf("update trial of %s failed: %s", a.o.Status.Version, d.Reason))
}

// act applies t when Act says so.
func (a *agent) act(ctx context.Context, t Trigger, now time.Time) {
	ok, why, final := Act(a.s, a.o.Status, t)
	switch {
	case !ok && final && why != "" && a.s.Last != nil && a.s.Last.Result == ResultRolledBack && sameVersion(a.s.Last.To, t.To):
		// The trigger still names the version that just rolled back:
		// the Node keeps saying rolled-back, and why.
		a.s.Handled = t.Raw
		a.save()
		a.log.Info("update not applied", "to", t.To, "reason", why)
		return
	case !ok && final && why != "":
		a.s.Handled = t.Raw
		a.refuse(ctx, t.To, why)
		return
	case !ok && why != "" && a.waiting != why:
		// A wait, said once: the trigger is taken up when it is over.
		a.waiting = why
		a.log.Info("update waits", "to", t.To, "reason", why)
		return
	case !ok:
		return
	}
	a.waiting = ""
	if t.Raw != a.failed {
		a.failed, a.backoff, a.retryAt = "", 0, time.Time{}
	}
	if now.Before(a.retryAt) {
		return
	}
	if a.o.Repo.MetadataURL == "" {
		a.s.Handled = t.Raw
		a.refuse(ctx, t.To, "no update repository: the image names none and user data sets no berth.dev/update-repository")
		return
	}
	last, err := a.apply(ctx, t)
	switch {
	case err == nil && last.Result == status.ResultStaged:
		a.backoff = 0
		a.s.Pending = &Pending{Phase: PhaseStaged, From: last.From, To: last.To, Slot: last.Slot, Entry: last.Entry, At: a.o.Now().UTC()}
		a.s.Last, a.s.Handled = &last, t.Raw
		a.save()
		a.changed()
		a.setState(ctx, StateRebooting, fmt.Sprintf("%s staged in slot %s as %s; rebooting into it", last.To, last.Slot, last.Entry))
		a.done = true
		a.o.Reboot(fmt.Sprintf("update to %s staged", last.To))
	case last.Result == status.ResultRefused:
		a.s.Pending, a.s.Last, a.s.Handled = nil, &last, t.Raw
		a.save()
		a.changed()
		a.log.Error("update refused", "to", t.To, "err", err)
		a.setState(ctx, StateRefused, last.Reason)
	default:
		// Worth another try later: the repository unreachable, a write
		// failing. Backing off keeps a broken repository from costing
		// the node a download every look.
		a.backoff = min(max(2*a.backoff, time.Minute), 30*time.Minute)
		a.retryAt, a.failed = a.o.Now().Add(a.backoff), t.Raw
		// The retry goes into the reason kept, so that the Node says it
		// at every look, not only this one.
		last.Reason = fmt.Sprintf("%s (trying again in %s)", last.Reason, a.backoff)
		a.s.Pending, a.s.Last = nil, &last
		a.save()
		a.changed()
		a.log.Error("update failed; trying again later", "to", t.To, "retry_in", a.backoff, "err", err)
		a.setState(ctx, StateFailed, last.Reason)
	}
}

// apply fetches and writes the release t names.
func (a *agent) apply(ctx context.Context, t Trigger) (status.LastUpdate, error) {
	st := a.o.Status
	failed := func(err error) (status.LastUpdate, error) {
		return status.LastUpdate{Result: status.ResultFailed, Reason: err.Error(), From: st.Version, To: t.To, At: a.o.Now().UTC()}, err
	}
	refused := func(err error) (status.LastUpdate, error) {
		return status.LastUpdate{Result: status.ResultRefused, Reason: err.Error(), From: st.Version, To: t.To, At: a.o.Now().UTC()}, err
	}
	if a.o.Disk == nil || st.Boot != status.BootSystemdBoot {
		return refused(fmt.Errorf("updating to %s: this boot was not started by systemd-boot from berth's disk (boot %s): there is no other slot to write", t.To, st.Boot))
	}
	running, err := partition.ParseSlot(st.Slot)
	if err != nil {
		return refused(fmt.Errorf("updating to %s: the running root slot: %w", t.To, err))
	}
	cfg := repo.ClientConfig{TrustedRoot: a.o.Repo.TrustedRoot, MetadataURL: a.o.Repo.MetadataURL, TargetsURL: a.o.Repo.TargetsURL,
		CacheDir: filepath.Join(a.o.StateDir, "repository"), Running: st.Version, AllowDowngrade: t.AllowDowngrade, Log: a.log}
	if _, err := repo.ParseVersion(st.Version); err != nil {
		// A node running no release cannot tell an upgrade from a
		// downgrade; apply.Decide refuses it unless the trigger allows.
		cfg.Running, cfg.AllowDowngrade = "", true
	}
	client, err := repo.NewClient(cfg)
	if err != nil {
		return refused(err)
	}
	a.setState(ctx, StateDownloading, fmt.Sprintf("reading %s from %s", t.To, a.o.Repo.MetadataURL))
	rel, err := client.Find(ctx, a.o.Arch, t.To)
	if err != nil {
		if errors.Is(err, repo.ErrNoRelease) || errors.Is(err, repo.ErrDowngrade) || errors.Is(err, repo.ErrVersion) || errors.Is(err, repo.ErrIncomplete) {
			return refused(err)
		}
		// Expired, unsigned or rolled-back metadata, or an unreachable
		// repository: nothing was written; a later look may find it
		// mended.
		return failed(err)
	}
	target := running.Other()
	tdev, tsize, err := a.o.Disk.Slot(target)
	if err != nil {
		return refused(fmt.Errorf("updating to %s: slot %s: %w", t.To, target, err))
	}
	rdev, _, err := a.o.Disk.Slot(running)
	if err != nil {
		return refused(fmt.Errorf("updating to %s: the running slot %s: %w", t.To, running, err))
	}
	in := apply.Input{Running: st, Arch: a.o.Arch, Release: rel, SlotSize: tsize, AllowDowngrade: t.AllowDowngrade}
	plan, err := apply.Decide(in)
	if err != nil {
		return apply.Refused(in, err, a.o.Now()), err
	}
	a.s.Pending = &Pending{Phase: PhaseApplying, From: plan.From, To: plan.To, Slot: string(plan.Slot), At: a.o.Now().UTC()}
	a.save()
	a.setState(ctx, StateDownloading, fmt.Sprintf("writing %s into slot %s", plan.To, plan.Slot))
	var last status.LastUpdate
	err = a.withESP(ctx, func(dir string) error {
		var err error
		last, err = apply.Apply(ctx, a.log, apply.Request{Plan: plan, Fetcher: client, Target: tdev, Running: rdev, ESP: dir, Now: a.o.Now, Verify: a.o.Verify})
		return err
	})
	if last.Result == "" {
		return failed(err)
	}
	return last, err
}

// refuse says on the Node and the console why a trigger is not acted on.
func (a *agent) refuse(ctx context.Context, to, why string) {
	a.log.Warn("update not applied", "to", to, "reason", why)
	a.s.Last = &status.LastUpdate{Result: status.ResultRefused, Reason: why, From: a.o.Status.Version, To: to, At: a.o.Now().UTC()}
	a.save()
	a.changed()
	a.setState(ctx, StateRefused, why)
}

// lastOf is the pending update's outcome with result and reason.
func (a *agent) lastOf(result, reason string) *status.LastUpdate {
	l := &status.LastUpdate{Result: result, Reason: reason, To: a.o.Status.Version, Slot: a.o.Status.Slot, Entry: a.booted.Name, At: a.o.Now().UTC()}
	if p := a.s.Pending; p != nil {
		l.From = p.From
	}
	return l
}

// publish writes the state the last update left on the Node.
func (a *agent) publish(ctx context.Context) {
	state, reason := StateIdle, ""
	if l := a.s.Last; l != nil {
		reason = l.Reason
		switch l.Result {
		case ResultTrial:
			state = StateTrial
		case ResultBlessed:
			state = StateBlessed
		case ResultRolledBack:
			state = StateRolledBack
		case status.ResultRefused:
			state = StateRefused
		case status.ResultFailed:
			state = StateFailed
		case status.ResultStaged:
			state = StateRebooting
		}
	}
	if a.trial {
		state = StateTrial
	}
	a.setState(ctx, state, reason)
}

// setState annotates the Node with the version, slot, state and reason,
// when they changed.
func (a *agent) setState(ctx context.Context, state, reason string) {
	want := map[string]string{AnnotationVersion: a.o.Status.Version, AnnotationSlot: a.o.Status.Slot, AnnotationState: state, AnnotationReason: reason}
	set := map[string]*string{}
	for k, v := range want {
		if a.published[k] != v {
			v := v
			if v == "" {
				set[k] = nil
			} else {
				set[k] = &v
			}
		}
	}
	if len(set) == 0 || a.o.Node == nil {
		return
	}
	if err := a.o.Node.Annotate(ctx, set); err != nil {
		a.log.Warn("update: annotating the Node", "state", state, "err", err)
		return
	}
	a.published = want
}

func (a *agent) entries(ctx context.Context) ([]bootcount.Entry, error) {
	var es []bootcount.Entry
	err := a.withESP(ctx, func(dir string) error {
		var err error
		es, err = esp.ESP{Root: dir, Log: a.log}.List()
		return err
	})
	return es, err
}

// withESP runs fn with the ESP mounted, and unmounts it after: the ESP
// stays mounted only while berth writes it, so nothing else can.
func (a *agent) withESP(ctx context.Context, fn func(dir string) error) error {
	if a.o.Disk == nil {
		return errors.New("no boot disk")
	}
	dir, unmount, err := a.o.Disk.MountESP(ctx)
	if err != nil {
		return err
	}
	err = fn(dir)
	if uerr := unmount(); uerr != nil {
		a.log.Warn("update: unmounting the ESP", "dir", dir, "err", uerr)
	}
	return err
}

func (a *agent) save() {
	if err := saveState(a.o.StateDir, a.s); err != nil {
		a.log.Warn("update state", "err", err)
	}
}

func (a *agent) changed() {
	if a.o.Changed != nil {
		a.o.Changed(a.s)
	}
}

// FailTrial ends a trial boot that cannot go on (berth's boot failed
// before kubelet could become Ready): it marks the booted entry bad and
// records why, so that the reboot the caller asks for starts the previous
// version at once rather than after the trial's deadline or three more
// failed tries. It returns false, having changed nothing, when this boot
// is not on trial or the entry could not be marked.
func FailTrial(ctx context.Context, o Options, reason string) bool {
	if !o.Status.Trial || o.Disk == nil {
		return false
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	a := &agent{o: o, log: o.Log, trial: true, published: map[string]string{}}
	var err error
	if a.booted, err = bootcount.Parse(o.Status.Entry); err != nil {
		a.log.Error("update: the booted entry", "entry", o.Status.Entry, "err", err)
		return false
	}
	if a.s, err = loadState(o.StateDir); err != nil {
		a.log.Warn("update state", "err", err)
	}
	err = a.withESP(ctx, func(dir string) error {
		_, err := esp.ESP{Root: dir, Log: a.log}.MarkBad(a.booted)
		return err
	})
	if err != nil {
		a.log.Error("update: marking the trial boot bad", "entry", a.booted.Name, "err", err)
		return false
	}
	why := "rolled back: " + reason
	if a.s.Pending == nil {
		a.s.Pending = &Pending{To: o.Status.Version}
	}
	a.s.Pending.Phase, a.s.Pending.Reason = PhaseReverted, why
	a.s.Last = a.lastOf(ResultRolledBack, why)
	a.save()
	a.log.Error("update: trial failed; rebooting into the previous version", "version", o.Status.Version, "reason", why)
	return true
}
