// Package nodeapi names what berth's in-place update says and reads on a
// Node object: the annotations and the update states. The node's update
// agent (update/agent) writes and reads them with kubelet's credentials,
// and the cluster's rollout controller (rollout/) reads the agent's and
// sets the request; one list keeps the two from drifting apart. It holds
// constants only, so that the controller, which runs off the node, links
// nothing of the node's.
package nodeapi

// Annotations on a Node. UpdateTo and AllowDowngrade are the request (an
// operator or a rollout controller sets them, the agent reads them); the
// others are the agent's report (NodeRestriction lets a node patch its
// own Node's annotations).
const (
	AnnotationUpdateTo       = "berth.dev/update-to"
	AnnotationAllowDowngrade = "berth.dev/update-allow-downgrade"
	AnnotationVersion        = "berth.dev/version"
	AnnotationSlot           = "berth.dev/slot"
	AnnotationState          = "berth.dev/update-state"
	AnnotationReason         = "berth.dev/update-reason"
)

// Update states (AnnotationState).
const (
	StateIdle        = "idle"
	StateDownloading = "downloading"
	StateRebooting   = "rebooting"
	StateTrial       = "trial"
	StateBlessed     = "blessed"
	StateRolledBack  = "rolled-back"
	StateRefused     = "refused"
	StateFailed      = "failed"
)
