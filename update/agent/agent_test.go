package agent

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-node/berth/mounts/partition"
	"github.com/berth-node/berth/runtime/nodeobject"
	"github.com/berth-node/berth/update/repo"
	"github.com/berth-node/berth/update/status"
	"github.com/berth-node/berth/update/trial"
)

// fakeNode is the Node object as the API server keeps it: annotations
// patched in (a nil value removes), the Ready condition set by the test.
type fakeNode struct {
	n       nodeobject.Node
	err     error
	patches []map[string]*string
}

func (f *fakeNode) Get(context.Context) (nodeobject.Node, error) {
	if f.err != nil {
		return nodeobject.Node{}, f.err
	}
	n := f.n
	n.Annotations = map[string]string{}
	for k, v := range f.n.Annotations {
		n.Annotations[k] = v
	}
	return n, nil
}

func (f *fakeNode) Annotate(_ context.Context, set map[string]*string) error {
	f.patches = append(f.patches, set)
	if f.n.Annotations == nil {
		f.n.Annotations = map[string]string{}
	}
	for k, v := range set {
		if v == nil {
			delete(f.n.Annotations, k)
		} else {
			f.n.Annotations[k] = *v
		}
	}
	return nil
}

// dirDisk is a boot disk whose ESP is a directory; it has no slots.
type dirDisk struct{ esp string }

func (d dirDisk) MountESP(context.Context) (string, func() error, error) {
	return d.esp, func() error { return nil }, nil
}

func (d dirDisk) Slot(s partition.Slot) (string, int64, error) {
	return "", 0, errors.New("no slots in this test")
}

