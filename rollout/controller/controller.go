// Package controller is the rollout controller's acting part: each round
// it reads the Updates, the Nodes and the pods of the nodes being
// drained, asks package decide what to do, writes the Update's status
// and then does it: cordons and releases through patches of the Node,
// evicts through the eviction API (so PodDisruptionBudgets hold), asks a
// node to update through its berth.dev/update-to annotation, and records
// Events. Leader election (leader.go) makes sure one replica acts at a
// time.
//
// The Update CRD is reached through the dynamic client, its objects
// converted to package v1alpha1's types: there is no generated typed
// client (the project runs no code generators), a hand-written REST client
// would need a serializer set up by hand, and the dynamic client is
// client-go's own, with a fake (k8s.io/client-go/dynamic/fake) for tests.
//
// The cluster is polled, not watched: a round lists what it needs, fresh,
// every Options.Poll. A rollout moves at the pace of reboots and soaks,
// minutes, so a few seconds of latency cost nothing, and a poll has no
// cache to go stale or resync.
package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/berth-node/berth/rollout/api/v1alpha1"
	"github.com/berth-node/berth/rollout/decide"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// DefaultPoll is how often a round runs.
const DefaultPoll = 10 * time.Second

// Component is the Events' source.
const Component = "berth-rollout"

// EventNamespace is where the Events about Updates go: an Update is
// cluster-scoped, and Kubernetes keeps such objects' Events in default.
const EventNamespace = metav1.NamespaceDefault

// Options are what a Controller needs.
type Options struct {
	Log     *slog.Logger
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Poll is how often a round runs (DefaultPoll).
	Poll time.Duration
	// Instance names this replica in its Events (the leader election
	// identity).
	Instance string
	Now      func() time.Time
}

// Controller runs rounds. It keeps, between rounds, only the answers to
// the last evictions: a restarted one evicts again and gets fresh ones.
type Controller struct {
	o         Options
	log       *slog.Logger
	evictions map[types.NamespacedName]decide.Eviction
	// events numbers the Events this replica created, for their names.
	events int
}

// New returns a Controller.
func New(o Options) *Controller {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Controller{o: o, log: o.Log, evictions: map[types.NamespacedName]decide.Eviction{}}
}

// Run runs a round every Poll until ctx ends. A round's error is logged
// and the next round tries again: every round starts from what the API
// says.
func (c *Controller) Run(ctx context.Context) {
	t := time.NewTicker(c.o.Poll)
	defer t.Stop()
	for ctx.Err() == nil {
		if err := c.Round(ctx); err != nil && ctx.Err() == nil {
			c.log.Error("rollout round", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
}

// Round looks at every Update once and acts on it.
func (c *Controller) Round(ctx context.Context) error {
	list, err := c.o.Dynamic.Resource(v1alpha1.GroupVersionResource()).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing Updates: %w", err)
	}
	var updates []v1alpha1.Update
	for i := range list.Items {
		var u v1alpha1.Update
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, &u); err != nil {
			// One malformed object must not stop the others.
			c.log.Error("reading an Update", "name", list.Items[i].GetName(), "err", err)
			continue
		}
		updates = append(updates, u)
	}
	nodes, err := c.o.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing Nodes: %w", err)
	}
	var errs []error
	if err := c.releaseOrphans(ctx, nodes.Items, updates); err != nil {
		errs = append(errs, err)
	}
	active := decide.Active(updates)
	for i := range updates {
		u := &updates[i]
		if u.Status.Phase == v1alpha1.PhaseCompleted || u.DeletionTimestamp != nil {
			continue
		}
		holder := active
		if holder == u.Name {
			holder = ""
		}
		if err := c.update(ctx, u, nodes.Items, holder); err != nil {
			errs = append(errs, fmt.Errorf("Update %s: %w", u.Name, err))
		}
	}
	return errors.Join(errs...)
}

