//go:build tools

// Package kube pins the Kubernetes components berth's tests and demo build
// from source: kubelet goes into the node image; kube-apiserver,
// kube-controller-manager and kube-scheduler form the local control plane;
// kube-proxy goes into the cluster's kube-proxy image (components.mk builds
// it into its own directory so adding it rebuilt nothing else).
// k8s.io/kubernetes replaces its staging modules with local paths, so every
// staging module is pinned here to the matching v0.X.Y.
package kube

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
