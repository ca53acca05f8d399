package decide

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/rollout/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

type want struct {
	phase   v1alpha1.Phase
	actions []string
	states  map[string]v1alpha1.NodeState
	// conds are substrings each condition's "Status Reason: Message"
	// must hold, by type.
	conds map[string][]string
	check func(t *testing.T, p Plan)
}

func nn(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }

func TestDecide(t *testing.T) {
	ours := cordonedBy("to-b")
	blessedB := []nodeOpt{agentState(agentBlessed, "blessed: Ready for 1m"), updateTo(vB), ours}
	for _, tc := range []struct {
		name string
		in   Input
		want want
	}{{
		name: "a new Update lists its nodes and cordons the first",
		in:   Input{Update: mkUpdate(), Nodes: []corev1.Node{mkNode("n2", vA), mkNode("n1", vA), mkNode("n3", vA)}},
		want: want{phase: v1alpha1.PhaseProgressing,
			actions: []string{"event Normal Started: rolling out 1.2.0", "cordon n1", "event Normal Cordoned: cordoned node n1 to update it from 1.1.0 to 1.2.0"},
			states:  map[string]v1alpha1.NodeState{"n1": v1alpha1.NodeCordoned, "n2": v1alpha1.NodePending, "n3": v1alpha1.NodePending},
			conds:   map[string][]string{"Progressing": {"True Updating", "n1 cordoned"}},
			check: func(t *testing.T, p Plan) {
				if p.Status.Total != 3 || p.Status.Done != 0 || p.Status.Current != "n1" || p.Status.StartedAt == nil || p.Status.ObservedGeneration != 1 {
					t.Errorf("counts: total %d done %d current %q started %v generation %d", p.Status.Total, p.Status.Done, p.Status.Current, p.Status.StartedAt, p.Status.ObservedGeneration)
				}
				if p.Status.Nodes[0].From != vA || !p.Status.Nodes[0].Started.Equal(at(0)) {
					t.Errorf("n1's entry: %+v", p.Status.Nodes[0])
				}
			}},
	}, {
		name: "nodes already on the version are done without a cordon",
		in:   Input{Update: mkUpdate(), Nodes: []corev1.Node{mkNode("n1", "v1.2"), mkNode("n2", vA)}},
		want: want{phase: v1alpha1.PhaseProgressing,
			actions: []string{"event Normal Started: rolling out 1.2.0", "cordon n2", "event Normal Cordoned: cordoned node n2 to update it from 1.1.0 to 1.2.0"},
			states:  map[string]v1alpha1.NodeState{"n1": v1alpha1.NodeDone, "n2": v1alpha1.NodeCordoned}},
	}, {
		name: "every node already on the version: Completed at once",
		in:   Input{Update: mkUpdate(), Nodes: []corev1.Node{mkNode("n1", vB), mkNode("n2", vB)}},
		want: want{phase: v1alpha1.PhaseCompleted,
			actions: []string{"event Normal Started: rolling out 1.2.0", "event Normal Completed: all 2 nodes are on 1.2.0"},
			conds:   map[string][]string{"Progressing": {"False Completed"}}},
	}, {
		name: "the selector picks the nodes, and nodes reporting no version are no berth nodes",
		in: Input{Update: mkUpdate(func(u *v1alpha1.Update) {
			u.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "web"}}
		}), Nodes: []corev1.Node{mkNode("n1", vA), mkNode("n2", vA, label("tier", "web")), mkNode("n3", vA, label("tier", "web"), noVersion)}},
		want: want{phase: v1alpha1.PhaseProgressing, states: map[string]v1alpha1.NodeState{"n2": v1alpha1.NodeCordoned},
			actions: []string{"event Normal Started: rolling out 1.2.0", "cordon n2", "event Normal Cordoned: cordoned node n2 to update it from 1.1.0 to 1.2.0"}},
	}, {
		name: "maxUnavailable 2 starts two",
		in:   Input{Update: mkUpdate(maxUnavailable(2), progressing(pending("n1"), pending("n2"), pending("n3"))), Nodes: []corev1.Node{mkNode("n1", vA), mkNode("n2", vA), mkNode("n3", vA)}},
		want: want{states: map[string]v1alpha1.NodeState{"n1": v1alpha1.NodeCordoned, "n2": v1alpha1.NodeCordoned, "n3": v1alpha1.NodePending},
			actions: []string{"cordon n1", "event Normal Cordoned: cordoned node n1 to update it from 1.1.0 to 1.2.0", "cordon n2", "event Normal Cordoned: cordoned node n2 to update it from 1.1.0 to 1.2.0"}},
	}, {
		name: "a node NotReady before the rollout spends the budget",
		in:   Input{Update: mkUpdate(progressing(pending("n1"), pending("n2"))), Nodes: []corev1.Node{mkNode("n1", vA, notReady), mkNode("n2", vA)}},
		want: want{states: map[string]v1alpha1.NodeState{"n1": v1alpha1.NodePending, "n2": v1alpha1.NodePending},
			conds: map[string][]string{"Progressing": {"True Waiting", "maxUnavailable 1 is spent by n1 (not Ready)"}}},
	}, {
		name: "a node cordoned by someone else spends the budget and is never touched",
		in:   Input{Update: mkUpdate(maxUnavailable(2), progressing(pending("n1"), pending("n2"), pending("n3"))), Nodes: []corev1.Node{mkNode("n1", vA, cordonedBy("")), mkNode("n2", vA), mkNode("n3", vA)}},
		want: want{states: map[string]v1alpha1.NodeState{"n1": v1alpha1.NodePending, "n2": v1alpha1.NodeCordoned, "n3": v1alpha1.NodePending},
			actions: []string{"cordon n2", "event Normal Cordoned: cordoned node n2 to update it from 1.1.0 to 1.2.0"}},
	}, {
		name: "outside the maintenance window no node starts",
		in:   Input{Update: mkUpdate(window([]string{"Sat", "Sun"}, "22:00", "04:00"), progressing(pending("n1"))), Nodes: []corev1.Node{mkNode("n1", vA)}},
		want: want{states: map[string]v1alpha1.NodeState{"n1": v1alpha1.NodePending},
			conds: map[string][]string{"Progressing": {"True Waiting", "outside the maintenance window (Sun,Sat 22:00-04:00 UTC)"}}},
	}, {
		name: "inside the window (Sunday's, past midnight into Monday) a node starts",
		in:   Input{Update: mkUpdate(window([]string{"Sun"}, "22:00", "13:00"), progressing(pending("n1"))), Nodes: []corev1.Node{mkNode("n1", vA)}},
		want: want{states: map[string]v1alpha1.NodeState{"n1": v1alpha1.NodeCordoned},
			actions: []string{"cordon n1", "event Normal Cordoned: cordoned node n1 to update it from 1.1.0 to 1.2.0"}},
	}, {
		name: "a node in progress finishes outside the window",
		in: Input{Update: mkUpdate(window([]string{"Sat"}, "01:00", "02:00"), progressing(entry("n1", v1alpha1.NodeSoaking, -time.Hour), pending("n2"))),
			Nodes: []corev1.Node{mkNode("n1", vB, blessedB...), mkNode("n2", vA)}},
		want: want{states: map[string]v1alpha1.NodeState{"n1": v1alpha1.NodeDone, "n2": v1alpha1.NodePending},
			actions: []string{"release n1", "event Normal NodeUpdated: node n1 is on 1.2.0 and was uncordoned"},
			conds:   map[string][]string{"Progressing": {"True Waiting", "spent by n1 (being uncordoned)"}}},
	}, {
		name: "a cordon not yet made (or lost) is made again",
		in:   Input{Update: mkUpdate(progressing(entry("n1", v1alpha1.NodeCordoned, 0))), Nodes: []corev1.Node{mkNode("n1", vA)}},
		want: want{states: map[string]v1alpha1.NodeState{"n1": v1alpha1.NodeCordoned}, actions: []string{"cordon n1"}},
	}, {
		name: "cordoned: the drain evicts all but DaemonSet, mirror, finished and terminating pods",
		in: Input{Update: mkUpdate(progressing(entry("n1", v1alpha1.NodeCordoned, 0))), Nodes: []corev1.Node{mkNode("n1", vA, ours)},
			Pods: map[string][]corev1.Pod{"n1": {mkPod("web", "b", "n1", ownedBy("ReplicaSet")), mkPod("kube-system", "flannel", "n1", ownedBy("DaemonSet")),
				mkPod("kube-system", "static", "n1", mirror), mkPod("batch", "done", "n1", succeeded), mkPod("web", "a", "n1"),
				mkPod("web", "going", "n1", deleting)}}},
		want: want{states: map[string]v1alpha1.NodeState{"n1": v1alpha1.NodeDraining},
			actions: []string{"evict web/a on n1", "evict web/b on n1"},
			conds:   map[string][]string{"Progressing": {"n1 draining (draining: 3 pods left; waiting on web/a (still running))"}}},
	}, {
		name: "a drain waits for the pods to be listed",
		in:   Input{Update: mkUpdate(progressing(entry("n1", v1alpha1.NodeDraining, 0))), Nodes: []corev1.Node{mkNode("n1", vA, ours)}},
		want: want{states: map[string]v1alpha1.NodeState{"n1": v1alpha1.NodeDraining},
			conds: map[string][]string{"Progressing": {"waiting for the node's pods to be listed"}}},
	}, {
		name: "a blocked eviction is named and tried again",
		in: Input{Update: mkUpdate(progressing(entry("n1", v1alpha1.NodeDraining, -time.Minute))), Nodes: []corev1.Node{mkNode("n1", vA, ours)},
			Pods:      map[string][]corev1.Pod{"n1": {mkPod("web", "a", "n1"), mkPod("web", "b", "n1")}},
			Evictions: map[types.NamespacedName]Eviction{nn("web", "a"): {Outcome: Failed, Message: "etcd timeout"}, nn("web", "b"): {Outcome: Blocked, Message: "would violate the pod's disruption budget"}}},
		want: want{states: map[string]v1alpha1.NodeState{"n1": v1alpha1.NodeDraining},
			actions: []string{"evict web/a on n1", "evict web/b on n1"},
			conds:   map[string][]string{"Progressing": {"waiting on web/b (eviction blocked: would violate the pod's disruption budget)"}}},
	}, {
		name: "a drain blocked past drainTimeout stops the rollout, names the pod and uncordons the node",
		in: Input{Update: mkUpdate(progressing(entry("n1", v1alpha1.NodeDraining, -11*time.Minute), pending("n2"))), Nodes: []corev1.Node{mkNode("n1", vA, ours), mkNode("n2", vA)},
			Pods:      map[string][]corev1.Pod{"n1": {mkPod("web", "a", "n1")}},
			Evictions: map[types.NamespacedName]Eviction{nn("web", "a"): {Outcome: Blocked, Message: "would violate the pod's disruption budget"}}},
		want: want{phase: v1alpha1.PhaseStopped, states: map[string]v1alpha1.NodeState{"n1": v1alpha1.NodeFailed, "n2": v1alpha1.NodePending},
			actions: []string{"release n1", "event Warning DrainTimeout: node n1: the drain was blocked for more than 10m0s by pod web/a (eviction blocked: would violate the pod's disruption budget); the node was uncordoned"},
			conds: map[string][]string{"Stopped": {"True DrainTimeout", "pod web/a", "create a new one"},
				"Progressing": {"False Stopped"}}},
	}, {
		name: "drained: the node is told to update, and the state it showed is kept",
		in: Input{Update: mkUpdate(func(u *v1alpha1.Update) { u.Spec.AllowDowngrade = true }, progressing(entry("n1", v1alpha1.NodeDraining, 0))),
			Nodes: []corev1.Node{mkNode("n1", vA, ours, agentState(agentRefused, "1.0.9 is older"))},
			Pods:  map[string][]corev1.Pod{"n1": {mkPod("kube-system", "flannel", "n1", ownedBy("DaemonSet"))}}},
		want: want{states: map[string]v1alpha1.NodeState{"n1": v1alpha1.NodeUpdating},
			actions: []string{"event Normal Updating: node n1 drained; told to update from 1.1.0 to 1.2.0", "request-update n1 to 1.2.0 allow-downgrade=true"},
			check: func(t *testing.T, p Plan) {
				e := p.Status.Nodes[0]
				if e.StateBefore != agentRefused || e.ReasonBefore != "1.0.9 is older" || !e.Requested.Equal(at(0)) {
					t.Errorf("n1's entry: %+v", e)
				}
			}},
	}, {
		name: "updating, and the Node carries the request: nothing is asked again",
		in:   Input{Update: mkUpdate(progressing(entry("n1", v1alpha1.NodeUpdating, -5*time.Minute))), Nodes: []corev1.Node{mkNode("n1", vA, ours, updateTo(vB), agentState("downloading", ""))}},
		want: want{states: map[string]v1alpha1.NodeState{"n1": v1alpha1.NodeUpdating},
			conds: map[string][]string{"Progressing": {`n1 updating (updating to 1.2.0: runs 1.1.0, Ready true, update state "downloading")`}}},
	}, {
		name: "updating, and the Node lacks the request (a controller stopped between status and patch): it is made",
		in:   Input{Update: mkUpdate(progressing(entry("n1", v1alpha1.NodeUpdating, -5*time.Minute))), Nodes: []corev1.Node{mkNode("n1", vA, ours)}},
		want: want{states: map[string]v1alpha1.NodeState{"n1": v1alpha1.NodeUpdating}, actions: []string{"request-update n1 to 1.2.0 allow-downgrade=false"},
			check: func(t *testing.T, p Plan) {
				if !p.Status.Nodes[0].Requested.Equal(at(0)) {
					t.Errorf("requested %v: the node's time counts from the request made now", p.Status.Nodes[0].Requested)
				}
			}},
	}, {
		name: "a controller back after a long outage makes the missing request and judges nothing yet",
		in: Input{Update: mkUpdate(progressing(func() v1alpha1.NodeStatus {
			e := entry("n1", v1alpha1.NodeUpdating, -time.Hour)
			e.StateBefore, e.ReasonBefore = agentFailed, "repository unreachable"
			return e
		}())), Nodes: []corev1.Node{mkNode("n1", vA, ours, agentState(agentFailed, "repository unreachable"))}},
		want: want{states: map[string]v1alpha1.NodeState{"n1": v1alpha1.NodeUpdating}, actions: []string{"request-update n1 to 1.2.0 allow-downgrade=false"}},
	}, {
		name: "a failure state left from before the request is not this request's",
		in: Input{Update: mkUpdate(progressing(func() v1alpha1.NodeStatus {
			e := entry("n1", v1alpha1.NodeUpdating, -2*time.Minute)
			e.StateBefore, e.ReasonBefore = agentFailed, "repository unreachable"
			return e
		}())), Nodes: []corev1.Node{mkNode("n1", vA, ours, updateTo(vB), agentState(agentFailed, "repository unreachable"))}},
		want: want{states: map[string]v1alpha1.NodeState{"n1": v1alpha1.NodeUpdating}},
	}, {
		name: "a node that goes on showing the failure it showed before past TakeUpTimeout does not take the request up: stop",
		in: Input{Update: mkUpdate(progressing(func() v1alpha1.NodeStatus {
			e := entry("n1", v1alpha1.NodeUpdating, -5*time.Minute)
			e.StateBefore, e.ReasonBefore = agentRolledBack, "rolled back: not Ready within 5m"
			return e
		}())), Nodes: []corev1.Node{mkNode("n1", vA, ours, updateTo(vB), agentState(agentRolledBack, "rolled back: not Ready within 5m"))}},
		want: want{phase: v1alpha1.PhaseStopped, states: map[string]v1alpha1.NodeState{"n1": v1alpha1.NodeFailed},
			actions: []string{"release n1", "event Warning NotTakenUp: node n1 did not take up the request for 1.2.0 within 2m0s: it still reports rolled-back (rolled back: not Ready within 5m); a node refuses for good a release that rolled back on it"},
			conds:   map[string][]string{"Stopped": {"True NotTakenUp", "node n1"}}},
	}, {
		name: "an invalid spec mid-rollout holds the nodes in flight and names them",
		in: Input{Update: mkUpdate(func(u *v1alpha1.Update) { u.Spec.DrainTimeout = "-1m" }, progressing(entry("n1", v1alpha1.NodeDraining, 0))),
			Nodes: []corev1.Node{mkNode("n1", vA, ours)}, Pods: map[string][]corev1.Pod{"n1": {mkPod("web", "a", "n1")}}},
		want: want{phase: v1alpha1.PhaseProgressing, states: map[string]v1alpha1.NodeState{"n1": v1alpha1.NodeDraining},
			conds: map[string][]string{"Progressing": {"False InvalidSpec", "spec.drainTimeout", "held where they are until the spec is mended: n1"}}},
	}, {
		name: "a rollback stops the rollout, names the node and gives it back",
		in: Input{Update: mkUpdate(progressing(entry("n1", v1alpha1.NodeUpdating, -10*time.Minute), pending("n2"))),
			Nodes: []corev1.Node{mkNode("n1", vA, ours, updateTo(vB), agentState(agentRolledBack, "rolled back: not Ready within 5m")), mkNode("n2", vA)}},
		want: want{phase: v1alpha1.PhaseStopped, states: map[string]v1alpha1.NodeState{"n1": v1alpha1.NodeFailed, "n2": v1alpha1.NodePending},
			actions: []string{"release n1", "event Warning RolledBack: node n1: rolled-back updating to 1.2.0: rolled back: not Ready within 5m"},
			conds:   map[string][]string{"Stopped": {"True RolledBack", "node n1"}}},
	}, {
		name: "a refusal stops the rollout",
		in: Input{Update: mkUpdate(progressing(entry("n1", v1alpha1.NodeUpdating, -2*time.Minute))),
			Nodes: []corev1.Node{mkNode("n1", vA, ours, updateTo(vB), agentState(agentRefused, "1.2.0 is not in the repository"))}},
		want: want{phase: v1alpha1.PhaseStopped, states: map[string]v1alpha1.NodeState{"n1": v1alpha1.NodeFailed},
			actions: []string{"release n1", "event Warning Refused: node n1: refused updating to 1.2.0: 1.2.0 is not in the repository"},
			conds:   map[string][]string{"Stopped": {"True Refused", "node n1"}}},
	}, {
		name: "a failed update stops the rollout",
		in: Input{Update: mkUpdate(progressing(entry("n1", v1alpha1.NodeUpdating, -2*time.Minute))),
			Nodes: []corev1.Node{mkNode("n1", vA, ours, updateTo(vB), agentState(agentFailed, "writing slot b: EIO (trying again in 1m0s)"))}},
		want: want{phase: v1alpha1.PhaseStopped, states: map[string]v1alpha1.NodeState{"n1": v1alpha1.NodeFailed},
			actions: []string{"release n1", "event Warning UpdateFailed: node n1: failed updating to 1.2.0: writing slot b: EIO (trying again in 1m0s)"},
			conds:   map[string][]string{"Stopped": {"True UpdateFailed"}}},
	}, {
		name: "a node not back on the version within nodeTimeout stops the rollout",
		in: Input{Update: mkUpdate(progressing(entry("n1", v1alpha1.NodeUpdating, -30*time.Minute))),
			Nodes: []corev1.Node{mkNode("n1", vB, ours, updateTo(vB), notReady, agentState("trial", "1.2.0 booted on trial"))}},
		want: want{phase: v1alpha1.PhaseStopped, states: map[string]v1alpha1.NodeState{"n1": v1alpha1.NodeFailed},
			actions: []string{"release n1", `event Warning NodeTimeout: node n1 did not come back on 1.2.0, Ready and blessed, within 20m0s (it runs 1.2.0, Ready false, update state "trial": 1.2.0 booted on trial); it was uncordoned`},
			conds:   map[string][]string{"Stopped": {"True NodeTimeout", "node n1"}}},
	}, {
		name: "back on the version, Ready and blessed: the soak starts",
		in:   Input{Update: mkUpdate(progressing(entry("n1", v1alpha1.NodeUpdating, -8*time.Minute))), Nodes: []corev1.Node{mkNode("n1", vB, blessedB...)}},
		want: want{states: map[string]v1alpha1.NodeState{"n1": v1alpha1.NodeSoaking},
			conds: map[string][]string{"Progressing": {"soaking until 2030-01-07T12:02:00Z"}},
			check: func(t *testing.T, p Plan) {
				if !p.Status.Nodes[0].SoakSince.Equal(at(0)) {
					t.Errorf("soak since %v", p.Status.Nodes[0].SoakSince)
				}
			}},
	}, {
		name: "soaking, not yet long enough",
		in:   Input{Update: mkUpdate(progressing(entry("n1", v1alpha1.NodeSoaking, -6*time.Minute))), Nodes: []corev1.Node{mkNode("n1", vB, blessedB...)}},
		want: want{states: map[string]v1alpha1.NodeState{"n1": v1alpha1.NodeSoaking}},
	}, {
		name: "a soaking node that falls NotReady waits again, its soak reset",
		in:   Input{Update: mkUpdate(progressing(entry("n1", v1alpha1.NodeSoaking, -6*time.Minute))), Nodes: []corev1.Node{mkNode("n1", vB, append(blessedB, notReady)...)}},
		want: want{states: map[string]v1alpha1.NodeState{"n1": v1alpha1.NodeUpdating},
			check: func(t *testing.T, p Plan) {
				if p.Status.Nodes[0].SoakSince != nil {
					t.Errorf("soak since %v, want none", p.Status.Nodes[0].SoakSince)
				}
			}},
	}, {
		name: "soaked: uncordoned and done; the next node waits to see the uncordon",
		in: Input{Update: mkUpdate(progressing(entry("n1", v1alpha1.NodeSoaking, -10*time.Minute), pending("n2"))),
			Nodes: []corev1.Node{mkNode("n1", vB, blessedB...), mkNode("n2", vA)}},
		want: want{states: map[string]v1alpha1.NodeState{"n1": v1alpha1.NodeDone, "n2": v1alpha1.NodePending},
			actions: []string{"release n1", "event Normal NodeUpdated: node n1 is on 1.2.0 and was uncordoned"}},
	}, {
		name: "the done node seen uncordoned: the next starts",
		in: Input{Update: mkUpdate(progressing(entry("n1", v1alpha1.NodeDone, -10*time.Minute), pending("n2"))),
			Nodes: []corev1.Node{mkNode("n1", vB, agentState(agentBlessed, "")), mkNode("n2", vA)}},
		want: want{states: map[string]v1alpha1.NodeState{"n1": v1alpha1.NodeDone, "n2": v1alpha1.NodeCordoned},
			actions: []string{"cordon n2", "event Normal Cordoned: cordoned node n2 to update it from 1.1.0 to 1.2.0"}},
	}, {
		name: "idle on the version counts as blessed (an agent restarted since)",
		in: Input{Update: mkUpdate(progressing(entry("n1", v1alpha1.NodeSoaking, -10*time.Minute))),
			Nodes: []corev1.Node{mkNode("n1", vB, ours, updateTo(vB))}},
		want: want{phase: v1alpha1.PhaseCompleted, states: map[string]v1alpha1.NodeState{"n1": v1alpha1.NodeDone},
			actions: []string{"release n1", "event Normal NodeUpdated: node n1 is on 1.2.0 and was uncordoned", "event Normal Completed: all 1 nodes are on 1.2.0"}},
	}, {
		name: "stopped: a node told to update is followed to its end; one only cordoned is given back; none starts",
		in: Input{Update: mkUpdate(maxUnavailable(3), stopped(entry("n1", v1alpha1.NodeSoaking, -10*time.Minute), entry("n2", v1alpha1.NodeDraining, -time.Minute),
			entry("n3", v1alpha1.NodeFailed, -20*time.Minute), pending("n4"))),
			Nodes: []corev1.Node{mkNode("n1", vB, blessedB...), mkNode("n2", vA, ours), mkNode("n3", vA), mkNode("n4", vA)},
			Pods:  map[string][]corev1.Pod{"n2": {mkPod("web", "a", "n2")}}},
		want: want{phase: v1alpha1.PhaseStopped,
			states:  map[string]v1alpha1.NodeState{"n1": v1alpha1.NodeDone, "n2": v1alpha1.NodePending, "n3": v1alpha1.NodeFailed, "n4": v1alpha1.NodePending},
			actions: []string{"release n1", "event Normal NodeUpdated: node n1 is on 1.2.0 and was uncordoned", "release n2"},
			conds:   map[string][]string{"Stopped": {"True RolledBack", "node x: rolled back"}, "Progressing": {"False Stopped", "no node is started"}}},
	}, {
		name: "stopped, and a node followed to its end fails too: both are named",
		in: Input{Update: mkUpdate(stopped(entry("n1", v1alpha1.NodeUpdating, -10*time.Minute))),
			Nodes: []corev1.Node{mkNode("n1", vA, ours, updateTo(vB), agentState(agentRolledBack, "trial failed"))}},
		want: want{phase: v1alpha1.PhaseStopped, states: map[string]v1alpha1.NodeState{"n1": v1alpha1.NodeFailed},
			actions: []string{"release n1", "event Warning RolledBack: node n1: rolled-back updating to 1.2.0: trial failed"},
			conds:   map[string][]string{"Stopped": {"node x: rolled back; then node n1: rolled-back"}}},
	}, {
		name: "a rollback with a second node in flight stops; the one only draining is given back at once",
		in: Input{Update: mkUpdate(maxUnavailable(2), progressing(entry("n1", v1alpha1.NodeDraining, -time.Minute), entry("n2", v1alpha1.NodeUpdating, -10*time.Minute))),
			Nodes: []corev1.Node{mkNode("n1", vA, ours), mkNode("n2", vA, ours, updateTo(vB), agentState(agentRolledBack, "trial failed"))},
			Pods:  map[string][]corev1.Pod{"n1": {mkPod("web", "a", "n1")}}},
		want: want{phase: v1alpha1.PhaseStopped, states: map[string]v1alpha1.NodeState{"n1": v1alpha1.NodePending, "n2": v1alpha1.NodeFailed},
			actions: []string{"release n2", "event Warning RolledBack: node n2: rolled-back updating to 1.2.0: trial failed", "release n1"}},
	}, {
		name: "a Stopped Update with nothing in flight does nothing",
		in:   Input{Update: mkUpdate(stopped(entry("n1", v1alpha1.NodeFailed, -time.Hour), pending("n2"))), Nodes: []corev1.Node{mkNode("n1", vA), mkNode("n2", vA), mkNode("n3", vA)}},
		want: want{phase: v1alpha1.PhaseStopped, states: map[string]v1alpha1.NodeState{"n1": v1alpha1.NodeFailed, "n2": v1alpha1.NodePending}},
	}, {
		name: "a Completed Update does nothing, even for a node that joins",
		in: Input{Update: mkUpdate(func(u *v1alpha1.Update) {
			u.Status.Phase, u.Status.Nodes = v1alpha1.PhaseCompleted, []v1alpha1.NodeStatus{entry("n1", v1alpha1.NodeDone, -time.Hour)}
		}), Nodes: []corev1.Node{mkNode("n1", vB), mkNode("n2", vA)}},
		want: want{phase: v1alpha1.PhaseCompleted, states: map[string]v1alpha1.NodeState{"n1": v1alpha1.NodeDone}},
	}, {
		name: "a node done or failed but still held (the controller stopped before the patch) is given back",
		in: Input{Update: mkUpdate(stopped(entry("n1", v1alpha1.NodeDone, -time.Hour), entry("n2", v1alpha1.NodeFailed, -time.Hour), entry("n3", v1alpha1.NodeFailed, -time.Hour))),
			Nodes: []corev1.Node{mkNode("n1", vB, ours, updateTo(vB)), mkNode("n2", vA, ours, updateTo(vB)), mkNode("n3", vA, cordonedBy("other"))}},
		want: want{phase: v1alpha1.PhaseStopped, actions: []string{"release n1", "release n2"}},
	}, {
		name: "an invalid spec starts nothing and says why",
		in: Input{Update: mkUpdate(func(u *v1alpha1.Update) { u.Spec.Version, u.Spec.Soak = "1.2/0", "soon" }),
			Nodes: []corev1.Node{mkNode("n1", vA)}},
		want: want{phase: v1alpha1.PhasePending,
			conds: map[string][]string{"Progressing": {"False InvalidSpec", "spec.version", "spec.soak"}}},
	}, {
		name: "another Update holds the cluster: this one waits",
		in:   Input{Update: mkUpdate(), Nodes: []corev1.Node{mkNode("n1", vA)}, Holder: "older"},
		want: want{phase: v1alpha1.PhasePending, conds: map[string][]string{"Progressing": {"False Waiting", "Update older is rolling out"}}},
	}, {
		name: "a node deleted while in flight is dropped with an Event",
		in:   Input{Update: mkUpdate(progressing(entry("n1", v1alpha1.NodeUpdating, -time.Minute), pending("n2"))), Nodes: []corev1.Node{mkNode("n2", vA)}},
		want: want{states: map[string]v1alpha1.NodeState{"n2": v1alpha1.NodeCordoned},
			actions: []string{"event Warning NodeGone: node n1 was deleted while updating; the rollout goes on without it", "cordon n2",
				"event Normal Cordoned: cordoned node n2 to update it from 1.1.0 to 1.2.0"}},
	}, {
		name: "no berth node matches",
		in:   Input{Update: mkUpdate(progressing()), Nodes: []corev1.Node{mkNode("n1", vA, noVersion)}},
		want: want{phase: v1alpha1.PhaseProgressing, conds: map[string][]string{"Progressing": {"True NoNodes"}}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Now = t0
			before := tc.in.Update.DeepCopy()
			p := Decide(tc.in)
			if !equalUpdate(before, &tc.in.Update) {
				t.Error("Decide changed its input")
			}
			var got []string
			for _, a := range p.Actions {
				got = append(got, a.String())
			}
			if !slices.Equal(got, tc.want.actions) {
				t.Errorf("actions:\n got %q\nwant %q", got, tc.want.actions)
			}
			if tc.want.phase != "" && p.Status.Phase != tc.want.phase {
				t.Errorf("phase %s, want %s", p.Status.Phase, tc.want.phase)
			}
			states := map[string]v1alpha1.NodeState{}
			for _, e := range p.Status.Nodes {
				states[e.Name] = e.State
			}
			for n, s := range tc.want.states {
				if states[n] != s {
					t.Errorf("node %s is %q, want %q (all: %v)", n, states[n], s, states)
				}
			}
			for typ, subs := range tc.want.conds {
				c := meta.FindStatusCondition(p.Status.Conditions, typ)
				if c == nil {
					t.Errorf("no %s condition", typ)
					continue
				}
				s := fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
				for _, sub := range subs {
					if !strings.Contains(s, sub) {
						t.Errorf("%s condition %q lacks %q", typ, s, sub)
					}
				}
			}
			if tc.want.check != nil {
				tc.want.check(t, p)
			}
			// Whatever the case, a node the plan leaves cordoned by this
			// Update is named by a condition.
			held := heldAfter(tc.in.Nodes, p.Actions, tc.in.Update.Name)
			for _, n := range held {
				if !named(p.Status, n) {
					t.Errorf("node %s is left cordoned but no condition names it: %+v", n, p.Status.Conditions)
				}
			}
		})
	}
}

