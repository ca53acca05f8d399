package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// runInfo is what the published table says about a run besides its
// results.
type runInfo struct {
	Date                time.Time
	Focus, Skip         string
	Nodes, Procs        int
	Kubernetes          string // e2e.test's and kubelet's version
	Image               string // the node image's version (its manifest)
	Wall                time.Duration
	ClusterReadySeconds float64
	// Parts, for a run made of parts (make conformance SHARD=K/N), says
	// each part's date, image and readiness; Date is then the first
	// part's and Wall their sum.
	Parts *partsInfo `json:",omitempty"`
	// Selection, for a run of a selection (make conformance
	// SELECTION=), is what it selected and why the rest was left out;
	// Focus is then the names it kept.
	Selection *selectionInfo `json:",omitempty"`
}

// shown is the run's focus as the console names it: a selection's
// file, not the thousands of characters of its names.
func (ri runInfo) shown() string {
	if ri.Selection != nil {
		return fmt.Sprintf("selection %s (%d specs)", ri.Selection.File, ri.Selection.Kept)
	}
	return fmt.Sprintf("focus %q", ri.Focus)
}

// heading is what the doc's section of the run is named for: its
// selection's file, or its focus.
func (ri runInfo) heading() string {
	if ri.Selection != nil {
		return ri.Selection.File
	}
	return docFocus(ri.Focus)
}

// writeSummary prints the run's result as the console shows it: counts,
// then each failure with its first line.
func writeSummary(w io.Writer, s summary, ri runInfo) {
	fmt.Fprintf(w, "conformance: %d passed, %d failed, %d skipped by the suite, %d skipped by berth's list, %d not reached (%s, %d node(s), %s)\n",
		len(s.Passed), len(s.Failed), len(s.Skipped), len(s.Listed), len(s.NotReached), ri.shown(), ri.Nodes, ri.Wall.Round(time.Second))
	for _, o := range s.Setup {
		fmt.Fprintf(w, "  SUITE FAILED %s: %s\n", o.Name, o.Why)
	}
	for _, o := range s.Failed {
		fmt.Fprintf(w, "  FAILED %s\n         %s\n", o.Name, o.Why)
		if o.Again != "" {
			fmt.Fprintf(w, "         run again alone: %s\n", o.Again)
		}
	}
	if passed, ran := againCounts(s.NotReached); ran > 0 {
		fmt.Fprintf(w, "  of the %d not reached, %d run again alone: %d passed\n", len(s.NotReached), ran, passed)
	}
	for _, o := range failedUnreached(s.NotReached) {
		fmt.Fprintf(w, "  NOT REACHED, then run again alone: %s\n         %s\n", o.Name, o.Again)
	}
	for _, o := range s.Skipped {
		if o.Again != "" {
			fmt.Fprintf(w, "  SKIPPED (%s), then run again alone: %s\n         %s\n", o.Why, o.Name, o.Again)
		}
	}
}

// failedUnreached are the specs a part never reached that failed
// when run again alone: failures as much as those its run saw.
func failedUnreached(notReached []outcome) []outcome {
	var out []outcome
	for _, o := range notReached {
		if o.ranAgain() && !o.passedAgain() {
			out = append(out, o)
		}
	}
	return out
}

