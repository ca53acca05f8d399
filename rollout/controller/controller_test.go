package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-node/berth/internal/safe"
	"github.com/berth-node/berth/internal/syncbuf"
	"github.com/berth-node/berth/rollout/api/v1alpha1"
	"github.com/berth-node/berth/rollout/decide"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

var t0 = time.Date(2030, 1, 7, 12, 0, 0, 0, time.UTC)

const (
	vA = "1.1.0"
	vB = "1.2.0"
)

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// rig is a fake cluster: the typed and dynamic fakes, a clock, and
// berth's agents played on the Nodes.
type rig struct {
	t    *testing.T
	kube *kubefake.Clientset
	dyn  *dynamicfake.FakeDynamicClient
	now  time.Time
	log  *bytes.Buffer
	// blocked says the eviction of a pod answers 429.
	blocked func(ns, name string) bool
	// steps counts each node's agent's looks since it was asked.
	steps map[string]int
	// requests counts the update-to patches that reached each node.
	requests map[string]int
	// failRequest, when set, fails the next update-to patch to that
	// node, as a controller killed between its status write and the
	// patch would never make it.
	failRequest string
}

func node(name, version string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": "a"},
			Annotations: map[string]string{decide.AnnotationVersion: version, decide.AnnotationSlot: "a", decide.AnnotationState: "idle"}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}

func pod(ns, name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

func update(name string) *v1alpha1.Update {
	return &v1alpha1.Update{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))},
		Spec:       v1alpha1.UpdateSpec{Version: vB, Soak: "1m", DrainTimeout: "5m", NodeTimeout: "20m"}}
}

func newRig(t *testing.T, updates []*v1alpha1.Update, objs ...runtime.Object) *rig {
	// The fake is given the Updates as unstructured, as the apiserver
	// would hold a custom resource, and a scheme that does not know the
	// typed ones: the controller's conversions are what is tested.
	s := runtime.NewScheme()
	var us []runtime.Object
	for _, u := range updates {
		o, err := runtime.DefaultUnstructuredConverter.ToUnstructured(u)
		if err != nil {
			t.Fatal(err)
		}
		us = append(us, &unstructured.Unstructured{Object: o})
	}
	r := &rig{t: t, kube: kubefake.NewClientset(objs...), now: t0, log: &bytes.Buffer{},
		dyn:     dynamicfake.NewSimpleDynamicClientWithCustomListKinds(s, map[schema.GroupVersionResource]string{v1alpha1.GroupVersionResource(): v1alpha1.ListKind}, us...),
		blocked: func(string, string) bool { return false }, steps: map[string]int{}, requests: map[string]int{}}
	// The fake has no eviction API: an eviction deletes the pod, unless
	// the test's PodDisruptionBudget says no.
	r.kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		if r.blocked(ev.Namespace, ev.Name) {
			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
		}
		return true, nil, r.kube.Tracker().Delete(podsGVR, ev.Namespace, ev.Name)
	})
	r.kube.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.PatchAction)
		if !bytes.Contains(p.GetPatch(), []byte(`"`+decide.AnnotationUpdateTo+`":"`)) {
			return false, nil, nil
		}
		if r.failRequest == p.GetName() {
			r.failRequest = ""
			return true, nil, errors.New("killed")
		}
		r.requests[p.GetName()]++
		return false, nil, nil
	})
	return r
}

func (r *rig) controller() *Controller {
	return New(Options{Log: slog.New(slog.NewTextHandler(r.log, nil)), Kube: r.kube, Dynamic: r.dyn, Instance: "test", Now: func() time.Time { return r.now }})
}

func (r *rig) get(name string) *v1alpha1.Update {
	r.t.Helper()
	o, err := r.dyn.Resource(v1alpha1.GroupVersionResource()).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	var u v1alpha1.Update
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &u); err != nil {
		r.t.Fatal(err)
	}
	return &u
}

func (r *rig) node(name string) *corev1.Node {
	r.t.Helper()
	n, err := r.kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	return n
}

