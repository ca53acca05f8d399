// Package decide is the rollout controller's state machine, and nothing
// else: given an Update (its spec and the status it has reached), the
// cluster's Nodes, the pods of the nodes being drained and what the last
// evictions answered, and the time, Decide returns the Update's next
// status and the actions that move the rollout on. It calls no API:
// package controller reads the cluster, writes the status Decide returns
// and only then does its actions, so that a controller killed at any
// point resumes from the status and repeats nothing a node would see
// twice.
package decide

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/berth-node/berth/rollout/api/v1alpha1"
	"github.com/berth-node/berth/update/nodeapi"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// Annotations on Nodes. The first six are the node agent's (package
// update/nodeapi names them for both): the controller writes the
// update-to pair and reads the others, which each node's agent writes.
const (
	AnnotationUpdateTo       = nodeapi.AnnotationUpdateTo
	AnnotationAllowDowngrade = nodeapi.AnnotationAllowDowngrade
	AnnotationVersion        = nodeapi.AnnotationVersion
	AnnotationSlot           = nodeapi.AnnotationSlot
	AnnotationState          = nodeapi.AnnotationState
	AnnotationReason         = nodeapi.AnnotationReason
	// AnnotationRollout names the Update that cordoned the node. It says
	// on the Node why it is cordoned, and it is how the controller knows
	// a cordon (and an update-to) is its own to give back: it never
	// uncordons a node someone else cordoned.
	AnnotationRollout = "berth.dev/rollout"
)

// The agent's states the controller acts on.
const (
	agentIdle       = nodeapi.StateIdle
	agentBlessed    = nodeapi.StateBlessed
	agentRolledBack = nodeapi.StateRolledBack
	agentRefused    = nodeapi.StateRefused
	agentFailed     = nodeapi.StateFailed
)

// Condition and Event reasons.
const (
	ReasonStarted     = "Started"
	ReasonUpdating    = "Updating"
	ReasonWaiting     = "Waiting"
	ReasonInvalidSpec = "InvalidSpec"
	ReasonCompleted   = "Completed"
	ReasonStopped     = "Stopped"
	ReasonNoNodes     = "NoNodes"
	// Why a rollout stops.
	ReasonDrainTimeout = "DrainTimeout"
	ReasonRolledBack   = "RolledBack"
	ReasonRefused      = "Refused"
	ReasonFailed       = "UpdateFailed"
	ReasonNodeTimeout  = "NodeTimeout"
	ReasonNotTakenUp   = "NotTakenUp"
	// Events about a node.
	ReasonCordoned    = "Cordoned"
	ReasonNodeUpdated = "NodeUpdated"
	ReasonNodeGone    = "NodeGone"
	ReasonAlreadyOn   = "AlreadyOnVersion"
)

// Outcome is what an eviction answered.
type Outcome string

// Outcomes.
const (
	// Evicted: the API took the eviction; the pod goes.
	Evicted Outcome = "evicted"
	// Blocked: 429, a PodDisruptionBudget does not allow it now. Tried
	// again at the next look, until the drain's deadline.
	Blocked Outcome = "blocked"
	// Gone: 404, the pod went by itself.
	Gone Outcome = "gone"
	// Failed: any other error; tried again at the next look.
	Failed Outcome = "failed"
)

// Eviction is the answer to the last eviction of a pod.
type Eviction struct {
	Outcome Outcome
	Message string
}

// Input is what Decide looks at.
type Input struct {
	Update v1alpha1.Update
	// Nodes are all the cluster's Nodes; Decide picks the covered ones.
	Nodes []corev1.Node
	// Pods holds, by node name, the pods bound to each node NeedPods
	// named. A node missing from the map was not listed (the list
	// failed): its drain waits rather than being taken for done.
	Pods map[string][]corev1.Pod
	// Evictions are the answers to the last round's evictions, by pod.
	Evictions map[types.NamespacedName]Eviction
	// Holder, when not empty, is another Update that holds the cluster
	// (Active): this one starts no node until it is over.
	Holder string
	Now    time.Time
}

// Kind is an action's kind.
type Kind string

