//go:build tools

// Package e2e pins Kubernetes' end-to-end test suite and the ginkgo CLI
// that runs it, at the same k8s.io/kubernetes version as kubelet
// (components/kube), so the conformance specs test the kubelet berth ships.
// components.mk builds e2e.test with `go test -c k8s.io/kubernetes/test/e2e`:
// its suites are imported by e2e_test.go, a test file, whose imports go mod
// tidy does not follow in a dependency, so they are listed here. agnhost,
// nonewprivs' nnp and regression-issue-74839 are the e2e images' programs
// (components.mk rebuilds them when this list changes). A separate module from
// components/kube: adding the suite's requirements there would change
// go.mod and rebuild the cached kubelet and control plane. k8s.io/kubernetes
// replaces its staging modules with local paths, so every staging module is
// pinned here, as there, to the matching v0.X.Y; the versions of the
// modules both share are the same (MVS over the same k8s.io/kubernetes
// go.mod), so the Go build cache kubelet's build filled serves this one.
package e2e

import (
	_ "github.com/onsi/ginkgo/v2/ginkgo"
	_ "k8s.io/kubernetes/test/conformance/testdata"
	_ "k8s.io/kubernetes/test/e2e"
	_ "k8s.io/kubernetes/test/e2e/apimachinery"
	_ "k8s.io/kubernetes/test/e2e/apps"
	_ "k8s.io/kubernetes/test/e2e/architecture"
	_ "k8s.io/kubernetes/test/e2e/auth"
	_ "k8s.io/kubernetes/test/e2e/autoscaling"
	_ "k8s.io/kubernetes/test/e2e/cloud"
	_ "k8s.io/kubernetes/test/e2e/common"
	_ "k8s.io/kubernetes/test/e2e/dra"
	_ "k8s.io/kubernetes/test/e2e/feature"
	_ "k8s.io/kubernetes/test/e2e/framework"
	_ "k8s.io/kubernetes/test/e2e/framework/config"
	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	_ "k8s.io/kubernetes/test/e2e/framework/metrics/init"
	_ "k8s.io/kubernetes/test/e2e/framework/node/init"
	_ "k8s.io/kubernetes/test/e2e/framework/testfiles"
	_ "k8s.io/kubernetes/test/e2e/instrumentation"
	_ "k8s.io/kubernetes/test/e2e/invariants"
	_ "k8s.io/kubernetes/test/e2e/kubectl"
	_ "k8s.io/kubernetes/test/e2e/lifecycle"
	_ "k8s.io/kubernetes/test/e2e/lifecycle/bootstrap"
	_ "k8s.io/kubernetes/test/e2e/network"
	_ "k8s.io/kubernetes/test/e2e/node"
	_ "k8s.io/kubernetes/test/e2e/scheduling"
	_ "k8s.io/kubernetes/test/e2e/storage"
	_ "k8s.io/kubernetes/test/e2e/storage/csimock"
	_ "k8s.io/kubernetes/test/e2e/storage/external"
	_ "k8s.io/kubernetes/test/e2e/testing-manifests"
	_ "k8s.io/kubernetes/test/e2e/windows"
	_ "k8s.io/kubernetes/test/fixtures"
	_ "k8s.io/kubernetes/test/images/agnhost"
	_ "k8s.io/kubernetes/test/images/nonewprivs"
	_ "k8s.io/kubernetes/test/images/regression-issue-74839"
	_ "k8s.io/kubernetes/test/utils/format"
)
