package main

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// subsetAreas are what make test's subset must cover, each by at least
// one spec: the node's side of a pod's life that issue 27 names, so a
// berth change that breaks one of them fails CI, not only a full run.
var subsetAreas = []string{
	"pod lifecycle", "restart policy", "probes", "lifecycle hooks", "downward API",
	"projected volumes", "configmap and secret volumes", "volume updates", "environment",
	"emptyDir on tmpfs", "run as user", "fsGroup", "no new privileges", "read-only root",
	"sysctls", "host network /etc/hosts", "container logs", "exec", "init containers",
	"image pulls", "pod network", "runtime class",
}

// subsetEntry is one spec of make test's subset: its full name as
// e2e.test --list-tests prints it, and the area it covers.
type subsetEntry struct {
	Name string `json:"name"`
	Area string `json:"area"`
}

// subset is qemu-tests/conformance/subset.yaml.
type subset []subsetEntry

func loadSubset(path string) (subset, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the subset: %w", err)
	}
	return parseSubset(b, path)
}

// parseSubset checks every entry has a name and one of subsetAreas, no
// name repeats, and every area is covered.
func parseSubset(b []byte, path string) (subset, error) {
	var s subset
	if err := yaml.UnmarshalStrict(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(bytes.TrimSpace(b)) == 0 || len(s) == 0 {
		return nil, fmt.Errorf("%s: the subset is empty", path)
	}
	seen := map[string]int{}
	covered := map[string]bool{}
	for i, e := range s {
		switch {
		case strings.TrimSpace(e.Name) == "":
			return nil, fmt.Errorf("%s: entry %d: no name", path, i+1)
		case !slices.Contains(subsetAreas, e.Area):
			return nil, fmt.Errorf("%s: entry %d (%s): area %q is none of %s", path, i+1, e.Name, e.Area, strings.Join(subsetAreas, ", "))
		}
		if j, ok := seen[e.Name]; ok {
			return nil, fmt.Errorf("%s: entries %d and %d both name %q", path, j+1, i+1, e.Name)
		}
		seen[e.Name] = i
		covered[e.Area] = true
	}
	var missing []string
	for _, a := range subsetAreas {
		if !covered[a] {
			missing = append(missing, a)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: no spec covers %s", path, strings.Join(missing, ", "))
	}
	return s, nil
}

func (s subset) names() []string {
	n := make([]string, len(s))
	for i, e := range s {
		n[i] = e.Name
	}
	return n
}

// asked says whether a JUnit case is one of the subset's specs.
func (s subset) asked(caseName string) bool {
	return slices.ContainsFunc(s, func(e subsetEntry) bool { return sameSpec(caseName, e.Name) })
}

// check says which of the subset's specs the run did not pass: each must
// have passed, once; one the suite skipped or never ran (renamed in a
// newer e2e.test, or skipped at run time) is a failure too, so the
// subset never shrinks silently.
func (s subset) check(sum summary, list skipList) error {
	var problems []string
	for _, e := range s {
		if _, listed := list.reason(e.Name); listed {
			problems = append(problems, fmt.Sprintf("%s: in the skip list too", e.Name))
			continue
		}
		n := 0
		for _, o := range sum.Passed {
			if sameSpec(o.Name, e.Name) {
				n++
			}
		}
		if n == 1 {
			continue
		}
		state := "not run (no such spec in this e2e.test?)"
		for _, l := range []struct {
			what string
			in   []outcome
		}{{"failed", sum.Failed}, {"skipped by the suite", sum.Skipped}, {"skipped by the list", sum.Listed}, {"not reached (the run ended first)", sum.NotReached}} {
			if slices.ContainsFunc(l.in, func(o outcome) bool { return sameSpec(o.Name, e.Name) }) {
				state = l.what
			}
		}
		if n > 1 {
			state = fmt.Sprintf("passed %d times: its name is not one spec's", n)
		}
		problems = append(problems, fmt.Sprintf("%s: %s", e.Name, state))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%d of the subset's %d specs did not pass:\n  %s", len(problems), len(s), strings.Join(problems, "\n  "))
	}
	return nil
}
