package main

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
)

// listedSpec is one line of e2e.test --list-tests: the spec's file and
// line, then its full name.
var listedSpec = regexp.MustCompile(`^\s+\S+\.go:\d+: (.+)$`)

// listTests runs e2e.test --list-tests and returns the spec names it
// prints, as ginkgo's --focus matches them.
func listTests(ctx context.Context, bin string) ([]string, error) {
	out, err := exec.CommandContext(ctx, bin, "--list-tests").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list-tests: %w", bin, err)
	}
	names := parseListTests(string(out))
	if len(names) == 0 {
		return nil, fmt.Errorf("%s --list-tests listed no spec", bin)
	}
	return names, nil
}

func parseListTests(out string) []string {
	var names []string
	for line := range strings.Lines(out) {
		if m := listedSpec.FindStringSubmatch(strings.TrimRight(line, "\n")); m != nil {
			names = append(names, m[1])
		}
	}
	return names
}

// rerunNames are the specs, of those e2e.test lists, that a run's JUnit
// report (read from file) says failed or never started (its timeout or
// an interrupt ended the run first), of those its run was asked for
// (reportFilters: every spec outside them is in the report too, as
// "skipped"). The report names a spec with ginkgo's labels appended, so
// each is matched to its listed name (sameSpec). Specs the suite skipped
// with a reason, or berth's list skips, are not rerun: they would be
// skipped again.
func rerunNames(j junitSuites, file string, list skipList, listed []string) ([]string, error) {
	focus, skip, err := reportFilters(j, file)
	if err != nil {
		return nil, err
	}
	asked := func(string) bool { return true }
	if focus != nil {
		asked = focusAsked(focus)
	}
	if skip != nil {
		asked = notSkipped(asked, skip)
	}
	s := summarize(j, asked, list)
	var again []outcome
	again = append(append(again, s.Failed...), s.NotReached...)
	var names []string
	for _, n := range listed {
		if slices.ContainsFunc(again, func(o outcome) bool { return sameSpec(o.Name, n) }) && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names, nil
}