// Action kinds.
const (
	// Cordon: spec.unschedulable true and AnnotationRollout set, in one
	// patch.
	Cordon Kind = "cordon"
	// Evict a pod through the eviction API.
	Evict Kind = "evict"
	// RequestUpdate sets update-to (and allow-downgrade) on the node.
	RequestUpdate Kind = "request-update"
	// Release gives a node back: uncordoned, and AnnotationRollout,
	// update-to and allow-downgrade removed, in one patch. The agent
	// takes a removed update-to as the request ended: it tries nothing
	// more, and a failed download is not retried.
	Release Kind = "release"
	// Event records an Event on the Update (Node names the node it is
	// about, if any).
	Event Kind = "event"
)

// Action is one thing to do.
type Action struct {
	Kind Kind
	Node string
	Pod  types.NamespacedName
	// Version and AllowDowngrade are RequestUpdate's.
	Version        string
	AllowDowngrade bool
	// Warning, Reason and Message are Event's.
	Warning         bool
	Reason, Message string
}

func (a Action) String() string {
	switch a.Kind {
	case Evict:
		return fmt.Sprintf("evict %s on %s", a.Pod, a.Node)
	case RequestUpdate:
		return fmt.Sprintf("request-update %s to %s allow-downgrade=%t", a.Node, a.Version, a.AllowDowngrade)
	case Event:
		t := "Normal"
		if a.Warning {
			t = "Warning"
		}
		return fmt.Sprintf("event %s %s: %s", t, a.Reason, a.Message)
	}
	return fmt.Sprintf("%s %s", a.Kind, a.Node)
}

// Plan is Decide's answer: the status to write, then the actions to do
// once it is written.
type Plan struct {
	Status  v1alpha1.UpdateStatus
	Actions []Action
}

// inFlight says the node is out: cordoned by the rollout and not given
// back.
func inFlight(s v1alpha1.NodeState) bool {
	switch s {
	case v1alpha1.NodeCordoned, v1alpha1.NodeDraining, v1alpha1.NodeUpdating, v1alpha1.NodeSoaking:
		return true
	}
	return false
}

// Finished says the Update acts no more: Completed, or Stopped with no
// node left in flight.
func Finished(u *v1alpha1.Update) bool {
	switch u.Status.Phase {
	case v1alpha1.PhaseCompleted:
		return true
	case v1alpha1.PhaseStopped:
		return !slices.ContainsFunc(u.Status.Nodes, func(n v1alpha1.NodeStatus) bool { return inFlight(n.State) })
	}
	return false
}

// Active is the Update that may start nodes: at most one does at a time,
// so that two Updates never fight over a node or each spend the budget.
// It is the oldest (by creation, then name) that has nodes in flight or
// is Progressing, or else the oldest not Finished; "" when none is.
func Active(us []v1alpha1.Update) string {
	var moving, waiting []*v1alpha1.Update
	for i := range us {
		u := &us[i]
		switch {
		case Finished(u) || u.DeletionTimestamp != nil:
		case u.Status.Phase == v1alpha1.PhaseProgressing || u.Status.Phase == v1alpha1.PhaseStopped:
			moving = append(moving, u)
		default:
			waiting = append(waiting, u)
		}
	}
	oldest := func(l []*v1alpha1.Update) string {
		u := slices.MinFunc(l, func(a, b *v1alpha1.Update) int {
			return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
		})
		return u.Name
	}
	switch {
	case len(moving) > 0:
		return oldest(moving)
	case len(waiting) > 0:
		return oldest(waiting)
	}
	return ""
}

// Orphans names the nodes held (AnnotationRollout) by an Update that is
// no longer there: deleted mid-rollout, it cannot give them back itself,
// so the controller releases them.
func Orphans(nodes []corev1.Node, updates []v1alpha1.Update) []string {
	exists := map[string]bool{}
	for _, u := range updates {
		exists[u.Name] = true
	}
	var out []string
	for _, n := range nodes {
		if by := n.Annotations[AnnotationRollout]; by != "" && !exists[by] {
			out = append(out, n.Name)
		}
	}
	slices.Sort(out)
	return out
}