func equalUpdate(a, b *v1alpha1.Update) bool { return equality.Semantic.DeepEqual(a, b) }

// heldAfter are the nodes cordoned by update u once the actions are done.
func heldAfter(nodes []corev1.Node, actions []Action, u string) []string {
	held := map[string]bool{}
	for _, n := range nodes {
		held[n.Name] = n.Spec.Unschedulable && n.Annotations[AnnotationRollout] == u
	}
	for _, a := range actions {
		switch a.Kind {
		case Cordon:
			held[a.Node] = true
		case Release:
			held[a.Node] = false
		}
	}
	var out []string
	for n, h := range held {
		if h {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

func named(s v1alpha1.UpdateStatus, node string) bool {
	for _, c := range s.Conditions {
		if c.Status == metav1.ConditionTrue || c.Type == v1alpha1.ConditionProgressing {
			if strings.Contains(c.Message, node) {
				return true
			}
		}
	}
	return false
}

func TestActive(t *testing.T) {
	mk := func(name string, age time.Duration, phase v1alpha1.Phase, nodes ...v1alpha1.NodeStatus) v1alpha1.Update {
		u := mkUpdate()
		u.Name, u.CreationTimestamp = name, metav1.NewTime(t0.Add(-age))
		u.Status.Phase, u.Status.Nodes = phase, nodes
		return u
	}
	for _, tc := range []struct {
		name string
		us   []v1alpha1.Update
		want string
	}{
		{"none", nil, ""},
		{"the oldest waiting", []v1alpha1.Update{mk("b", time.Hour, ""), mk("a", time.Minute, ""), mk("c", time.Hour, v1alpha1.PhasePending)}, "b"},
		{"a moving one before an older waiting one", []v1alpha1.Update{mk("old", 2*time.Hour, ""), mk("new", time.Hour, v1alpha1.PhaseProgressing)}, "new"},
		{"finished ones never", []v1alpha1.Update{mk("done", 3*time.Hour, v1alpha1.PhaseCompleted),
			mk("stopped", 2*time.Hour, v1alpha1.PhaseStopped, entry("n1", v1alpha1.NodeFailed, 0)), mk("next", time.Hour, "")}, "next"},
		{"a stopped one still following a node", []v1alpha1.Update{mk("stopped", 2*time.Hour, v1alpha1.PhaseStopped, entry("n1", v1alpha1.NodeUpdating, 0)),
			mk("next", time.Hour, "")}, "stopped"},
	} {
		if got := Active(tc.us); got != tc.want {
			t.Errorf("%s: Active = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestOrphans(t *testing.T) {
	nodes := []corev1.Node{mkNode("n3", vA, cordonedBy("gone")), mkNode("n1", vA, cordonedBy("to-b")), mkNode("n2", vA, cordonedBy("")), mkNode("n0", vA, cordonedBy("gone"))}
	if got := Orphans(nodes, []v1alpha1.Update{mkUpdate()}); !slices.Equal(got, []string{"n0", "n3"}) {
		t.Errorf("Orphans = %v", got)
	}
	if got := Orphans(nodes[1:3], nil); !slices.Equal(got, []string{"n1"}) {
		t.Errorf("Orphans with no Update = %v", got)
	}
}

func TestNeedPods(t *testing.T) {
	s := v1alpha1.UpdateStatus{Nodes: []v1alpha1.NodeStatus{pending("a"), entry("b", v1alpha1.NodeCordoned, 0), entry("c", v1alpha1.NodeDraining, 0), entry("d", v1alpha1.NodeUpdating, 0)}}
	if got := NeedPods(s); !slices.Equal(got, []string{"b", "c"}) {
		t.Errorf("NeedPods = %v", got)
	}
}