// releaseOrphans gives back the nodes held by an Update that was
// deleted: no status is left to say why they are cordoned.
func (c *Controller) releaseOrphans(ctx context.Context, nodes []corev1.Node, updates []v1alpha1.Update) error {
	rv := map[string]string{}
	for _, n := range nodes {
		rv[n.Name] = n.ResourceVersion
	}
	var errs []error
	for _, n := range decide.Orphans(nodes, updates) {
		var by string
		for _, nd := range nodes {
			if nd.Name == n {
				by = nd.Annotations[decide.AnnotationRollout]
			}
		}
		if err := c.patchNode(ctx, n, rv, map[string]any{"unschedulable": false},
			map[string]any{decide.AnnotationRollout: nil, decide.AnnotationUpdateTo: nil, decide.AnnotationAllowDowngrade: nil}); err != nil {
			errs = append(errs, err)
			continue
		}
		c.log.Warn("released a node held by an Update that was deleted", "node", n, "update", by)
		if err := c.record(ctx, corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: n}, nil, corev1.EventTypeWarning, "Released",
			fmt.Sprintf("uncordoned node %s and removed its update request: Update %s, which held it, was deleted", n, by)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// update runs one Update's step: decide, write the status, act.
func (c *Controller) update(ctx context.Context, u *v1alpha1.Update, nodes []corev1.Node, holder string) error {
	in := decide.Input{Update: *u, Nodes: nodes, Pods: map[string][]corev1.Pod{}, Evictions: c.evictions, Holder: holder, Now: c.o.Now()}
	for _, n := range decide.NeedPods(u.Status) {
		pods, err := c.pods(ctx, n)
		if err != nil {
			// Left out of Pods, the drain waits for the next round.
			c.log.Warn("listing a draining node's pods", "node", n, "err", err)
			continue
		}
		in.Pods[n] = pods
	}
	plan := decide.Decide(in)
	if !equality.Semantic.DeepEqual(plan.Status, u.Status) {
		if err := c.writeStatus(ctx, u, plan.Status); err != nil {
			// Nothing is done that the status does not say: the next
			// round decides again from what the API holds.
			return err
		}
	}
	rv := map[string]string{}
	for _, n := range nodes {
		rv[n.Name] = n.ResourceVersion
	}
	var errs []error
	evicted := map[types.NamespacedName]decide.Eviction{}
	for _, a := range plan.Actions {
		if err := c.act(ctx, u, a, rv, evicted); err != nil {
			errs = append(errs, err)
		}
	}
	// Only this round's answers count: a pod the next round does not
	// evict has no answer to report.
	maps.DeleteFunc(c.evictions, func(k types.NamespacedName, _ decide.Eviction) bool { return true })
	maps.Copy(c.evictions, evicted)
	return errors.Join(errs...)
}

// pods lists the pods bound to node.
func (c *Controller) pods(ctx context.Context, node string) ([]corev1.Pod, error) {
	l, err := c.o.Kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		return nil, fmt.Errorf("listing the pods on %s: %w", node, err)
	}
	// The selector is the server's filter; a test's fake ignores it.
	out := make([]corev1.Pod, 0, len(l.Items))
	for _, p := range l.Items {
		if p.Spec.NodeName == node {
			out = append(out, p)
		}
	}
	return out, nil
}

// writeStatus writes s as u's status, through the status subresource,
// on the resourceVersion read: a conflict means another writer (a leader
// that does not know it lost) got there first, and this round acts on
// nothing.
func (c *Controller) writeStatus(ctx context.Context, u *v1alpha1.Update, s v1alpha1.UpdateStatus) error {
	next := u.DeepCopy()
	next.Status = s
	next.APIVersion, next.Kind = v1alpha1.APIVersion, v1alpha1.Kind
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(next)
	if err != nil {
		return fmt.Errorf("writing the status: %w", err)
	}
	if _, err := c.o.Dynamic.Resource(v1alpha1.GroupVersionResource()).UpdateStatus(ctx, &unstructured.Unstructured{Object: obj}, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("writing the status: %w", err)
	}
	c.log.Info("rollout status", "update", u.Name, "phase", s.Phase, "done", s.Done, "total", s.Total, "current", s.Current)
	return nil
}

// act does one action. rv holds each Node's resourceVersion as decided
// on, and is moved on by each patch.
func (c *Controller) act(ctx context.Context, u *v1alpha1.Update, a decide.Action, rv map[string]string, evicted map[types.NamespacedName]decide.Eviction) error {
	switch a.Kind {
	case decide.Cordon:
		return c.patchNode(ctx, a.Node, rv, map[string]any{"unschedulable": true}, map[string]any{decide.AnnotationRollout: u.Name})
	case decide.Release:
		return c.patchNode(ctx, a.Node, rv, map[string]any{"unschedulable": false},
			map[string]any{decide.AnnotationRollout: nil, decide.AnnotationUpdateTo: nil, decide.AnnotationAllowDowngrade: nil})
	case decide.RequestUpdate:
		var down any // null removes it
		if a.AllowDowngrade {
			down = "true"
		}
		return c.patchNode(ctx, a.Node, rv, nil, map[string]any{decide.AnnotationUpdateTo: a.Version, decide.AnnotationAllowDowngrade: down})
	case decide.Evict:
		evicted[a.Pod] = c.evict(ctx, a.Pod)
		return nil
	case decide.Event:
		return c.event(ctx, u, a)
	}
	return fmt.Errorf("unknown action %q", a.Kind)
}

// patchNode merge-patches a Node's spec and annotations, on the
// resourceVersion the decision was made on: a Node changed since (a
// conflict) is looked at again next round, not patched blind.
func (c *Controller) patchNode(ctx context.Context, node string, rv map[string]string, spec, annotations map[string]any) error {
	md := map[string]any{"annotations": annotations}
	if v := rv[node]; v != "" {
		md["resourceVersion"] = v
	}
	p := map[string]any{"metadata": md}
	if spec != nil {
		p["spec"] = spec
	}
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("patching node %s: %w", node, err)
	}
	n, err := c.o.Kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, b, metav1.PatchOptions{FieldManager: Component})
	if err != nil {
		return fmt.Errorf("patching node %s with %s: %w", node, b, err)
	}
	rv[node] = n.ResourceVersion
	c.log.Info("patched node", "node", node, "patch", string(b))
	return nil
}

