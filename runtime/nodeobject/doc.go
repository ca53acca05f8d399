// Package nodeobject reads and annotates the node's own Kubernetes Node
// object with kubelet's own credentials. berth's in-place update needs it:
// the update is triggered by an annotation on the Node, berth reports the
// update's state as annotations, and a trial boot is blessed once the
// Node's Ready condition has held for a while.
//
// It is a small client over net/http rather than client-go, which would
// add megabytes to PID 1 for two requests. It reads the kubeconfig kubelet
// uses (the one kubelet's TLS bootstrap writes, whose client certificate
// kubelet rotates, or the EKS one with an exec credential plugin) the way
// client-go does: current-context, its cluster and user, file paths
// relative to the kubeconfig's directory.
//
// It does only what the NodeRestriction admission plugin and the Node
// authorizer let a node do with its own Node object: GET it, and PATCH its
// metadata. Annotations are allowed; labels outside kubelet's allowed set
// are refused by NodeRestriction, so the package offers annotations only.
package nodeobject
