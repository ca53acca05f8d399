package main

import (
	"slices"
	"strings"
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
// appended) is rerun; the passed one, the one the suite skipped with a
// reason, the one berth's list skips, and the Deployment spec outside the
// run's focus (in the report as "skipped", as a spec not reached is) are
// not, nor a listed spec whose name merely starts with a rerun one's.
func TestRerunNames(t *testing.T) {
	j, list := sampleReport(t)
	got, err := rerunNames(j, "sample", false, list, parseListTests(listTestsSample))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"[sig-node] Container Runtime blackbox test when starting a container that exits should run with the expected status [NodeConformance]",
	}
	if !slices.Equal(got, want) {
		t.Errorf("rerun %q\nwant %q", got, want)
	}
}

// A spec never reached is rerun; one the run's --skip left out, or
// outside its focus, is not; a report that does not say its filters is
// refused rather than read as asking for every spec.
func TestRerunReadsTheRunsFilters(t *testing.T) {
	const x = `<testsuites><testsuite name="s"><properties>
<property name="FocusStrings" value="\[Conformance\]"></property>
<property name="SkipStrings" value="\[Serial\]"></property></properties>
<testcase name="[It] [sig-apps] Deployment should run the lifecycle of a Deployment [Conformance] [sig-apps, Conformance]" status="skipped"><skipped message="skipped"></skipped></testcase>
<testcase name="[It] [sig-node] Pods should get a host IP [NodeConformance] [Conformance] [Serial] [sig-node, Conformance]" status="skipped"><skipped message="skipped"></skipped></testcase>
<testcase name="[It] [sig-node] Container Runtime blackbox test when starting a container that exits should run with the expected status [NodeConformance] [sig-node]" status="skipped"><skipped message="skipped"></skipped></testcase>
</testsuite></testsuites>`
	j, err := parseJUnit(strings.NewReader(x), "x")
	if err != nil {
		t.Fatal(err)
	}
	got, err := rerunNames(j, "x", false, nil, parseListTests(listTestsSample))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"[sig-apps] Deployment should run the lifecycle of a Deployment [Conformance]"}; !slices.Equal(got, want) {
		t.Errorf("rerun %q\nwant %q", got, want)
	}
	bare, err := parseJUnit(strings.NewReader(`<testsuites><testsuite name="s"><testcase name="[It] a" status="failed"></testcase></testsuite></testsuites>`), "bare.xml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rerunNames(bare, "bare.xml", false, nil, nil); err == nil || !strings.Contains(err.Error(), "bare.xml: no FocusStrings") {
		t.Errorf("a report without ginkgo's filters: %v", err)
	}
}
