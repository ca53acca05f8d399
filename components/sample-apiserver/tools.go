//go:build tools

// Package sampleapiserver pins the aggregated API server the e2e suite's
// aggregator spec ("Should be able to support the 1.17 Sample API Server
// using the current Aggregator") runs from
// registry.k8s.io/e2e-test-images/sample-apiserver:1.29.2: upstream's
// image (k8s.io/kubernetes test/images/sample-apiserver) is
// k8s.io/sample-apiserver at the tag its image tag names, v0.29.2, built
// with CGO_ENABLED=0 and `go install .`. A separate module: its k8s.io
// libraries are v0.29.2's, not the v0.35.4 of components/kube and the
// repository root.
package sampleapiserver

import (
	_ "k8s.io/sample-apiserver"
)
