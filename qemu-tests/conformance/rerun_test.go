package main

import (
	"slices"
	"testing"
)

// e2e.test --list-tests' layout: a heading, then the file and line of
// each spec before its name.
const listTestsSample = `The following spec names can be used with 'ginkgo run --focus/skip':
    k8s.io/kubernetes@v1.35.4/test/e2e/common/node/pods.go:205: [sig-node] Pods should get a host IP [NodeConformance] [Conformance]
    k8s.io/kubernetes@v1.35.4/test/e2e/common/node/runtime.go:52: [sig-node] Container Runtime blackbox test when starting a container that exits should run with the expected status [NodeConformance]
    k8s.io/kubernetes@v1.35.4/test/e2e/common/node/sysctl.go:77: [sig-node] Sysctls [LinuxOnly] [NodeConformance] should support sysctls [MinimumKubeletVersion:1.21] [Environment:NotInUbuntu]
    k8s.io/kubernetes@v1.35.4/test/e2e/common/node/security_context.go:90: [sig-node] Security Context should support seccomp default which is unconfined [LinuxOnly] [NodeConformance]
    k8s.io/kubernetes@v1.35.4/test/e2e/apps/deployment.go:185: [sig-apps] Deployment should run the lifecycle of a Deployment [Conformance]
    k8s.io/kubernetes@v1.35.4/test/e2e/apps/deployment.go:99: [sig-apps] Deployment should run the lifecycle of a Deployment [Conformance] with more
`

func TestParseListTests(t *testing.T) {
	names := parseListTests(listTestsSample)
	if len(names) != 6 || names[0] != "[sig-node] Pods should get a host IP [NodeConformance] [Conformance]" {
		t.Errorf("names %q", names)
	}
}

// The sample report's failed spec (its name with ginkgo's labels
// appended) and its spec never reached are rerun; the passed one, the
// one the suite skipped with a reason and the one berth's list skips are
// not, nor a listed spec whose name merely starts with a rerun one's.
func TestRerunNames(t *testing.T) {
	j, list := sampleReport(t)
	got := rerunNames(j, list, parseListTests(listTestsSample))
	want := []string{
		"[sig-node] Container Runtime blackbox test when starting a container that exits should run with the expected status [NodeConformance]",
		"[sig-apps] Deployment should run the lifecycle of a Deployment [Conformance]",
	}
	if !slices.Equal(got, want) {
		t.Errorf("rerun %q\nwant %q", got, want)
	}
}