// writeDoc writes docs/conformance.md: the latest run of each focus,
// this run's and those previous (the doc as it was; nil when there was
// none) holds for other focuses, in the order of their focus; then the
// specs skipped by name with their reasons. One focus's run does not
// erase another's: a two-node [Conformance] run leaves the one-node
// [NodeConformance] table standing.
func writeDoc(w io.Writer, s summary, ri runInfo, list skipList, previous []byte) {
	fmt.Fprintf(w, `# Conformance: Kubernetes' e2e suite against berth nodes

Written by `+"`make conformance`"+` (qemu-tests/conformance) after each run,
which replaces the section of its focus (or of its selection, a file
naming a focus and what it leaves out) and keeps the others;
edit the skip list (qemu-tests/conformance/skips.yaml), not this file.
A run made in parts (`+"`make conformance SHARD=K/N`"+`) is counted from
the parts' records in docs/conformance-parts/, each written when its
part ends.
The suite runs offline: e2e.test and ginkgo built from the same
k8s.io/kubernetes as kubelet, the e2e images built from their upstream
Dockerfiles' contents and served by the registry stand-in
(components/README.md, "The e2e suite"). `+"`make test`"+` runs a slice
of it on every run (`+"`make test-conformance`"+`: the specs
qemu-tests/conformance/subset.yaml names, each of which must pass).

`)
	sections := previousRuns(previous)
	sections[ri.heading()] = runSection(s, ri)
	for _, f := range slices.Sorted(maps.Keys(sections)) {
		fmt.Fprint(w, sections[f])
	}
	fmt.Fprintf(w, "## Skipped by name\n\nSpecs that cannot pass here for a reason outside berth, each with the upstream reason.\n\n")
	if len(list) == 0 {
		fmt.Fprintf(w, "None.\n")
		return
	}
	fmt.Fprintf(w, "| spec | reason |\n|---|---|\n")
	for _, e := range list {
		fmt.Fprintf(w, "| %s | %s |\n", cell(e.Name), cell(e.Reason))
	}
}

// docFocus is a focus as the doc shows it, in code quotes and a table's
// cell.
func docFocus(focus string) string { return strings.ReplaceAll(focus, "|", `\|`) }

const latestRun = "## Latest run: `"

// runSection is one run's section: its table, its failures and the specs
// the suite skipped.
func runSection(s summary, ri runInfo) string {
	date, image := ri.Date.UTC().Format("2006-01-02 15:04 UTC"), ri.Image
	wall, ready := ri.Wall.Round(time.Second).String(), fmt.Sprintf("%.0f s", ri.ClusterReadySeconds)
	partsRow, procs := "", fmt.Sprint(ri.Procs)
	if p := ri.Parts; p != nil {
		procs = cmp.Or(p.Procs, procs)
		// Each part brought its own cluster up (make conformance SHARD=).
		date, image, ready = p.Dates, p.Images, p.Ready+" (each part's own cluster)"
		wall += " (its parts' added up)"
		partsRow = fmt.Sprintf("| parts (`make conformance SHARD=K/%d`) | %d, all run |\n", p.N, p.N)
		if len(p.NotRun) > 0 {
			partsRow = fmt.Sprintf("| parts (`make conformance SHARD=K/%d`) | %d of %d run; **not yet run: %s**, in no count below |\n",
				p.N, p.N-len(p.NotRun), p.N, strings.Join(p.NotRun, ", "))
		}
	}
	var w strings.Builder
	fmt.Fprintf(&w, `%s%s`+"`"+`

| | |
|---|---|
%s| date | %s |
| Kubernetes (e2e.test, kubelet) | %s |
| node image | %s |
| nodes | %d (QEMU, TCG, on this machine) |
| ginkgo processes | %s |
| wall time (suite only) | %s |
| cluster Ready after | %s |
| **passed** | **%d** |
| **failed** | **%d** |
%s| skipped by the suite at run time | %d |
%s| skipped by name (below) | %d |
| not reached (the run ended first) | %d |
%s
`, latestRun, ri.heading(), partsRow, date, ri.Kubernetes, image, ri.Nodes, procs,
		wall, ready, len(s.Passed), len(s.Failed), againRow(s.Failed), len(s.Skipped), againRow(s.Skipped), len(s.Listed), len(s.NotReached), againRow(s.NotReached))
	if sel := ri.Selection; sel != nil {
		fmt.Fprintf(&w, "### What it runs\n\n**%s.** The %d of the %d specs its focus `%s` matches that no rule below takes out; each rule counts the specs it took out that no rule above it had.\n\n| left out | specs | why |\n|---|---|---|\n",
			cell(sel.Title), sel.Kept, sel.Matched, docFocus(sel.Focus))
		for _, r := range sel.Rules {
			fmt.Fprintf(&w, "| `%s` | %d | %s |\n", docFocus(r.Pattern), r.Specs, cell(r.Reason))
		}
		fmt.Fprintln(&w)
	}
	failures := append(append([]outcome{}, s.Setup...), s.Failed...)
	for _, o := range failedUnreached(s.NotReached) {
		o.Why = "not reached in its part's run"
		failures = append(failures, o)
	}
	if len(failures) > 0 {
		if !slices.ContainsFunc(failures, func(o outcome) bool { return o.Again != "" }) {
			fmt.Fprintf(&w, "### Failures\n\nEach is a berth bug until shown otherwise.\n\n| spec | first line |\n|---|---|\n")
			for _, o := range failures {
				fmt.Fprintf(&w, "| %s | %s |\n", cell(o.Name), cell(o.Why))
			}
		} else {
			// A part's failures run again alone on a fresh cluster
			// (RERUN=): one that passes there failed under load.
			fmt.Fprintf(&w, "### Failures\n\nEach is a berth bug until shown otherwise; the last column is how it went run again alone, on a fresh cluster of its own (`make conformance RERUN=` with its part's report).\n\n| spec | first line | run again alone |\n|---|---|---|\n")
			for _, o := range failures {
				fmt.Fprintf(&w, "| %s | %s | %s |\n", cell(o.Name), cell(o.Why), cell(cmp.Or(o.Again, "not run again")))
			}
		}
		fmt.Fprintln(&w)
	}
	if len(s.Skipped) > 0 {
		// A skip the rig caused (make conformance RERUN= RERUN_SKIPPED=1)
		// is told from one whose reason still holds by running it again.
		ranAgain := slices.ContainsFunc(s.Skipped, func(o outcome) bool { return o.Again != "" })
		if ranAgain {
			fmt.Fprintf(&w, "### Skipped by the suite at run time\n\nThe last column is how it went run again alone, on a fresh cluster of its own (`make conformance RERUN_SKIPPED=1 RERUN=` with its part's record).\n\n| spec | why | run again alone |\n|---|---|---|\n")
		} else {
			fmt.Fprintf(&w, "### Skipped by the suite at run time\n\n| spec | why |\n|---|---|\n")
		}
		for _, o := range s.Skipped {
			again := ""
			if ranAgain {
				again = " " + cell(cmp.Or(o.Again, "not run again")) + " |"
			}
			fmt.Fprintf(&w, "| %s | %s |%s\n", cell(o.Name), cell(o.Why), again)
		}
		fmt.Fprintln(&w)
	}
	return w.String()
}

