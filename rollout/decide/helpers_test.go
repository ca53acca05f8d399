package decide

import (
	"time"

	"github.com/berth-node/berth/rollout/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// t0 is a Monday, 12:00 UTC.
var t0 = time.Date(2030, 1, 7, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) *metav1.Time { t := metav1.NewTime(t0.Add(d)); return &t }

const (
	vA = "1.1.0"
	vB = "1.2.0"
)

type nodeOpt func(*corev1.Node)

func mkNode(name, version string, opts ...nodeOpt) corev1.Node {
	n := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": "a"},
			Annotations: map[string]string{AnnotationVersion: version, AnnotationSlot: "a", AnnotationState: agentIdle}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	for _, o := range opts {
		o(&n)
	}
	return n
}

func notReady(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }

// cordonedBy cordons the node as the named Update does ("" as someone
// else does).
func cordonedBy(u string) nodeOpt {
	return func(n *corev1.Node) {
		n.Spec.Unschedulable = true
		if u != "" {
			n.Annotations[AnnotationRollout] = u
		}
	}
}

func agentState(s, reason string) nodeOpt {
	return func(n *corev1.Node) {
		n.Annotations[AnnotationState] = s
		if reason != "" {
			n.Annotations[AnnotationReason] = reason
		}
	}
}

func updateTo(v string) nodeOpt {
	return func(n *corev1.Node) { n.Annotations[AnnotationUpdateTo] = v }
}

func label(k, v string) nodeOpt { return func(n *corev1.Node) { n.Labels[k] = v } }

func noVersion(n *corev1.Node) { delete(n.Annotations, AnnotationVersion) }

type podOpt func(*corev1.Pod)

func mkPod(ns, name, node string, opts ...podOpt) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, o := range opts {
		o(&p)
	}
	return p
}

func ownedBy(kind string) podOpt {
	return func(p *corev1.Pod) {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{Kind: kind, Name: "owner", Controller: &yes, APIVersion: "apps/v1"}}
	}
}

func mirror(p *corev1.Pod) {
	p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
}

func succeeded(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }

func deleting(p *corev1.Pod) { p.DeletionTimestamp = at(0) }

type updOpt func(*v1alpha1.Update)

func mkUpdate(opts ...updOpt) v1alpha1.Update {
	u := v1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Name: "to-b", Generation: 1},
		Spec: v1alpha1.UpdateSpec{Version: vB, Soak: "2m", DrainTimeout: "10m", NodeTimeout: "20m"}}
	for _, o := range opts {
		o(&u)
	}
	return u
}

func progressing(nodes ...v1alpha1.NodeStatus) updOpt {
	return func(u *v1alpha1.Update) {
		u.Status.Phase = v1alpha1.PhaseProgressing
		u.Status.StartedAt = at(-time.Hour)
		u.Status.Nodes = nodes
	}
}

func stopped(nodes ...v1alpha1.NodeStatus) updOpt {
	return func(u *v1alpha1.Update) {
		u.Status.Phase = v1alpha1.PhaseStopped
		u.Status.StartedAt = at(-time.Hour)
		u.Status.Nodes = nodes
		u.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionStopped, Status: metav1.ConditionTrue, Reason: ReasonRolledBack,
			Message: "node x: rolled back", LastTransitionTime: *at(-time.Minute)}}
	}
}

func maxUnavailable(n int32) updOpt { return func(u *v1alpha1.Update) { u.Spec.MaxUnavailable = n } }

func window(days []string, start, end string) updOpt {
	return func(u *v1alpha1.Update) {
		u.Spec.MaintenanceWindow = &v1alpha1.MaintenanceWindow{Days: days, Start: start, End: end}
	}
}

func pending(name string) v1alpha1.NodeStatus {
	return v1alpha1.NodeStatus{Name: name, State: v1alpha1.NodePending}
}

func entry(name string, s v1alpha1.NodeState, started time.Duration) v1alpha1.NodeStatus {
	e := v1alpha1.NodeStatus{Name: name, State: s, From: vA, Started: at(started)}
	switch s {
	case v1alpha1.NodeUpdating, v1alpha1.NodeSoaking:
		e.Requested, e.StateBefore = at(started+time.Minute), agentIdle
	}
	if s == v1alpha1.NodeSoaking {
		e.SoakSince = at(started + 5*time.Minute)
	}
	if s == v1alpha1.NodeDone || s == v1alpha1.NodeFailed {
		e.Finished = at(started + 10*time.Minute)
	}
	return e
}