func (r *rig) events() []string {
	r.t.Helper()
	l, err := r.kube.CoreV1().Events(EventNamespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for _, e := range l.Items {
		if e.InvolvedObject.Kind == "Node" {
			out = append(out, fmt.Sprintf("node %s %s %s: %s", e.InvolvedObject.Name, e.Type, e.Reason, e.Message))
			continue
		}
		if e.InvolvedObject.Kind != v1alpha1.Kind || e.InvolvedObject.APIVersion != v1alpha1.APIVersion || e.Source.Component != Component {
			r.t.Errorf("event %s is about %+v from %+v", e.Name, e.InvolvedObject, e.Source)
		}
		out = append(out, fmt.Sprintf("%s %s %s: %s", e.InvolvedObject.Name, e.Type, e.Reason, e.Message))
	}
	return out
}

func (r *rig) nodeState(u, n string) v1alpha1.NodeState {
	for _, e := range r.get(u).Status.Nodes {
		if e.Name == n {
			return e.State
		}
	}
	return ""
}

// agents plays each node's berth agent one look on: an update-to it does
// not run is downloaded, rebooted into, tried, and blessed.
func (r *rig) agents() {
	ctx := context.Background()
	l, err := r.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	for _, n := range l.Items {
		a := n.Annotations
		to := a[decide.AnnotationUpdateTo]
		k, asked := r.steps[n.Name]
		if to == "" || to == a[decide.AnnotationVersion] && !asked {
			continue
		}
		r.steps[n.Name] = k + 1
		switch k {
		case 0:
			a[decide.AnnotationState] = "downloading"
		case 1:
			a[decide.AnnotationState] = "rebooting"
			n.Status.Conditions[0].Status = corev1.ConditionFalse
		case 2:
			n.Status.Conditions[0].Status = corev1.ConditionTrue
			a[decide.AnnotationVersion], a[decide.AnnotationState] = to, "trial"
		case 3:
			a[decide.AnnotationState] = "blessed"
			delete(r.steps, n.Name)
		}
		if _, err := r.kube.CoreV1().Nodes().Update(ctx, &n, metav1.UpdateOptions{}); err != nil {
			r.t.Fatal(err)
		}
	}
}

// rounds runs c's rounds, each followed by the agents' looks and 30 s,
// until the Update is finished or n rounds are done.
func (r *rig) rounds(c *Controller, u string, n int) {
	r.t.Helper()
	for range n {
		if err := c.Round(context.Background()); err != nil {
			r.t.Fatalf("round at %s: %v", r.now, err)
		}
		r.agents()
		r.now = r.now.Add(30 * time.Second)
		if decide.Finished(r.get(u)) {
			return
		}
	}
}

func TestRoundCordonsRecordsAndWritesStatus(t *testing.T) {
	r := newRig(t, []*v1alpha1.Update{update("to-b")}, node("n1", vA), node("n2", vA), pod("web", "a", "n1"))
	if err := r.controller().Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	u := r.get("to-b")
	if u.Status.Phase != v1alpha1.PhaseProgressing || u.Status.Current != "n1" || u.Status.Total != 2 || u.Status.ObservedGeneration != 1 {
		t.Errorf("status %+v", u.Status)
	}
	if n := r.node("n1"); !n.Spec.Unschedulable || n.Annotations[decide.AnnotationRollout] != "to-b" {
		t.Errorf("n1 not cordoned by to-b: %v %v", n.Spec.Unschedulable, n.Annotations)
	}
	if r.node("n2").Spec.Unschedulable {
		t.Error("n2 cordoned too")
	}
	ev := strings.Join(r.events(), "\n")
	for _, want := range []string{"to-b Normal Started: rolling out 1.2.0", "to-b Normal Cordoned: cordoned node n1"} {
		if !strings.Contains(ev, want) {
			t.Errorf("events %q lack %q", ev, want)
		}
	}
	// The next round sees the cordon and evicts.
	r.now = r.now.Add(10 * time.Second)
	if err := r.controller().Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := r.kube.CoreV1().Pods("web").Get(context.Background(), "a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod web/a not evicted: %v", err)
	}
	if s := r.nodeState("to-b", "n1"); s != v1alpha1.NodeDraining {
		t.Errorf("n1 is %s", s)
	}
}

