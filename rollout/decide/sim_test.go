package decide

import (
	"slices"
	"testing"
	"time"

	"github.com/berth-node/berth/rollout/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// world is a cluster in memory: Decide's plans are applied to it, and
// each node's agent answers an update-to as berth's does (download,
// reboot, trial, blessed; or a rollback), so that whole rollouts can be
// run and their invariants checked at every step.
type world struct {
	t       *testing.T
	u       v1alpha1.Update
	nodes   map[string]*corev1.Node
	pods    map[string][]corev1.Pod
	ev      map[types.NamespacedName]Eviction
	now     time.Time
	max     int
	blocked func(p corev1.Pod) bool
	// rollsBack names the nodes whose trial of the new version fails.
	rollsBack map[string]bool
	// since counts the ticks since a node was asked to update.
	since    map[string]int
	requests map[string]int
	cordons  map[string]int
	events   []string
}

func newWorld(t *testing.T, u v1alpha1.Update, names ...string) *world {
	w := &world{t: t, u: u, nodes: map[string]*corev1.Node{}, pods: map[string][]corev1.Pod{}, ev: map[types.NamespacedName]Eviction{},
		now: t0, max: max(1, int(u.Spec.MaxUnavailable)), blocked: func(corev1.Pod) bool { return false }, rollsBack: map[string]bool{},
		since: map[string]int{}, requests: map[string]int{}, cordons: map[string]int{}}
	for _, n := range names {
		nd := mkNode(n, vA)
		w.nodes[n] = &nd
		w.pods[n] = []corev1.Pod{mkPod("web", "web-"+n, n, ownedBy("ReplicaSet")), mkPod("kube-system", "ds-"+n, n, ownedBy("DaemonSet"))}
	}
	return w
}

func (w *world) tick() {
	in := Input{Update: w.u, Pods: map[string][]corev1.Pod{}, Evictions: w.ev, Now: w.now}
	for _, n := range slices.Sorted(func(yield func(string) bool) {
		for k := range w.nodes {
			if !yield(k) {
				return
			}
		}
	}) {
		in.Nodes = append(in.Nodes, *w.nodes[n].DeepCopy())
	}
	for _, n := range NeedPods(w.u.Status) {
		in.Pods[n] = slices.Clone(w.pods[n])
	}
	p := Decide(in)
	w.u.Status = p.Status
	w.ev = map[types.NamespacedName]Eviction{}
	for _, a := range p.Actions {
		n := w.nodes[a.Node]
		switch a.Kind {
		case Cordon:
			w.cordons[a.Node]++
			n.Spec.Unschedulable = true
			n.Annotations[AnnotationRollout] = w.u.Name
		case Release:
			n.Spec.Unschedulable = false
			delete(n.Annotations, AnnotationRollout)
			delete(n.Annotations, AnnotationUpdateTo)
			delete(n.Annotations, AnnotationAllowDowngrade)
		case RequestUpdate:
			w.requests[a.Node]++
			n.Annotations[AnnotationUpdateTo] = a.Version
			w.since[a.Node] = 0
		case Evict:
			i := slices.IndexFunc(w.pods[a.Node], func(p corev1.Pod) bool { return p.Namespace == a.Pod.Namespace && p.Name == a.Pod.Name })
			switch {
			case i < 0:
				w.ev[a.Pod] = Eviction{Outcome: Gone}
			case w.blocked(w.pods[a.Node][i]):
				w.ev[a.Pod] = Eviction{Outcome: Blocked, Message: "Cannot evict pod as it would violate the pod's disruption budget."}
			default:
				w.pods[a.Node] = slices.Delete(w.pods[a.Node], i, i+1)
				w.ev[a.Pod] = Eviction{Outcome: Evicted}
			}
		case Event:
			w.events = append(w.events, a.String())
		}
	}
	w.check(p)
	w.agents()
	w.now = w.now.Add(30 * time.Second)
}

// check holds the invariants after every step.
func (w *world) check(p Plan) {
	var out []string
	for name, n := range w.nodes {
		if n.Spec.Unschedulable || !ready(n) {
			out = append(out, name)
		}
		if n.Spec.Unschedulable && !named(p.Status, name) {
			w.t.Errorf("%s: node %s is cordoned and no condition names it: %+v", w.now, name, p.Status.Conditions)
		}
	}
	if len(out) > w.max {
		w.t.Errorf("%s: %d nodes unavailable (%v), more than %d", w.now, len(out), out, w.max)
	}
	for name, c := range w.requests {
		if c > 1 {
			w.t.Errorf("node %s was asked to update %d times", name, c)
		}
	}
	for name, c := range w.cordons {
		if c > 1 {
			w.t.Errorf("node %s was cordoned %d times", name, c)
		}
	}
}

// agents moves each node's agent on by one look.
func (w *world) agents() {
	for name, n := range w.nodes {
		to := n.Annotations[AnnotationUpdateTo]
		k, asked := w.since[name]
		if !asked || to == "" {
			continue
		}
		w.since[name] = k + 1
		a := n.Annotations
		switch {
		case k == 0:
			a[AnnotationState] = "downloading"
		case k == 1:
			a[AnnotationState] = "rebooting"
			n.Status.Conditions[0].Status = corev1.ConditionFalse
		case k == 3:
			n.Status.Conditions[0].Status = corev1.ConditionTrue
			a[AnnotationVersion], a[AnnotationState], a[AnnotationReason] = to, "trial", to+" booted on trial"
		case k == 6 && w.rollsBack[name]:
			a[AnnotationVersion], a[AnnotationState], a[AnnotationReason] = vA, agentRolledBack, "rolled back: "+to+" was not Ready in time"
			delete(w.since, name)
		case k == 6:
			a[AnnotationState], a[AnnotationReason] = agentBlessed, "blessed: Ready for 1m"
			delete(w.since, name)
		}
	}
}

func (w *world) run(ticks int) {
	for range ticks {
		w.tick()
		if Finished(&w.u) {
			return
		}
	}
}

func TestRolloutCompletes(t *testing.T) {
	for _, max := range []int32{1, 2} {
		w := newWorld(t, mkUpdate(maxUnavailable(max)), "n1", "n2", "n3", "n4")
		// The PDB lets web-n2 go only at the third try.
		tries := 0
		w.blocked = func(p corev1.Pod) bool { tries++; return p.Name == "web-n2" && tries < 3 }
		w.run(200)
		if w.u.Status.Phase != v1alpha1.PhaseCompleted || w.u.Status.Done != 4 {
			t.Fatalf("maxUnavailable %d: phase %s, %d of %d done: %+v", max, w.u.Status.Phase, w.u.Status.Done, w.u.Status.Total, w.u.Status)
		}
		for name, n := range w.nodes {
			if n.Spec.Unschedulable || n.Annotations[AnnotationUpdateTo] != "" || n.Annotations[AnnotationRollout] != "" || n.Annotations[AnnotationVersion] != vB {
				t.Errorf("node %s at the end: unschedulable %t, annotations %v", name, n.Spec.Unschedulable, n.Annotations)
			}
			if w.requests[name] != 1 {
				t.Errorf("node %s asked to update %d times", name, w.requests[name])
			}
		}
		if len(w.events) != 1+4*3+1 {
			t.Errorf("events: %q", w.events)
		}
	}
}

func TestRolloutStopsOnARollback(t *testing.T) {
	w := newWorld(t, mkUpdate(), "n1", "n2", "n3")
	w.rollsBack["n2"] = true
	w.run(200)
	if w.u.Status.Phase != v1alpha1.PhaseStopped {
		t.Fatalf("phase %s", w.u.Status.Phase)
	}
	states := map[string]v1alpha1.NodeState{}
	for _, e := range w.u.Status.Nodes {
		states[e.Name] = e.State
	}
	if states["n1"] != v1alpha1.NodeDone || states["n2"] != v1alpha1.NodeFailed || states["n3"] != v1alpha1.NodePending {
		t.Errorf("states %v", states)
	}
	if w.cordons["n3"] != 0 || w.requests["n3"] != 0 {
		t.Errorf("n3 was touched: %d cordons, %d requests", w.cordons["n3"], w.requests["n3"])
	}
	if n := w.nodes["n2"]; n.Spec.Unschedulable || n.Annotations[AnnotationUpdateTo] != "" {
		t.Errorf("n2 is still held: %v", n.Annotations)
	}
	// Looking on changes nothing: the version is not tried again.
	before := w.requests["n2"]
	for range 20 {
		w.tick()
	}
	if w.requests["n2"] != before || w.u.Status.Phase != v1alpha1.PhaseStopped {
		t.Errorf("after the stop: %d requests to n2, phase %s", w.requests["n2"], w.u.Status.Phase)
	}
}

func TestRolloutStopsOnABlockedDrain(t *testing.T) {
	w := newWorld(t, mkUpdate(), "n1", "n2")
	w.blocked = func(p corev1.Pod) bool { return p.Name == "web-n1" }
	w.run(200)
	if w.u.Status.Phase != v1alpha1.PhaseStopped || w.u.Status.Nodes[0].State != v1alpha1.NodeFailed {
		t.Fatalf("status %+v", w.u.Status)
	}
	if w.nodes["n1"].Spec.Unschedulable || w.requests["n1"] != 0 || w.cordons["n2"] != 0 {
		t.Errorf("n1 unschedulable %t, requests %d; n2 cordons %d", w.nodes["n1"].Spec.Unschedulable, w.requests["n1"], w.cordons["n2"])
	}
	if got := w.now.Sub(t0); got < 10*time.Minute || got > 12*time.Minute {
		t.Errorf("stopped after %s, want just past drainTimeout", got)
	}
}
