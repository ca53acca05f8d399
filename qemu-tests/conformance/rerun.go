package main

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
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
// with a reason, or berth's list skips, are not rerun (they would be
// skipped again) unless skipped says to: the first, for a reason the rig
// gave and gives no more.
func rerunNames(j junitSuites, file string, skipped bool, list skipList, listed []string) ([]string, error) {
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
	return listedAmong(summarize(j, asked, list).toRunAgain(skipped), listed), nil
}

// rerunSpecs are the specs -rerun's file says to run again, of those
// e2e.test lists: a part's record (docs/conformance-parts/*.json, which
// outlives the session that ran the part) names its failed and unreached
// specs (and with skipped, those the suite skipped), less those that
// passed run again since; a JUnit report, those rerunNames reads. of is
// the part whose specs they are, to record the rerun with (nil for a
// whole run's report), and parts where that part's record is by default:
// beside the record read, or the parts' folder holding the report's
// part.
func rerunSpecs(file string, skipped bool, list skipList, listed []string) (names []string, of *runRecord, parts string, err error) {
	if strings.HasSuffix(file, ".json") {
		p, err := readPartRecord(file)
		if err != nil {
			return nil, nil, "", fmt.Errorf("-rerun: %w", err)
		}
		if p.Shard == "" {
			return nil, nil, "", fmt.Errorf("-rerun %s: not a part's record (no shard)", file)
		}
		s := again(p.Results, p.Reruns)
		var outcomes []outcome
		for _, o := range s.toRunAgain(skipped) {
			if !o.passedAgain() {
				outcomes = append(outcomes, o)
			}
		}
		return listedAmong(outcomes, listed), &p.runRecord, filepath.Dir(file), nil
	}
	j, err := readJUnit(file)
	if err != nil {
		return nil, nil, "", err
	}
	if names, err = rerunNames(j, file, skipped, list, listed); err != nil {
		return nil, nil, "", err
	}
	if r, err := readRunRecord(filepath.Dir(file)); err == nil && r.Shard != "" {
		of = &r
	}
	return names, of, filepath.Dir(filepath.Dir(file)), nil
}

// toRunAgain are the outcomes a rerun runs again: the failed and the
// unreached, and with skipped those the suite skipped at run time.
func (s summary) toRunAgain(skipped bool) []outcome {
	again := append(append([]outcome{}, s.Failed...), s.NotReached...)
	if skipped {
		again = append(again, s.Skipped...)
	}
	return again
}

// listedAmong are the listed names of outcomes' specs (whose names have
// ginkgo's labels appended: sameSpec), in the listing's order, each once.
func listedAmong(outcomes []outcome, listed []string) []string {
	var names []string
	for _, n := range listed {
		if slices.ContainsFunc(outcomes, func(o outcome) bool { return sameSpec(o.Name, n) }) && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

// rerunSource is one -rerun file: the specs it says to run again, and
// the part they are of (nil for a whole run's report) with where that
// part's record is by default (rerunSpecs).
type rerunSource struct {
	file  string
	names []string
	of    *runRecord
	parts string
}

// planRerun reads each -rerun file (rerunSpecs) and returns the specs to
// run again, of all of them, in the listing's order and each once, with
// each file's own share: one cluster runs the failures and unreached
// specs of several parts (a run's two parts, say), and each part's
// outcomes are recorded with that part only (among). A file with nothing
// left to run again is said on out and passed over; all of them with
// nothing is an error, since there is nothing to run.
func planRerun(files []string, skipped bool, list skipList, listed []string, out io.Writer) ([]string, []rerunSource, error) {
	var sources []rerunSource
	var all []string
	for _, f := range files {
		names, of, parts, err := rerunSpecs(f, skipped, list, listed)
		if err != nil {
			return nil, nil, err
		}
		if len(names) == 0 {
			fmt.Fprintf(out, "conformance: -rerun %s: no spec there failed or was not reached (or each passed run again since)\n", f)
			continue
		}
		fmt.Fprintf(out, "conformance: rerunning %d spec(s) of %s\n", len(names), f)
		sources = append(sources, rerunSource{file: f, names: names, of: of, parts: parts})
		all = append(all, names...)
	}
	if len(sources) == 0 {
		return nil, nil, fmt.Errorf("-rerun %s: no spec there failed or was not reached (or each passed run again since)", strings.Join(files, ", "))
	}
	var names []string
	for _, n := range listed {
		if slices.Contains(all, n) && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names, sources, nil
}

// among is s over only the specs named (as e2e.test lists them): a
// rerun's outcomes for one of the parts it ran specs of.
func (s summary) among(names []string) summary {
	keep := func(l []outcome) []outcome {
		var kept []outcome
		for _, o := range l {
			if slices.ContainsFunc(names, func(n string) bool { return sameSpec(o.Name, n) }) {
				kept = append(kept, o)
			}
		}
		return kept
	}
	return summary{Passed: keep(s.Passed), Failed: keep(s.Failed), Skipped: keep(s.Skipped),
		Listed: keep(s.Listed), NotReached: keep(s.NotReached), Setup: s.Setup}
}