func TestABlockedEvictionIsRetriedThenStopsTheRollout(t *testing.T) {
	r := newRig(t, []*v1alpha1.Update{update("to-b")}, node("n1", vA), node("n2", vA), pod("web", "a", "n1"))
	r.blocked = func(ns, name string) bool { return name == "a" }
	c := r.controller()
	var tries int
	r.kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "eviction" {
			tries++
		}
		return false, nil, nil
	})
	for range 3 {
		if err := c.Round(context.Background()); err != nil {
			t.Fatalf("a 429 is no error: %v", err)
		}
		r.now = r.now.Add(time.Minute)
	}
	if tries != 2 {
		t.Errorf("%d evictions tried, want one a round once draining", tries)
	}
	u := r.get("to-b")
	if msg := u.Status.Nodes[0].Message; !strings.Contains(msg, "web/a (eviction blocked: Cannot evict pod as it would violate the pod's disruption budget.)") {
		t.Errorf("n1's message %q does not name the blocking pod", msg)
	}
	r.now = r.now.Add(5 * time.Minute)
	if err := c.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	u = r.get("to-b")
	stopped := metav1.Condition{}
	for _, cd := range u.Status.Conditions {
		if cd.Type == v1alpha1.ConditionStopped {
			stopped = cd
		}
	}
	if u.Status.Phase != v1alpha1.PhaseStopped || stopped.Reason != decide.ReasonDrainTimeout || !strings.Contains(stopped.Message, "pod web/a") {
		t.Errorf("phase %s, Stopped condition %+v", u.Status.Phase, stopped)
	}
	if n := r.node("n1"); n.Spec.Unschedulable || n.Annotations[decide.AnnotationRollout] != "" {
		t.Errorf("n1 still held after the stop: %v", n.Annotations)
	}
	if ev := strings.Join(r.events(), "\n"); !strings.Contains(ev, "Warning DrainTimeout: node n1: the drain was blocked for more than 5m0s by pod web/a") {
		t.Errorf("no DrainTimeout event: %s", ev)
	}
	if r.node("n2").Spec.Unschedulable {
		t.Error("n2 was cordoned after the stop")
	}
}

func TestAnEvictionOfAPodAlreadyGoneIsNoError(t *testing.T) {
	r := newRig(t, []*v1alpha1.Update{update("to-b")}, node("n1", vA), pod("web", "a", "n1"))
	// The pod is listed, but gone by the time it is evicted.
	r.kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "eviction" {
			_ = r.kube.Tracker().Delete(podsGVR, "web", "a")
			return true, nil, apierrors.NewNotFound(podsGVR.GroupResource(), "a")
		}
		return false, nil, nil
	})
	c := r.controller()
	for range 3 {
		if err := c.Round(context.Background()); err != nil {
			t.Fatalf("a 404 is no error: %v", err)
		}
	}
	if s := r.nodeState("to-b", "n1"); s != v1alpha1.NodeUpdating {
		t.Errorf("n1 is %s, want updating", s)
	}
	if r.node("n1").Annotations[decide.AnnotationUpdateTo] != vB || r.requests["n1"] != 1 {
		t.Errorf("n1 not asked to update once: %v, %d", r.node("n1").Annotations, r.requests["n1"])
	}
}

func TestAPatchConflictIsRetriedNextRound(t *testing.T) {
	r := newRig(t, []*v1alpha1.Update{update("to-b")}, node("n1", vA))
	conflict := true
	r.kube.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if conflict {
			conflict = false
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, a.(k8stesting.PatchAction).GetName(), errors.New("the object has been modified"))
		}
		return false, nil, nil
	})
	c := r.controller()
	err := c.Round(context.Background())
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "patching node n1") {
		t.Fatalf("Round = %v, want the conflict, naming what was done", err)
	}
	// The status says cordoned; the Node is not: the next round cordons.
	if s := r.nodeState("to-b", "n1"); s != v1alpha1.NodeCordoned || r.node("n1").Spec.Unschedulable {
		t.Fatalf("after the conflict: n1 is %s, unschedulable %t", s, r.node("n1").Spec.Unschedulable)
	}
	if err := c.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !r.node("n1").Spec.Unschedulable {
		t.Error("n1 not cordoned on the round after the conflict")
	}
}