// NeedPods names the nodes whose pods Decide needs: those being drained.
func NeedPods(s v1alpha1.UpdateStatus) []string {
	var out []string
	for _, n := range s.Nodes {
		if n.State == v1alpha1.NodeCordoned || n.State == v1alpha1.NodeDraining {
			out = append(out, n.Name)
		}
	}
	return out
}

type decider struct {
	in      Input
	u       *v1alpha1.Update
	spec    Spec
	now     metav1.Time
	st      v1alpha1.UpdateStatus
	nodes   map[string]*corev1.Node
	actions []Action
	// stops are this round's stop messages.
	stops []string
}

// Decide is the rollout's next step. It is pure: the same Input gives
// the same Plan.
func Decide(in Input) Plan {
	u := in.Update.DeepCopy()
	d := &decider{in: in, u: u, st: u.Status, now: metav1.NewTime(in.Now.UTC().Truncate(time.Second)), nodes: map[string]*corev1.Node{}}
	for i := range in.Nodes {
		d.nodes[in.Nodes[i].Name] = &in.Nodes[i]
	}
	d.decide()
	d.counts()
	return Plan{Status: d.st, Actions: d.actions}
}

func (d *decider) decide() {
	spec, err := ParseSpec(d.u.Spec)
	if err != nil {
		// A node in flight stays where it is, its cordon explained by
		// the condition, until the spec is mended.
		if d.st.Phase == "" {
			d.st.Phase = v1alpha1.PhasePending
		}
		msg := err.Error()
		if cur := d.inFlightNames(); len(cur) > 0 {
			msg += "; nodes held where they are until the spec is mended: " + strings.Join(cur, ", ")
		}
		d.condition(v1alpha1.ConditionProgressing, metav1.ConditionFalse, ReasonInvalidSpec, msg)
		return
	}
	d.spec = spec
	if d.st.Phase == v1alpha1.PhaseCompleted {
		return
	}
	if d.st.Phase == "" || d.st.Phase == v1alpha1.PhasePending {
		if d.in.Holder != "" {
			d.st.Phase = v1alpha1.PhasePending
			d.condition(v1alpha1.ConditionProgressing, metav1.ConditionFalse, ReasonWaiting,
				fmt.Sprintf("Update %s is rolling out; this one starts when it is over", d.in.Holder))
			return
		}
		d.st.Phase = v1alpha1.PhaseProgressing
		d.st.StartedAt = &d.now
		d.event(false, ReasonStarted, "", fmt.Sprintf("rolling out %s", spec.Version))
	}
	d.st.ObservedGeneration = d.u.Generation
	d.reconcileNodes()
	for i := range d.st.Nodes {
		d.step(&d.st.Nodes[i])
	}
	if d.stopping() {
		// A node stepped before this round's stop was met is given back
		// now, not a round later.
		for i := range d.st.Nodes {
			d.giveBackUnrequested(&d.st.Nodes[i])
		}
	}
	for i := range d.st.Nodes {
		d.repair(&d.st.Nodes[i])
	}
	d.start()
	d.finish()
}

// covered says the rollout covers n: it is a berth node (it reports a
// version) that the selector picks.
func (d *decider) covered(n *corev1.Node) bool {
	return n.Annotations[AnnotationVersion] != "" && d.spec.Selector.Matches(labels.Set(n.Labels))
}