// newESP makes an ESP directory holding UKIs named names.
func newESP(t *testing.T, names ...string) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "EFI", "Linux")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("MZ "+n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func ukis(t *testing.T, esp string) []string {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(esp, "EFI", "Linux"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// clock is the agent's clock, moved by the test.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

type rig struct {
	a       *agent
	node    *fakeNode
	clock   *clock
	esp     string
	reboots []string
	// hang is each arming (true) or disarming of the panics on a hang.
	hang []bool
}

func newRig(t *testing.T, st status.Status, esp string, s *State) *rig {
	t.Helper()
	r := &rig{node: &fakeNode{n: nodeobject.Node{Name: "n1"}}, clock: &clock{now: t0}, esp: esp}
	dir := t.TempDir()
	if s != nil {
		if err := saveState(dir, *s); err != nil {
			t.Fatal(err)
		}
	}
	o := Options{Node: r.node, Status: st, Arch: "amd64", BootStart: t0, StateDir: dir, Disk: dirDisk{esp: esp},
		Trial: trial.Config{Soak: time.Minute, ReadyDeadline: 5 * time.Minute}, Now: r.clock.Now, Poll: 10 * time.Second,
		Reboot:    func(reason string) { r.reboots = append(r.reboots, reason) },
		HangPanic: func(armed bool) error { r.hang = append(r.hang, armed); return nil }}
	r.a = &agent{o: o, log: o.Log, trial: st.Trial, published: map[string]string{}}
	if r.a.log == nil {
		r.a.log = testLog(t)
	}
	r.a.start(context.Background())
	return r
}

// run steps the agent, moving the clock by each wait, until it is done
// or until is reached.
func (r *rig) run(until time.Time) {
	for !r.a.done && r.clock.now.Before(until) {
		wait := r.a.step(context.Background())
		r.clock.now = r.clock.now.Add(wait)
	}
}

func (r *rig) state(t *testing.T) State {
	t.Helper()
	s, err := loadState(r.a.o.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func trialStatus() status.Status {
	return status.Status{Version: "1.1.0", Slot: "b", Boot: status.BootSystemdBoot, Entry: "berth-1.1.0+2-1.efi", State: "indeterminate", Trial: true, TriesLeft: 2, TriesDone: 1}
}

var staged = State{Pending: &Pending{Phase: PhaseStaged, From: "1.0.0", To: "1.1.0", Slot: "b", Entry: "berth-1.1.0+3.efi", At: t0.Add(-time.Minute)}, Handled: "1.1.0"}

func TestTrialBlessed(t *testing.T) {
	esp := newESP(t, "berth-1.0.0.efi", "berth-1.1.0+2-1.efi")
	r := newRig(t, trialStatus(), esp, &staged)
	if got := r.node.n.Annotations[AnnotationState]; got != "" {
		t.Fatalf("state %q published before the Node was seen", got)
	}
	// The Node's Ready is the previous version's until kubelet posts in
	// this boot: not counted.
	r.node.n.Ready, r.node.n.ReadyHeartbeat = "True", t0.Add(-30*time.Second)
	r.run(t0.Add(2 * time.Minute))
	if slices.Contains(ukis(t, esp), "berth-1.1.0.efi") {
		t.Fatal("blessed on a Ready from before this boot")
	}
	if got := r.node.n.Annotations[AnnotationState]; got != StateTrial {
		t.Errorf("state on the Node during the trial = %q, want %s", got, StateTrial)
	}
	if !slices.Equal(r.hang, []bool{true}) {
		t.Errorf("hang panics during the trial: %v, want armed once", r.hang)
	}
	r.node.n.ReadyHeartbeat = t0.Add(2 * time.Minute)
	r.run(t0.Add(10 * time.Minute))
	if got := ukis(t, esp); !slices.Equal(got, []string{"berth-1.0.0.efi", "berth-1.1.0.efi"}) {
		t.Fatalf("ESP after the trial = %v, want 1.1.0 blessed", got)
	}
	if len(r.reboots) != 0 {
		t.Errorf("rebooted: %v", r.reboots)
	}
	if !slices.Equal(r.hang, []bool{true, false}) {
		t.Errorf("hang panics after blessing: %v, want armed, then disarmed", r.hang)
	}
	s := r.state(t)
	if s.Pending != nil || s.Last == nil || s.Last.Result != ResultBlessed || s.Last.From != "1.0.0" || s.Last.To != "1.1.0" || s.Last.Entry != "berth-1.1.0.efi" {
		t.Errorf("state after blessing = %+v last %+v", s.Pending, s.Last)
	}
	ann := r.node.n.Annotations
	if ann[AnnotationState] != StateBlessed || ann[AnnotationVersion] != "1.1.0" || ann[AnnotationSlot] != "b" || !strings.Contains(ann[AnnotationReason], "kubelet Ready for") {
		t.Errorf("Node annotations after blessing: %v", ann)
	}
	// Blessed, the boot is no trial any more: the next update is taken up
	// (and here refused only for want of a repository).
	r.node.n.Annotations[AnnotationUpdateTo] = "1.2.0"
	r.run(r.clock.now.Add(time.Minute))
	if got := r.node.n.Annotations[AnnotationReason]; !strings.Contains(got, "no update repository") {
		t.Errorf("after blessing, a trigger for 1.2.0: reason %q, want it taken up", got)
	}
}

func TestTrialRolledBack(t *testing.T) {
	esp := newESP(t, "berth-1.0.0.efi", "berth-1.1.0+2-1.efi")
	r := newRig(t, trialStatus(), esp, &staged)
	r.node.n.Ready, r.node.n.ReadyHeartbeat = "False", t0.Add(time.Minute)
	r.run(t0.Add(time.Hour))
	if !r.a.done || len(r.reboots) != 1 || !strings.Contains(r.reboots[0], "kubelet not Ready within 5m0s") {
		t.Fatalf("reboots = %v (done %v), want one for the failed trial", r.reboots, r.a.done)
	}
	if r.clock.now.Before(t0.Add(5*time.Minute)) || r.clock.now.After(t0.Add(5*time.Minute+10*time.Second)) {
		t.Errorf("rolled back at %s, want at the 5 min deadline", r.clock.now.Sub(t0))
	}
	if got := ukis(t, esp); !slices.Equal(got, []string{"berth-1.0.0.efi", "berth-1.1.0+0-1.efi"}) {
		t.Fatalf("ESP after the failed trial = %v, want 1.1.0 marked bad", got)
	}
	if got := r.node.n.Annotations[AnnotationState]; got != StateRolledBack {
		t.Errorf("state on the Node = %q, want %s", got, StateRolledBack)
	}

	// The previous version boots: it says what happened, and does not
	// take the same update again. The state as a power loss right after
	// the commit leaves it: the trigger was never recorded as handled.
	s := r.state(t)
	s.Handled = ""
	old := status.Status{Version: "1.0.0", Slot: "a", Boot: status.BootSystemdBoot, Entry: "berth-1.0.0.efi", State: "good"}
	r2 := newRig(t, old, esp, &s)
	r2.node.n.Annotations = map[string]string{AnnotationUpdateTo: "1.1.0"}
	r2.node.n.Ready, r2.node.n.ReadyHeartbeat = "True", t0
	r2.run(t0.Add(time.Minute))
	s2 := r2.state(t)
	if s2.Last == nil || s2.Last.Result != ResultRolledBack || !strings.Contains(s2.Last.Reason, "kubelet not Ready within 5m0s") {
		t.Fatalf("on the previous version, last update = %+v", s2.Last)
	}
	if _, ok := s2.RolledBack["1.1.0"]; !ok || s2.Pending != nil {
		t.Errorf("state on the previous version: pending %+v, rolled back %v", s2.Pending, s2.RolledBack)
	}
	ann := r2.node.n.Annotations
	if ann[AnnotationState] != StateRolledBack || ann[AnnotationVersion] != "1.0.0" || ann[AnnotationSlot] != "a" {
		t.Errorf("Node annotations on the previous version: %v", ann)
	}
	if len(r2.reboots) != 0 {
		t.Errorf("the previous version rebooted: %v", r2.reboots)
	}
}

func TestTriggerWithoutRepository(t *testing.T) {
	esp := newESP(t, "berth-1.0.0.efi")
	st := status.Status{Version: "1.0.0", Slot: "a", Boot: status.BootSystemdBoot, Entry: "berth-1.0.0.efi", State: "good"}
	r := newRig(t, st, esp, nil)
	r.node.n.Annotations = map[string]string{AnnotationUpdateTo: "1.1.0"}
	r.run(t0.Add(time.Minute))
	ann := r.node.n.Annotations
	if ann[AnnotationState] != StateRefused || !strings.Contains(ann[AnnotationReason], "no update repository") {
		t.Fatalf("Node annotations = %v, want refused for want of a repository", ann)
	}
	if len(r.hang) != 0 {
		t.Errorf("hang panics touched on a boot not on trial: %v", r.hang)
	}
	n := len(r.node.patches)
	r.run(t0.Add(10 * time.Minute))
	if len(r.node.patches) != n {
		t.Errorf("the same refusal was patched again: %v", r.node.patches[n:])
	}
	if got := ukis(t, esp); !slices.Equal(got, []string{"berth-1.0.0.efi"}) {
		t.Errorf("ESP = %v after a refused trigger", got)
	}
	// The trigger removed: the request is over, and the same one set
	// again is acted on again.
	delete(r.node.n.Annotations, AnnotationUpdateTo)
	r.run(t0.Add(10*time.Minute + 10*time.Second))
	if h := r.state(t).Handled; h != "" {
		t.Errorf("state.json's handled trigger = %q after the trigger was removed", h)
	}
	r.node.n.Annotations[AnnotationUpdateTo] = "1.1.0"
	r.run(t0.Add(10*time.Minute + 20*time.Second))
	if h := r.state(t).Handled; h != "1.1.0" {
		t.Errorf("state.json's handled trigger = %q after the trigger was set again, want it refused again", h)
	}
	// A bad trigger is refused naming the annotation.
	r.node.n.Annotations[AnnotationAllowDowngrade] = "maybe"
	r.run(t0.Add(11 * time.Minute))
	if got := r.node.n.Annotations[AnnotationReason]; !strings.Contains(got, AnnotationAllowDowngrade) {
		t.Errorf("reason for a bad trigger = %q", got)
	}
}

func TestFailTrial(t *testing.T) {
	esp := newESP(t, "berth-1.0.0.efi", "berth-1.1.0+2-1.efi")
	dir := t.TempDir()
	if err := saveState(dir, staged); err != nil {
		t.Fatal(err)
	}
	o := Options{Status: trialStatus(), StateDir: dir, Disk: dirDisk{esp: esp}, Log: testLog(t)}
	if !FailTrial(context.Background(), o, "config: bad kubelet flag") {
		t.Fatal("FailTrial did not mark the trial bad")
	}
	if got := ukis(t, esp); !slices.Equal(got, []string{"berth-1.0.0.efi", "berth-1.1.0+0-1.efi"}) {
		t.Errorf("ESP = %v, want 1.1.0 marked bad", got)
	}
	s, err := loadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Pending == nil || s.Pending.Phase != PhaseReverted || s.Pending.Reason != "rolled back: config: bad kubelet flag" {
		t.Errorf("pending = %+v", s.Pending)
	}
	notTrial := o
	notTrial.Status.Trial = false
	if FailTrial(context.Background(), notTrial, "x") {
		t.Error("FailTrial acted on a boot that is not on trial")
	}
}

// testLog logs to the test's log.
func testLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// TestFailureBackoff: a trigger that fails for want of a working
// repository is tried again only after its backoff, which doubles; a
// changed trigger, or one removed and set again, is tried at once.
func TestFailureBackoff(t *testing.T) {
	ks, err := repo.SetUpKeys(t.TempDir(), false, repo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	esp := newESP(t, "berth-1.0.0.efi")
	st := status.Status{Version: "1.0.0", Slot: "a", Boot: status.BootSystemdBoot, Entry: "berth-1.0.0.efi", State: "good"}
	r := newRig(t, st, esp, nil)
	r.a.o.Repo = Repository{MetadataURL: srv.URL, TrustedRoot: ks.TrustedRoot}
	tries := func() int32 { t.Helper(); n := hits.Swap(0); return n }
	r.node.n.Annotations = map[string]string{AnnotationUpdateTo: "1.1.0"}
	r.run(t0.Add(10 * time.Second))
	ann := r.node.n.Annotations
	if ann[AnnotationState] != StateFailed || !strings.Contains(ann[AnnotationReason], "trying again in 1m0s") {
		t.Fatalf("Node annotations = %v, want failed, trying again in 1m0s", ann)
	}
	if tries() == 0 {
		t.Fatal("the repository was not asked")
	}
	r.run(t0.Add(50 * time.Second))
	if n := tries(); n != 0 {
		t.Errorf("asked the repository %d times within the first backoff", n)
	}
	r.run(t0.Add(80 * time.Second))
	if n := tries(); n == 0 || !strings.Contains(r.node.n.Annotations[AnnotationReason], "trying again in 2m0s") {
		t.Errorf("after the backoff: %d asks, reason %q; want one more, backing off 2m0s", n, r.node.n.Annotations[AnnotationReason])
	}
	// A new version asked for: at once, with the backoff from the start.
	r.node.n.Annotations[AnnotationUpdateTo] = "1.2.0"
	r.run(r.clock.now.Add(10 * time.Second))
	if n := tries(); n == 0 || !strings.Contains(r.node.n.Annotations[AnnotationReason], "trying again in 1m0s") {
		t.Errorf("a changed trigger: %d asks, reason %q; want one at once, backing off 1m0s", n, r.node.n.Annotations[AnnotationReason])
	}
	// Removed and set again: at once too.
	delete(r.node.n.Annotations, AnnotationUpdateTo)
	r.run(r.clock.now.Add(10 * time.Second))
	r.node.n.Annotations[AnnotationUpdateTo] = "1.2.0"
	r.run(r.clock.now.Add(10 * time.Second))
	if n := tries(); n == 0 {
		t.Error("a trigger removed and set again was not tried at once")
	}
	if len(r.reboots) != 0 || !slices.Equal(ukis(t, esp), []string{"berth-1.0.0.efi"}) {
		t.Errorf("failed updates rebooted (%v) or changed the ESP (%v)", r.reboots, ukis(t, esp))
	}
}