func TestAStatusWriteFailureActsOnNothing(t *testing.T) {
	r := newRig(t, []*v1alpha1.Update{update("to-b")}, node("n1", vA))
	r.dyn.PrependReactor("update", "updates", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" {
			return true, nil, apierrors.NewConflict(v1alpha1.GroupVersionResource().GroupResource(), "to-b", errors.New("the object has been modified"))
		}
		return false, nil, nil
	})
	err := r.controller().Round(context.Background())
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "Update to-b: writing the status") {
		t.Fatalf("Round = %v", err)
	}
	for _, a := range r.kube.Actions() {
		if a.GetVerb() == "patch" || a.GetVerb() == "create" {
			t.Errorf("acted although the status was not written: %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
	if r.node("n1").Spec.Unschedulable {
		t.Error("n1 cordoned")
	}
}

func TestRolloutCompletesAndNothingIsLeft(t *testing.T) {
	r := newRig(t, []*v1alpha1.Update{update("to-b")}, node("n1", vA), node("n2", vA), node("n3", vB), pod("web", "a", "n1"), pod("web", "b", "n2"))
	r.rounds(r.controller(), "to-b", 100)
	u := r.get("to-b")
	if u.Status.Phase != v1alpha1.PhaseCompleted || u.Status.Done != 3 {
		t.Fatalf("status %+v", u.Status)
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		nd := r.node(n)
		if nd.Spec.Unschedulable || nd.Annotations[decide.AnnotationUpdateTo] != "" || nd.Annotations[decide.AnnotationRollout] != "" {
			t.Errorf("%s left held: %v %v", n, nd.Spec.Unschedulable, nd.Annotations)
		}
	}
	if r.requests["n1"] != 1 || r.requests["n2"] != 1 || r.requests["n3"] != 0 {
		t.Errorf("update requests %v", r.requests)
	}
}

// A controller killed mid-rollout, at the worst points, and a new one
// started from the status alone: no node is asked to update twice.
func TestAControllerKilledMidRolloutResumesWithoutRepeating(t *testing.T) {
	r := newRig(t, []*v1alpha1.Update{update("to-b")}, node("n1", vA), node("n2", vA), node("n3", vA), pod("web", "a", "n1"), pod("web", "b", "n2"))
	first := r.controller()
	// Run until n1 has been asked to update, then drop the controller:
	// it is killed between rounds, mid-update.
	for i := 0; r.requests["n1"] == 0; i++ {
		if i > 50 {
			t.Fatal("n1 never asked to update")
		}
		r.rounds(first, "to-b", 1)
	}
	second := r.controller()
	// The second dies between writing n2's "updating" and the patch
	// that would ask n2 to update.
	r.failRequest = "n2"
	for i := 0; r.nodeState("to-b", "n2") != v1alpha1.NodeUpdating; i++ {
		if i > 50 {
			t.Fatal("n2 never reached updating")
		}
		if err := second.Round(context.Background()); err != nil && !strings.Contains(err.Error(), "killed") {
			t.Fatal(err)
		}
		r.agents()
		r.now = r.now.Add(30 * time.Second)
	}
	if r.requests["n2"] != 0 || r.node("n2").Annotations[decide.AnnotationUpdateTo] != "" {
		t.Fatalf("the kill did not cut the request: %d", r.requests["n2"])
	}
	third := r.controller()
	r.rounds(third, "to-b", 100)
	if u := r.get("to-b"); u.Status.Phase != v1alpha1.PhaseCompleted {
		t.Fatalf("status %+v", u.Status)
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		if r.requests[n] != 1 {
			t.Errorf("%s asked to update %d times", n, r.requests[n])
		}
	}
	var cordons int
	for _, a := range r.kube.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok && bytes.Contains(p.GetPatch(), []byte(`"unschedulable":true`)) {
			cordons++
		}
	}
	if cordons != 3 {
		t.Errorf("%d cordons for 3 nodes", cordons)
	}
}

func TestNodesHeldByADeletedUpdateAreReleased(t *testing.T) {
	r := newRig(t, []*v1alpha1.Update{update("to-b")}, node("n1", vA), node("n2", vA), pod("web", "a", "n1"))
	c := r.controller()
	for range 2 {
		if err := c.Round(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if !r.node("n1").Spec.Unschedulable {
		t.Fatal("n1 not cordoned")
	}
	if err := r.dyn.Resource(v1alpha1.GroupVersionResource()).Delete(context.Background(), "to-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := r.node("n1"); n.Spec.Unschedulable || n.Annotations[decide.AnnotationRollout] != "" || n.Annotations[decide.AnnotationUpdateTo] != "" {
		t.Errorf("n1 still held: %v %v", n.Spec.Unschedulable, n.Annotations)
	}
	if ev := strings.Join(r.events(), "\n"); !strings.Contains(ev, "node n1 Warning Released: uncordoned node n1 and removed its update request: Update to-b, which held it, was deleted") {
		t.Errorf("events: %s", ev)
	}
}

func TestOneUpdateAtATime(t *testing.T) {
	older, newer := update("older"), update("newer")
	newer.CreationTimestamp = metav1.NewTime(t0)
	newer.Spec.Version = "1.3.0"
	r := newRig(t, []*v1alpha1.Update{newer, older}, node("n1", vA), node("n2", vA))
	if err := r.controller().Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	if p := r.get("older").Status.Phase; p != v1alpha1.PhaseProgressing {
		t.Errorf("older is %s", p)
	}
	n := r.get("newer")
	if n.Status.Phase != v1alpha1.PhasePending || len(n.Status.Conditions) == 0 || !strings.Contains(n.Status.Conditions[0].Message, "Update older is rolling out") {
		t.Errorf("newer: %+v", n.Status)
	}
	if r.node("n1").Annotations[decide.AnnotationRollout] != "older" {
		t.Errorf("n1: %v", r.node("n1").Annotations)
	}
}

func TestLeaderElection(t *testing.T) {
	kube := kubefake.NewClientset(node("n1", vA))
	s := runtime.NewScheme()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(s, map[schema.GroupVersionResource]string{v1alpha1.GroupVersionResource(): v1alpha1.ListKind})
	lease := func(id string) Lease {
		return Lease{Namespace: "berth-system", Name: "berth-rollout", ID: id, LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond}
	}
	type replica struct {
		log  *syncbuf.Buffer
		stop context.CancelFunc
		err  chan error
	}
	start := func(id string) replica {
		ctx, cancel := context.WithCancel(context.Background())
		r := replica{log: &syncbuf.Buffer{}, stop: cancel, err: make(chan error, 1)}
		o := Options{Log: slog.New(slog.NewTextHandler(r.log, nil)), Kube: kube, Dynamic: dyn, Poll: 50 * time.Millisecond, Instance: id}
		safe.Go(slog.Default(), "replica "+id, func() { r.err <- RunLeader(ctx, o, lease(id)) }, func(p *safe.Panic) { r.err <- p })
		return r
	}
	holder := func() string {
		l, err := kube.CoordinationV1().Leases("berth-system").Get(context.Background(), "berth-rollout", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("waited 20s for %s", what)
			}
		}
	}
	// Once someone else has taken the lease from b (below), the fake
	// refuses b's renewals as the apiserver would (a conflict): it checks
	// no resourceVersion itself. The reactor is in place before any
	// replica runs, as the fake's reactor chain is not safe to change
	// while a replica calls it.
	var intruded atomic.Bool
	kube.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		if intruded.Load() && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == "b" {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, l.Name, errors.New("the object has been modified"))
		}
		return false, nil, nil
	})
	a := start("a")
	waitFor("a to lead", func() bool { return holder() == "a" && strings.Contains(a.log.String(), "leading") })
	b := start("b")
	time.Sleep(2 * time.Second)
	if strings.Contains(b.log.String(), "leading:") || holder() != "a" {
		t.Fatalf("b leads while a holds the lease: holder %q, b's log:\n%s", holder(), b.log.String())
	}
	a.stop()
	if err := <-a.err; err != nil {
		t.Errorf("a stopped: %v, want nil", err)
	}
	waitFor("b to lead", func() bool { return holder() == "b" && strings.Contains(b.log.String(), "leading:") })

	// Someone else takes the lease from b: b stops acting and says so.
	l, err := kube.CoordinationV1().Leases("berth-system").Get(context.Background(), "berth-rollout", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	intruder, long := "intruder", int32(3600)
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = &intruder, &long
	now := metav1.NewMicroTime(time.Now())
	l.Spec.RenewTime, l.Spec.AcquireTime = &now, &now
	if _, err := kube.CoordinationV1().Leases("berth-system").Update(context.Background(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	intruded.Store(true)
	select {
	case err := <-b.err:
		if !errors.Is(err, ErrLostLease) {
			t.Errorf("b returned %v, want ErrLostLease", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("b went on leading a lease it lost")
	}
	b.stop()
}
