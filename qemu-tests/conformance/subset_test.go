package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// TestRepoSubset: make test's subset loads, covers every area, and its
// pattern compiles.
func TestRepoSubset(t *testing.T) {
	s, err := loadSubset("subset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(s) < len(subsetAreas) {
		t.Errorf("%d specs for %d areas", len(s), len(subsetAreas))
	}
	if _, err := regexp.Compile(namesPattern(s.names())); err != nil {
		t.Errorf("the subset's --focus pattern does not compile: %v", err)
	}
	list, err := loadSkips("skips.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range s {
		if _, ok := list.reason(e.Name); ok {
			t.Errorf("%s is in the subset and in the skip list", e.Name)
		}
	}
}

func TestParseSubsetRefuses(t *testing.T) {
	all := func(extra string) string {
		var b strings.Builder
		for i, a := range subsetAreas {
			fmt.Fprintf(&b, "- {name: \"spec %d\", area: %q}\n", i, a)
		}
		return b.String() + extra
	}
	if _, err := parseSubset([]byte(all("")), "subset.yaml"); err != nil {
		t.Fatalf("a subset covering every area: %v", err)
	}
	for name, c := range map[string]struct{ yaml, want string }{
		"empty":         {"", "the subset is empty"},
		"unknown field": {"- {name: a, area: probes, why: x}\n", "unknown field"},
		"no name":       {all("- {area: probes}\n"), "no name"},
		"unknown area":  {all("- {name: x, area: gpus}\n"), `area "gpus" is none of`},
		"twice":         {all("- {name: \"spec 0\", area: probes}\n"), `both name "spec 0"`},
		"an area short": {"- {name: a, area: probes}\n", "no spec covers pod lifecycle, restart policy"},
	} {
		if _, err := parseSubset([]byte(c.yaml), "subset.yaml"); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "subset.yaml") {
			t.Errorf("%s: %v, want %q naming the file", name, err, c.want)
		}
	}
}

// TestSubsetCheck: every spec of the subset must have passed once; a
// failed, skipped or missing one is named with what happened to it.
func TestSubsetCheck(t *testing.T) {
	s := subset{{Name: "[sig-node] a [NodeConformance]"}, {Name: "[sig-node] b"}, {Name: "[sig-node] c"}, {Name: "[sig-node] d"}, {Name: "[sig-node] e"}}
	sum := summary{
		Passed:  []outcome{{Name: "[sig-node] a [NodeConformance] [sig-node, NodeConformance]"}},
		Failed:  []outcome{{Name: "[sig-node] b"}},
		Skipped: []outcome{{Name: "[sig-node] c [sig-node]"}},
		Listed:  []outcome{{Name: "[sig-node] e"}},
	}
	err := s.check(sum, skipList{{Name: "[sig-node] e", Reason: "r"}})
	if err == nil {
		t.Fatal("no error: want b, c, d and e named")
	}
	for _, want := range []string{"4 of the subset's 5 specs", "[sig-node] b: failed", "[sig-node] c: skipped by the suite", "[sig-node] d: not run", "[sig-node] e: in the skip list too"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v\nwant %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "[sig-node] a [NodeConformance]:") {
		t.Errorf("%v: a passed", err)
	}
	if err := (subset{{Name: "[sig-node] a [NodeConformance]"}}).check(sum, nil); err != nil {
		t.Errorf("all passed: %v", err)
	}
	sum.Passed = append(sum.Passed, outcome{Name: "[sig-node] a [NodeConformance]"})
	if err := (subset{{Name: "[sig-node] a [NodeConformance]"}}).check(sum, nil); err == nil || !strings.Contains(err.Error(), "passed 2 times") {
		t.Errorf("passed twice: %v", err)
	}
	if !s.asked("[It] [sig-node] a [NodeConformance] [sig-node, NodeConformance]") || s.asked("[It] [sig-node] a [NodeConformance] more") || s.asked("[It] [sig-node] f") {
		t.Error("asked: want the subset's specs only, ginkgo's labels allowed")
	}
}