// againRow is the table's row that says how many of the failures (or
// of the specs not reached) passed when run again alone, when any was
// run again.
func againRow(l []outcome) string {
	passed, ran := againCounts(l)
	if ran == 0 {
		return ""
	}
	return fmt.Sprintf("| of which passed run again alone | %d of the %d run again |\n", passed, ran)
}

// againCounts says how many of l were run again alone, and passed.
func againCounts(l []outcome) (passed, ran int) {
	for _, o := range l {
		if o.ranAgain() {
			ran++
		}
		if o.passedAgain() {
			passed++
		}
	}
	return passed, ran
}

// previousRuns reads the run sections of the doc as it was, each from
// its "## Latest run: `FOCUS`" heading to the next "## " heading, by
// FOCUS as the doc shows it.
func previousRuns(doc []byte) map[string]string {
	runs := map[string]string{}
	var focus string
	var sec strings.Builder
	flush := func() {
		if focus != "" {
			runs[focus] = sec.String()
		}
		focus = ""
		sec.Reset()
	}
	for _, line := range strings.SplitAfter(string(doc), "\n") {
		if strings.HasPrefix(line, "## ") {
			flush()
		}
		if f, ok := strings.CutPrefix(line, latestRun); ok {
			focus = strings.TrimSuffix(strings.TrimSuffix(f, "\n"), "`")
		}
		if focus != "" {
			sec.WriteString(line)
		}
	}
	flush()
	return runs
}

// cell is s made safe for one Markdown table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