// reconcileNodes adds the covered nodes the status lacks and drops the
// ones that left before being started.
func (d *decider) reconcileNodes() {
	have := map[string]bool{}
	kept := d.st.Nodes[:0:0]
	for _, e := range d.st.Nodes {
		n := d.nodes[e.Name]
		switch {
		case n == nil && inFlight(e.State):
			d.event(true, ReasonNodeGone, e.Name, fmt.Sprintf("node %s was deleted while %s; the rollout goes on without it", e.Name, e.State))
			continue
		case e.State == v1alpha1.NodePending && (n == nil || !d.covered(n)):
			continue
		}
		have[e.Name] = true
		kept = append(kept, e)
	}
	d.st.Nodes = kept
	if d.st.Phase != v1alpha1.PhaseProgressing {
		return
	}
	for _, n := range d.in.Nodes {
		if !have[n.Name] && d.covered(&n) {
			d.st.Nodes = append(d.st.Nodes, v1alpha1.NodeStatus{Name: n.Name, State: v1alpha1.NodePending})
		}
	}
	slices.SortFunc(d.st.Nodes, func(a, b v1alpha1.NodeStatus) int { return cmp.Compare(a.Name, b.Name) })
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// healthy says n is where the rollout wants it: on the version, Ready,
// and its agent content (blessed after the trial, or idle on a node that
// was already there).
func (d *decider) healthy(n *corev1.Node) bool {
	s := n.Annotations[AnnotationState]
	return sameVersion(n.Annotations[AnnotationVersion], d.spec.Version) && ready(n) && (s == agentBlessed || s == agentIdle)
}

// TakeUpTimeout is how long a node that showed a failure state when it
// was asked to update may go on showing exactly that: its agent looks at
// its Node every 10 s and says "downloading" as soon as it acts, so a
// node still silent after this does not take the request up. That is
// what a node does that was asked for a release that rolled back on it
// before: it refuses it for good, and goes on saying rolled-back.
const TakeUpTimeout = 2 * time.Minute

// failure says n's agent reports a failure of this request: a failure
// state, different from the one the node showed when it was asked (a
// failure left from an earlier request proves nothing about this one;
// one the agent repeats word for word is caught by nodeTimeout).
func failure(e *v1alpha1.NodeStatus, n *corev1.Node) (reason string, ok bool) {
	s, why := n.Annotations[AnnotationState], n.Annotations[AnnotationReason]
	if s == e.StateBefore && why == e.ReasonBefore {
		return "", false
	}
	switch s {
	case agentRolledBack:
		return ReasonRolledBack, true
	case agentRefused:
		return ReasonRefused, true
	case agentFailed:
		return ReasonFailed, true
	}
	return "", false
}

func (d *decider) ours(n *corev1.Node) bool {
	return n != nil && n.Annotations[AnnotationRollout] == d.u.Name
}

// release gives n back if the rollout holds it.
func (d *decider) release(name string) {
	if n := d.nodes[name]; d.ours(n) {
		d.act(Action{Kind: Release, Node: name})
	}
}

func (d *decider) stopping() bool { return d.st.Phase == v1alpha1.PhaseStopped }

// step moves one node on.
func (d *decider) step(e *v1alpha1.NodeStatus) {
	n := d.nodes[e.Name]
	if n == nil || !inFlight(e.State) {
		return
	}
	switch e.State {
	case v1alpha1.NodeCordoned, v1alpha1.NodeDraining:
		if d.stopping() {
			d.giveBackUnrequested(e)
			return
		}
		if e.State == v1alpha1.NodeCordoned {
			if !n.Spec.Unschedulable || !d.ours(n) {
				d.act(Action{Kind: Cordon, Node: e.Name})
				e.Message = "cordoning"
				return
			}
			e.State = v1alpha1.NodeDraining
		}
		d.drain(e, n)
	case v1alpha1.NodeUpdating, v1alpha1.NodeSoaking:
		d.follow(e, n)
	}
}

// giveBackUnrequested returns a node the rollout cordoned but has not
// told to update to pending, and gives it back: its drain's evictions
// this round are dropped.
func (d *decider) giveBackUnrequested(e *v1alpha1.NodeStatus) {
	if e.State != v1alpha1.NodeCordoned && e.State != v1alpha1.NodeDraining {
		return
	}
	d.actions = slices.DeleteFunc(d.actions, func(a Action) bool {
		return a.Node == e.Name && (a.Kind == Evict || a.Kind == Cordon)
	})
	d.release(e.Name)
	*e = v1alpha1.NodeStatus{Name: e.Name, State: v1alpha1.NodePending, Message: "the rollout stopped before this node was updated; it was given back"}
}

// evictable are the pods a drain moves: not a DaemonSet's (the node runs
// them whatever it is), not mirror pods (kubelet's own), not finished.
// Pods of no controller are evicted too: the update's reboot would end
// them anyway, and evicting gives them their grace period.
func evictable(pods []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
			continue
		}
		if c := metav1.GetControllerOf(&p); c != nil && c.Kind == "DaemonSet" {
			continue
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b corev1.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

func (d *decider) drain(e *v1alpha1.NodeStatus, n *corev1.Node) {
	pods, listed := d.in.Pods[e.Name]
	if !listed {
		e.Message = "draining: waiting for the node's pods to be listed"
		return
	}
	left := evictable(pods)
	if len(left) == 0 {
		e.State = v1alpha1.NodeUpdating
		e.Requested = &d.now
		e.StateBefore, e.ReasonBefore = n.Annotations[AnnotationState], n.Annotations[AnnotationReason]
		e.Message = fmt.Sprintf("drained; told to update to %s", d.spec.Version)
		d.event(false, ReasonUpdating, e.Name, fmt.Sprintf("node %s drained; told to update from %s to %s", e.Name, e.From, d.spec.Version))
		d.follow(e, n)
		return
	}
	// The pod to name is one an eviction was refused for, the PDB's;
	// else one that failed; else the first left.
	blocker, why := left[0], "still running"
	for _, want := range []Outcome{Failed, Blocked} {
		for _, p := range left {
			if r, ok := d.in.Evictions[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}]; ok && r.Outcome == want {
				blocker, why = p, fmt.Sprintf("eviction %s: %s", r.Outcome, r.Message)
				break
			}
		}
	}
	name := types.NamespacedName{Namespace: blocker.Namespace, Name: blocker.Name}
	if e.Started != nil && d.in.Now.Sub(e.Started.Time) > d.spec.DrainTimeout {
		d.release(e.Name)
		d.stop(e, ReasonDrainTimeout, fmt.Sprintf("node %s: the drain was blocked for more than %s by pod %s (%s); the node was uncordoned",
			e.Name, d.spec.DrainTimeout, name, why))
		return
	}
	e.Message = fmt.Sprintf("draining: %d pods left; waiting on %s (%s)", len(left), name, why)
	for _, p := range left {
		if p.DeletionTimestamp == nil {
			d.act(Action{Kind: Evict, Node: e.Name, Pod: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
		}
	}
}

// follow watches a node told to update until it is done or failed.
func (d *decider) follow(e *v1alpha1.NodeStatus, n *corev1.Node) {
	v := n.Annotations[AnnotationVersion]
	state, why := n.Annotations[AnnotationState], n.Annotations[AnnotationReason]
	if r, bad := failure(e, n); bad {
		d.release(e.Name)
		d.stop(e, r, fmt.Sprintf("node %s: %s updating to %s: %s", e.Name, state, d.spec.Version, cmp.Or(why, "no reason given")))
		return
	}
	if !d.healthy(n) {
		e.State, e.SoakSince = v1alpha1.NodeUpdating, nil
		e.Message = fmt.Sprintf("updating to %s: runs %s, Ready %t, update state %q", d.spec.Version, v, ready(n), state)
		// A request the status holds but the Node lacks: the controller
		// stopped between the two (or someone removed it). It is made
		// now, and the node's time counts from now: a controller that
		// was down a while does not judge a node on a request it never
		// saw. Nothing that reached the node is asked twice.
		if n.Annotations[AnnotationUpdateTo] != d.spec.Version || (n.Annotations[AnnotationAllowDowngrade] == "true") != d.spec.AllowDowngrade {
			d.act(Action{Kind: RequestUpdate, Node: e.Name, Version: d.spec.Version, AllowDowngrade: d.spec.AllowDowngrade})
			e.Requested = &d.now
			return
		}
		since := time.Duration(0)
		if e.Requested != nil {
			since = d.in.Now.Sub(e.Requested.Time)
		}
		if since > d.spec.NodeTimeout {
			d.release(e.Name)
			d.stop(e, ReasonNodeTimeout, fmt.Sprintf("node %s did not come back on %s, Ready and blessed, within %s (it runs %s, Ready %t, update state %q: %s); it was uncordoned",
				e.Name, d.spec.Version, d.spec.NodeTimeout, v, ready(n), state, cmp.Or(why, "no reason given")))
			return
		}
		if silent := state == e.StateBefore && why == e.ReasonBefore && (state == agentRolledBack || state == agentRefused || state == agentFailed); silent && since > TakeUpTimeout {
			d.release(e.Name)
			d.stop(e, ReasonNotTakenUp, fmt.Sprintf("node %s did not take up the request for %s within %s: it still reports %s (%s); a node refuses for good a release that rolled back on it",
				e.Name, d.spec.Version, TakeUpTimeout, state, cmp.Or(why, "no reason given")))
		}
		return
	}
	if e.State != v1alpha1.NodeSoaking || e.SoakSince == nil {
		e.State, e.SoakSince = v1alpha1.NodeSoaking, &d.now
	}
	until := e.SoakSince.Add(d.spec.Soak)
	if d.in.Now.Before(until) {
		e.Message = fmt.Sprintf("on %s, Ready and %s; soaking until %s", d.spec.Version, state, until.UTC().Format(time.RFC3339))
		return
	}
	d.release(e.Name)
	e.State, e.Finished = v1alpha1.NodeDone, &d.now
	e.Message = fmt.Sprintf("on %s; uncordoned after %s of soak", d.spec.Version, d.spec.Soak)
	d.event(false, ReasonNodeUpdated, e.Name, fmt.Sprintf("node %s is on %s and was uncordoned", e.Name, d.spec.Version))
}

// stop fails e and stops the rollout; a second failure while stopped is
// added to the first's message.
func (d *decider) stop(e *v1alpha1.NodeStatus, reason, msg string) {
	e.State, e.Finished, e.Message = v1alpha1.NodeFailed, &d.now, msg
	d.event(true, reason, e.Name, msg)
	d.stops = append(d.stops, msg)
	if c := meta.FindStatusCondition(d.st.Conditions, v1alpha1.ConditionStopped); d.stopping() && c != nil && c.Status == metav1.ConditionTrue {
		d.condition(v1alpha1.ConditionStopped, metav1.ConditionTrue, c.Reason, c.Message+"; then "+msg)
		return
	}
	d.st.Phase = v1alpha1.PhaseStopped
	d.condition(v1alpha1.ConditionStopped, metav1.ConditionTrue, reason,
		msg+". A node that failed is not tried again by this Update; create a new one to try again")
}

// repair gives back a node the rollout is done with but still holds:
// the controller stopped after writing the status and before releasing.
func (d *decider) repair(e *v1alpha1.NodeStatus) {
	if !inFlight(e.State) {
		d.release(e.Name)
	}
}

// start marks the pending nodes already on the version done, and starts
// as many others as the budget and the window allow.
func (d *decider) start() {
	for i := range d.st.Nodes {
		e := &d.st.Nodes[i]
		if n := d.nodes[e.Name]; e.State == v1alpha1.NodePending && n != nil && sameVersion(n.Annotations[AnnotationVersion], d.spec.Version) {
			e.State, e.Started, e.Finished, e.From = v1alpha1.NodeDone, &d.now, &d.now, n.Annotations[AnnotationVersion]
			e.Message = fmt.Sprintf("already on %s", d.spec.Version)
		}
	}
	if d.stopping() || d.in.Holder != "" {
		return
	}
	out := d.unavailable()
	for i := range d.st.Nodes {
		e := &d.st.Nodes[i]
		n := d.nodes[e.Name]
		if e.State != v1alpha1.NodePending || n == nil || !ready(n) || n.Spec.Unschedulable {
			continue
		}
		if len(out) >= d.spec.MaxUnavailable {
			return
		}
		if d.spec.Window != nil && !d.spec.Window.Open(d.in.Now) {
			return
		}
		*e = v1alpha1.NodeStatus{Name: e.Name, State: v1alpha1.NodeCordoned, From: n.Annotations[AnnotationVersion], Started: &d.now, Message: "cordoning"}
		d.act(Action{Kind: Cordon, Node: e.Name})
		d.event(false, ReasonCordoned, e.Name, fmt.Sprintf("cordoned node %s to update it from %s to %s", e.Name, e.From, d.spec.Version))
		out = append(out, e.Name+" (updating)")
	}
}

// unavailable lists the covered nodes out: those in flight, and any other
// that is not Ready or is cordoned.
func (d *decider) unavailable() []string {
	var out []string
	for _, e := range d.st.Nodes {
		n := d.nodes[e.Name]
		switch {
		case inFlight(e.State):
			out = append(out, e.Name+" (updating)")
		case n == nil:
		case !ready(n):
			out = append(out, e.Name+" (not Ready)")
		case n.Spec.Unschedulable && d.ours(n):
			// Released this round: the next node waits for the uncordon
			// to be seen, so that a release that fails never leaves two
			// nodes out.
			out = append(out, e.Name+" (being uncordoned)")
		case n.Spec.Unschedulable:
			out = append(out, e.Name+" (cordoned outside this rollout)")
		}
	}
	return out
}

// finish completes the rollout when every node is done, and says where
// it stands in the Progressing condition.
func (d *decider) finish() {
	var flying, pending []string
	done := 0
	for _, e := range d.st.Nodes {
		switch {
		case inFlight(e.State):
			flying = append(flying, fmt.Sprintf("%s %s (%s)", e.Name, e.State, e.Message))
		case e.State == v1alpha1.NodePending:
			pending = append(pending, e.Name)
		case e.State == v1alpha1.NodeDone:
			done++
		}
	}
	switch {
	case d.stopping():
		msg := "stopped; no node is started"
		if len(flying) > 0 {
			msg += "; nodes already told to update are followed to their end: " + strings.Join(flying, "; ")
		}
		d.condition(v1alpha1.ConditionProgressing, metav1.ConditionFalse, ReasonStopped, msg)
	case len(d.st.Nodes) == 0:
		d.condition(v1alpha1.ConditionProgressing, metav1.ConditionTrue, ReasonNoNodes, "no berth node (one reporting "+AnnotationVersion+") matches the selector")
	case done == len(d.st.Nodes):
		d.st.Phase = v1alpha1.PhaseCompleted
		d.st.CompletedAt = &d.now
		msg := fmt.Sprintf("all %d nodes are on %s", done, d.spec.Version)
		d.condition(v1alpha1.ConditionProgressing, metav1.ConditionFalse, ReasonCompleted, msg)
		d.event(false, ReasonCompleted, "", msg)
	case len(flying) > 0:
		d.condition(v1alpha1.ConditionProgressing, metav1.ConditionTrue, ReasonUpdating, strings.Join(flying, "; "))
	default:
		d.condition(v1alpha1.ConditionProgressing, metav1.ConditionTrue, ReasonWaiting, d.why(pending))
	}
}

// why says what keeps the pending nodes from starting.
func (d *decider) why(pending []string) string {
	switch out := d.unavailable(); {
	case d.in.Holder != "":
		return fmt.Sprintf("Update %s is rolling out; the rest wait for it", d.in.Holder)
	case len(out) >= d.spec.MaxUnavailable:
		return fmt.Sprintf("%d pending; maxUnavailable %d is spent by %s", len(pending), d.spec.MaxUnavailable, strings.Join(out, ", "))
	case d.spec.Window != nil && !d.spec.Window.Open(d.in.Now):
		return fmt.Sprintf("%d pending; outside the maintenance window (%s)", len(pending), d.spec.Window)
	}
	return fmt.Sprintf("%d pending: %s", len(pending), strings.Join(pending, ", "))
}

func (d *decider) inFlightNames() []string {
	var out []string
	for _, e := range d.st.Nodes {
		if inFlight(e.State) {
			out = append(out, e.Name)
		}
	}
	return out
}

func (d *decider) counts() {
	d.st.Done, d.st.Total, d.st.Current = 0, int32(len(d.st.Nodes)), ""
	var cur []string
	for _, e := range d.st.Nodes {
		if e.State == v1alpha1.NodeDone {
			d.st.Done++
		}
		if inFlight(e.State) {
			cur = append(cur, e.Name)
		}
	}
	d.st.Current = strings.Join(cur, ",")
}

func (d *decider) condition(typ string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&d.st.Conditions, metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg,
		ObservedGeneration: d.u.Generation, LastTransitionTime: d.now})
}

// act adds a, once: a node released by its step is not released again by
// the repair that follows.
func (d *decider) act(a Action) {
	if a.Kind != Event && slices.Contains(d.actions, a) {
		return
	}
	d.actions = append(d.actions, a)
}

func (d *decider) event(warning bool, reason, node, msg string) {
	d.act(Action{Kind: Event, Warning: warning, Reason: reason, Node: node, Message: msg})
}
