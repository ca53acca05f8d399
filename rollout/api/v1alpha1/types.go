// Package v1alpha1 is the Update API (group updates.berth.dev, version
// v1alpha1): the cluster-scoped object that asks for berth nodes to be
// rolled to a release, and the status the rollout controller keeps on it.
// The types are hand-written, and so are their deep copies (deepcopy.go):
// the project runs no code generators.
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The API's names.
const (
	Group   = "updates.berth.dev"
	Version = "v1alpha1"
	// APIVersion is written out whole (not Group+"/"+Version) so that
	// the docs test, which collects the berth.dev/ names of string
	// literals, finds the one docs/rollout.md shows.
	APIVersion = "updates.berth.dev/v1alpha1"
	Kind       = "Update"
	ListKind   = "UpdateList"
	Resource   = "updates"
)

// GroupVersion is the API's group and version.
func GroupVersion() schema.GroupVersion { return schema.GroupVersion{Group: Group, Version: Version} }

// GroupVersionResource names the updates resource, for a dynamic client.
func GroupVersionResource() schema.GroupVersionResource {
	return GroupVersion().WithResource(Resource)
}

// AddToScheme registers Update and UpdateList with s. A function, not a
// SchemeBuilder variable, so the package keeps no state.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion(), &Update{}, &UpdateList{})
	metav1.AddToGroupVersion(s, GroupVersion())
	return nil
}

// Defaults filled in where the spec leaves a field out. The CRD's schema
// carries the same defaults, so that `kubectl get -o yaml` shows them;
// the code applies them too, for an object the apiserver did not default
// (a test's, or one written before a default changed).
const (
	DefaultMaxUnavailable = 1
	DefaultSoak           = "2m"
	DefaultDrainTimeout   = "10m"
	DefaultNodeTimeout    = "20m"
)

// Update asks for the berth nodes its selector covers to be updated to a
// release, a few at a time.
type Update struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   UpdateSpec   `json:"spec"`
	Status UpdateStatus `json:"status,omitempty"`
}