// evict asks the eviction API to evict a pod. A 429 is a
// PodDisruptionBudget saying not now, a 404 a pod already gone: answers,
// not errors. Any other error is an answer too, logged, and tried again
// next round until the drain's deadline.
func (c *Controller) evict(ctx context.Context, pod types.NamespacedName) decide.Eviction {
	err := c.o.Kube.PolicyV1().Evictions(pod.Namespace).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}})
	switch {
	case err == nil:
		c.log.Info("evicted", "pod", pod)
		return decide.Eviction{Outcome: decide.Evicted}
	case apierrors.IsTooManyRequests(err):
		c.log.Info("eviction blocked", "pod", pod, "reason", err)
		return decide.Eviction{Outcome: decide.Blocked, Message: err.Error()}
	case apierrors.IsNotFound(err):
		return decide.Eviction{Outcome: decide.Gone}
	}
	c.log.Warn("evicting", "pod", pod, "err", err)
	return decide.Eviction{Outcome: decide.Failed, Message: err.Error()}
}

// event records an Event about u.
func (c *Controller) event(ctx context.Context, u *v1alpha1.Update, a decide.Action) error {
	typ := corev1.EventTypeNormal
	if a.Warning {
		typ = corev1.EventTypeWarning
	}
	var related *corev1.ObjectReference
	if a.Node != "" {
		// The node it is about.
		related = &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: a.Node}
	}
	return c.record(ctx, corev1.ObjectReference{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind, Name: u.Name, UID: u.UID,
		ResourceVersion: u.ResourceVersion}, related, typ, a.Reason, a.Message)
}

// record creates an Event about a cluster-scoped object.
func (c *Controller) record(ctx context.Context, about corev1.ObjectReference, related *corev1.ObjectReference, typ, reason, msg string) error {
	now := metav1.NewTime(c.o.Now())
	c.events++
	e := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: EventNamespace, Name: fmt.Sprintf("%s.%x.%d", about.Name, now.UnixNano(), c.events)},
		InvolvedObject: about, Related: related,
		Reason: reason, Message: msg, Type: typ, Count: 1, FirstTimestamp: now, LastTimestamp: now,
		Source:              corev1.EventSource{Component: Component},
		ReportingController: Component, ReportingInstance: c.o.Instance,
	}
	if _, err := c.o.Kube.CoreV1().Events(EventNamespace).Create(ctx, e, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("recording event %s (%s): %w", reason, msg, err)
	}
	return nil
}