// UpdateSpec is what the rollout is to do.
type UpdateSpec struct {
	// Version is the release the nodes go to (berth.dev/update-to's
	// value on each). It cannot change: a new target is a new Update.
	Version string `json:"version"`
	// Repository is informational: each node fetches from the repository
	// its image or user data names (berth.dev/update-repository), which
	// the controller can neither see nor change. Writing it here records
	// where the release is expected to come from, for whoever reads the
	// object.
	Repository string `json:"repository,omitempty"`
	// NodeSelector picks the nodes the rollout covers among those that
	// report a berth.dev/version (nodes that report none are not berth
	// nodes, or their agent has not started, and are left out). Empty or
	// absent selects every berth node.
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`
	// MaxUnavailable is how many covered nodes may be unavailable at
	// once: those the rollout has cordoned and not yet given back, and
	// any that are NotReady or cordoned by someone else. Default 1.
	MaxUnavailable int32 `json:"maxUnavailable,omitempty"`
	// MaintenanceWindow, when set, is when a node may be started; a node
	// already started finishes outside it.
	MaintenanceWindow *MaintenanceWindow `json:"maintenanceWindow,omitempty"`
	// Soak is how long a node must stay on the new version, Ready and
	// blessed, before it is uncordoned and the next may start. A Go
	// duration ("2m"); default 2m.
	Soak string `json:"soak,omitempty"`
	// DrainTimeout is how long evicting a node's pods may take before
	// the rollout stops and names the pod that blocks it. Default 10m.
	DrainTimeout string `json:"drainTimeout,omitempty"`
	// NodeTimeout is how long a node may take, from being told to
	// update, to come back on Version, Ready and blessed. Default 20m.
	NodeTimeout string `json:"nodeTimeout,omitempty"`
	// AllowDowngrade lets Version be older than a node's running one
	// (berth.dev/update-allow-downgrade on each node).
	AllowDowngrade bool `json:"allowDowngrade,omitempty"`
}

// MaintenanceWindow is a daily time range, in UTC, on some days of the
// week.
type MaintenanceWindow struct {
	// Days are the days the window opens on ("Mon" ... "Sun"); empty is
	// every day. A window that crosses midnight belongs to the day it
	// opens on.
	Days []string `json:"days,omitempty"`
	// Start and End are "HH:MM", UTC. End before Start crosses
	// midnight; End equal to Start is refused.
	Start string `json:"start"`
	End   string `json:"end"`
}

// Phase is where a rollout stands.
type Phase string

// Phases.
const (
	// PhasePending: not started (another Update is rolling out, or the
	// spec is invalid; the Progressing condition says which).
	PhasePending Phase = "Pending"
	// PhaseProgressing: nodes are being updated or wait their turn.
	PhaseProgressing Phase = "Progressing"
	// PhaseCompleted: every covered node is on Version. Final.
	PhaseCompleted Phase = "Completed"
	// PhaseStopped: a node failed; no new node starts, nodes already
	// told to update are followed to their end and uncordoned. Final:
	// starting again takes a new Update.
	PhaseStopped Phase = "Stopped"
)

// Condition types.
const (
	// ConditionProgressing is True while the rollout moves or waits its
	// turn; its message names the nodes out and what each is waiting on.
	ConditionProgressing = "Progressing"
	// ConditionStopped is True once the rollout stopped; its reason and
	// message name the node and, for a drain, the pod.
	ConditionStopped = "Stopped"
)

// UpdateStatus is where the rollout stands, kept by the controller; a
// controller that restarts resumes from it.
type UpdateStatus struct {
	// ObservedGeneration is the generation of the spec last acted on.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	Phase              Phase `json:"phase,omitempty"`
	// Conditions: Progressing and Stopped.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Nodes are the covered nodes, by name, and where each stands.
	Nodes []NodeStatus `json:"nodes,omitempty"`
	// Done and Total count Nodes, for `kubectl get updates` (kept when
	// 0, so that the column shows 0, not <none>).
	Done  int32 `json:"done"`
	Total int32 `json:"total"`
	// Current names the nodes out now, comma-separated.
	Current     string       `json:"current,omitempty"`
	StartedAt   *metav1.Time `json:"startedAt,omitempty"`
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
}

// NodeState is where one node stands in the rollout.
type NodeState string

// Node states, in the order a node goes through them.
const (
	NodePending NodeState = "pending"
	// NodeCordoned: the controller decided to cordon it (the status says
	// so before the cordon is made, so a restart finishes it).
	NodeCordoned NodeState = "cordoned"
	NodeDraining NodeState = "draining"
	// NodeUpdating: berth.dev/update-to is (being) set; the node
	// downloads, reboots and runs its trial.
	NodeUpdating NodeState = "updating"
	// NodeSoaking: on Version, Ready and blessed; waiting Soak.
	NodeSoaking NodeState = "soaking"
	NodeDone    NodeState = "done"
	// NodeFailed: the node stopped the rollout. It is never tried again
	// by this Update.
	NodeFailed NodeState = "failed"
)

// NodeStatus is one node's place in the rollout.
type NodeStatus struct {
	Name  string    `json:"name"`
	State NodeState `json:"state"`
	// From is the version the node ran when it was started.
	From string `json:"from,omitempty"`
	// Started is when the node was cordoned (or found already on the
	// version); Requested when it was told to update; SoakSince when it
	// came back healthy on the version; Finished when it was done or
	// failed.
	Started   *metav1.Time `json:"started,omitempty"`
	Requested *metav1.Time `json:"requested,omitempty"`
	SoakSince *metav1.Time `json:"soakSince,omitempty"`
	Finished  *metav1.Time `json:"finished,omitempty"`
	// StateBefore and ReasonBefore are the node's berth.dev/update-state
	// and update-reason when it was told to update: a failure state
	// left from an earlier request is not taken for this one's.
	StateBefore  string `json:"stateBefore,omitempty"`
	ReasonBefore string `json:"reasonBefore,omitempty"`
	// Message says what the node waits on, or why it failed (the pod
	// that blocked its drain, the agent's reason).
	Message string `json:"message,omitempty"`
}

// UpdateList is a list of Updates.
type UpdateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Update `json:"items"`
}
