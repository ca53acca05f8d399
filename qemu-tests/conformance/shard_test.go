package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseShard(t *testing.T) {
	if sh, err := parseShard("2/3"); err != nil || sh != (shard{K: 2, N: 3}) || sh.String() != "2/3" {
		t.Errorf("2/3: %+v, %v", sh, err)
	}
	for _, bad := range []string{"", "2", "0/2", "3/2", "1/1", "a/2", "1/b", "-1/2", "1/2/3"} {
		if _, err := parseShard(bad); err == nil || !strings.Contains(err.Error(), "-shard") {
			t.Errorf("%q: %v, want an error naming -shard", bad, err)
		}
	}
}

// The parts of a focus are dealt in turn from the listing: together
// exactly the focus's specs, each once, none left to no part.
func TestShardNames(t *testing.T) {
	listed := parseListTests(listTestsSample)
	focus := regexp.MustCompile(`\[Conformance\]`)
	var selected []string
	for _, n := range listed {
		if focus.MatchString(n) {
			selected = append(selected, n)
		}
	}
	for n := 2; n <= 4; n++ {
		var all []string
		for k := 1; k <= n; k++ {
			part := shard{K: k, N: n}.names(listed, focus)
			if want := (len(selected) + n - k) / n; len(part) != want {
				t.Errorf("part %d/%d has %d specs, want %d", k, n, len(part), want)
			}
			all = append(all, part...)
		}
		slices.Sort(all)
		sorted := slices.Sorted(slices.Values(selected))
		if !slices.Equal(all, sorted) {
			t.Errorf("%d parts together hold %q, want %q", n, all, sorted)
		}
	}
	if got := (shard{K: 1, N: 2}).names(listed, focus); len(got) != 2 || got[0] != selected[0] || got[1] != selected[2] {
		t.Errorf("part 1/2 %q: want the first and third of %q", got, selected)
	}
}

// writePart writes part sh's run as the runner leaves it under base: its
// run.json, and a ginkgo JUnit report whose FocusStrings is focus and in
// which each listed spec has the state states gives it (skipped, as
// ginkgo reports specs outside the focus, when not given; a skip's
// message, as the suite skips at run time).
func writePart(t *testing.T, base string, sh shard, rec runRecord, focus string, listed []string, states map[string]string) {
	t.Helper()
	dir := sh.dir(base)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	rec.Shard = sh.String()
	if err := writeRunRecord(dir, rec); err != nil {
		t.Fatal(err)
	}
	var x bytes.Buffer
	esc := func(s string) string {
		var b bytes.Buffer
		if err := xml.EscapeText(&b, []byte(s)); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	fmt.Fprintf(&x, `<testsuites><testsuite name="Kubernetes e2e suite"><properties><property name="FocusStrings" value="%s"></property><property name="SkipStrings" value=""></property></properties>`, esc(focus))
	fmt.Fprintf(&x, `<testcase name="[SynchronizedBeforeSuite]" status="passed"></testcase>`)
	for _, n := range listed {
		switch st := states[n]; st {
		case "":
			fmt.Fprintf(&x, `<testcase name="[It] %s" status="skipped"><skipped message="skipped"></skipped></testcase>`, esc(n))
		case "failed":
			fmt.Fprintf(&x, `<testcase name="[It] %s" status="failed" time="10"><failure message="[FAILED] it broke"></failure></testcase>`, esc(n))
		case "skipped - Requires at least 2 nodes (not -1)", "skipped - Only supported for providers [gce] (not skeleton)":
			fmt.Fprintf(&x, `<testcase name="[It] %s" status="skipped" time="1"><skipped message="%s"></skipped></testcase>`, esc(n), esc(st))
		default:
			fmt.Fprintf(&x, `<testcase name="[It] %s" status="%s" time="5"></testcase>`, esc(n), st)
		}
	}
	x.WriteString(`</testsuite></testsuites>`)
	if err := os.WriteFile(filepath.Join(dir, "junit.xml"), x.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// record records part sh's run under base in parts, as a part does when
// it ends, and fails the test if it is not recorded.
func record(t *testing.T, base, parts string, sh shard, focus *regexp.Regexp, listed []string) string {
	t.Helper()
	said, err := recordPart(sh.dir(base), parts, sh, focus, "v1.35.4", listed, nil)
	if err != nil {
		t.Fatalf("recording part %s: %v", sh, err)
	}
	return said
}

// Two parts' runs, each in its own session, make one result: every spec
// of the focus counted once, and the doc's table says it came in parts.
// Before the second has run, the doc counts the first and names the
// second as not yet run. A part run for another focus or another
// e2e.test, or whose report's focus does not select exactly its specs
// (one run by hand with a pattern of its own), is not counted, and named.
// What counts is the parts' records (the repository's), not their runs'
// folders, which are gone by the time the last part runs elsewhere.
func TestMergeShards(t *testing.T) {
	listed := parseListTests(listTestsSample)
	focus := regexp.MustCompile(`\[Conformance\]`)
	p1, p2 := shard{K: 1, N: 2}, shard{K: 2, N: 2}
	n1, n2 := p1.names(listed, focus), p2.names(listed, focus)
	rec := func(day int, image string) runRecord {
		return runRecord{runInfo: runInfo{Date: time.Date(2026, 11, day, 13, 45, 0, 0, time.UTC), Focus: focus.String(), Nodes: 2, Procs: 2,
			Kubernetes: "v1.35.4", Image: image, Wall: 100 * time.Minute, ClusterReadySeconds: float64(130 + day)}}
	}
	base, parts := t.TempDir(), t.TempDir()
	writePart(t, base, p1, rec(29, "berth a"), namesPattern(n1), listed, map[string]string{n1[0]: "passed", n1[1]: "failed"})
	if said := record(t, base, parts, p1, focus, listed); !strings.Contains(said, "part 1/2: recorded its run of 2026-11-29T13:45:00Z in "+filepath.Join(parts, "Conformance-part-1-of-2.json")) {
		t.Errorf("recording part 1: %q", said)
	}
	// Its run's folder gone, as on another machine: the record counts.
	if err := os.RemoveAll(base); err != nil {
		t.Fatal(err)
	}
	s, recs, missing := mergeShards(parts, 2, focus, "v1.35.4", listed)
	if len(recs) != 1 || len(s.Passed) != 1 || len(s.Failed) != 1 || s.Failed[0].Why != "[FAILED] it broke" || len(missing) != 1 || missing[0].Shard != p2 || missing[0].Specs != 1 ||
		!strings.Contains(missing[0].String(), "part 2/2 (1 specs): reading the part's record") {
		t.Errorf("with part 2 not run: %d parts, passed %+v, failed %+v, missing %v", len(recs), s.Passed, s.Failed, missing)
	}
	partial := runSection(s, shardsInfo(recs, 2, missing))
	for _, want := range []string{
		"| parts (`make conformance SHARD=K/2`) | 1 of 2 run; **not yet run: 2/2 (1 specs)**, in no count below |",
		"| date | 2026-11-29 13:45 UTC (part 1/2) |",
		"| ginkgo processes | 2 |",
		"| **passed** | **1** |",
	} {
		if !strings.Contains(partial, want) {
			t.Errorf("the doc's section with part 2 not run lacks %q:\n%s", want, partial)
		}
	}
	// By hand, with Python's escaping: another pattern, the same specs.
	handFocus := `(?:^|\s)(?:` + regexp.MustCompile(`([ \-])`).ReplaceAllString(regexp.QuoteMeta(n2[0]), `\$1`) + `)$`
	// Run with more processes than part 1: the doc says each part's.
	r2 := rec(30, "berth b")
	r2.Procs = 3
	writePart(t, base, p2, r2, handFocus, listed, map[string]string{n2[0]: "passed"})
	record(t, base, parts, p2, focus, listed)
	if said := record(t, base, parts, p2, focus, listed); !strings.Contains(said, "already records its run of 2026-11-30T13:45:00Z") {
		t.Errorf("recording the same run again: %q", said)
	}
	s, recs, missing = mergeShards(parts, 2, focus, "v1.35.4", listed)
	if len(missing) != 0 {
		t.Fatalf("missing %v", missing)
	}
	if len(s.Passed) != 2 || len(s.Failed) != 1 || s.Failed[0].Name != n1[1] || len(s.NotReached) != 0 || len(recs) != 2 {
		t.Errorf("merged: passed %+v, failed %+v, not reached %+v", s.Passed, s.Failed, s.NotReached)
	}
	section := runSection(s, shardsInfo(recs, 2, missing))
	for _, want := range []string{
		"| parts (`make conformance SHARD=K/2`) | 2, all run |",
		"| date | 2026-11-29 13:45 UTC (part 1/2), 2026-11-30 13:45 UTC (part 2/2) |",
		"| node image | berth a; berth b |",
		"| ginkgo processes | 2 (part 1/2), 3 (part 2/2) |",
		"| wall time (suite only) | 3h20m0s (its parts' added up) |",
		"| cluster Ready after | 159 s, 160 s (each part's own cluster) |",
		"| **passed** | **2** |", "| **failed** | **1** |",
	} {
		if !strings.Contains(section, want) {
			t.Errorf("the doc's section lacks %q:\n%s", want, section)
		}
	}
	for _, c := range []struct {
		name       string
		focus      *regexp.Regexp
		kubernetes string
		want       string
	}{
		{"another e2e.test", focus, "v1.36.0", "its run was of e2e.test v1.35.4, this one's is v1.36.0"},
		{"another focus", regexp.MustCompile(`\[NodeConformance\]`), "v1.35.4", "reading the part's record"},
	} {
		if _, recs, missing := mergeShards(parts, 2, c.focus, c.kubernetes, listed); len(recs) != 0 || len(missing) != 2 || !strings.Contains(missing[0].String(), c.want) {
			t.Errorf("%s: %d parts counted, missing %v; want none counted, %q", c.name, len(recs), missing, c.want)
		}
	}
	// A later run of part 2 by hand, focused on part 1's specs: not
	// recorded, and the record of part 2's own run still counts.
	writePart(t, base, p2, rec(31, "berth c"), namesPattern(n1), listed, map[string]string{n1[0]: "passed"})
	if said, err := recordPart(p2.dir(base), parts, p2, focus, "v1.35.4", listed, nil); err == nil || !strings.Contains(err.Error(), "not part 2/2's 1") {
		t.Errorf("part 2's run focused on part 1's specs: %q, %v; want it refused", said, err)
	}
	if _, recs, missing := mergeShards(parts, 2, focus, "v1.35.4", listed); len(recs) != 2 || len(missing) != 0 || recs[1].Image != "berth b" {
		t.Errorf("after a refused run: %d parts counted (%+v), missing %v", len(recs), recs, missing)
	}
	// A record cut short or edited by hand is checked, not trusted.
	path := partFile(parts, focus.String(), p1)
	p, err := readPartRecord(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		edit func(*partRecord)
		want string
	}{
		{"an outcome lost", func(p *partRecord) { p.Results.Failed = nil }, "no outcome for"},
		{"an outcome twice", func(p *partRecord) { p.Results.Passed = append(p.Results.Passed, p.Results.Passed...) }, "3 outcomes for part 1/2's 2 specs"},
		{"another focus in its report", func(p *partRecord) { p.ReportFocus = namesPattern(n2) }, "not part 1/2's 2"},
		{"no focus in its report", func(p *partRecord) { p.ReportFocus = "" }, "is not one pattern"},
	} {
		e := p
		e.Results.Passed = slices.Clone(p.Results.Passed)
		c.edit(&e)
		if err := checkPart(e, path, p1, focus, "v1.35.4", listed); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want %q naming %s", c.name, err, c.want, path)
		}
	}
	if err := os.WriteFile(path, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, missing := mergeShards(parts, 2, focus, "v1.35.4", listed); len(missing) != 1 || !strings.Contains(missing[0].String(), path) {
		t.Errorf("a torn record: missing %v, want it named", missing)
	}
}

// run.json keeps everything the doc's table needs, so a part can be
// merged sessions later.
func TestRunRecordRoundTrip(t *testing.T) {
	dir := t.TempDir()
	want := runRecord{runInfo: runInfo{Date: time.Date(2026, 11, 29, 13, 45, 0, 0, time.UTC), Focus: `\[Conformance\]`, Nodes: 2, Procs: 2,
		Kubernetes: "v1.35.4", Image: "berth x", Wall: 90 * time.Minute, ClusterReadySeconds: 136.6}, Shard: "1/2"}
	if err := writeRunRecord(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := readRunRecord(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Date.Equal(want.Date) || got.Focus != want.Focus || got.Wall != want.Wall || got.Shard != want.Shard || got.Image != want.Image || got.ClusterReadySeconds != want.ClusterReadySeconds {
		t.Errorf("read back %+v, want %+v", got, want)
	}
	if err := os.WriteFile(filepath.Join(dir, runRecordFile), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readRunRecord(dir); err == nil || !strings.Contains(err.Error(), runRecordFile) {
		t.Errorf("a torn run.json: %v, want an error naming it", err)
	}
}

// make conformance-merge: the doc gets the parts recorded so far, over
// the doc as it was (its other focus's section kept), and the console
// names each part not yet counted; with no part recorded there is
// nothing to write.
func TestMergePartsWritesDoc(t *testing.T) {
	listed := parseListTests(listTestsSample)
	focus := regexp.MustCompile(`\[Conformance\]`)
	base, parts := t.TempDir(), t.TempDir()
	doc := filepath.Join(t.TempDir(), "conformance.md")
	var out bytes.Buffer
	if err := mergeParts(parts, 2, focus, "v1.35.4", listed, nil, doc, &out); err == nil || !strings.Contains(err.Error(), "no part of 2") {
		t.Errorf("with no part recorded: %v", err)
	}
	if _, err := os.Stat(doc); !os.IsNotExist(err) {
		t.Errorf("with no part recorded the doc was written: %v", err)
	}
	previous, err := os.ReadFile(filepath.Join("testdata", "doc-previous.md"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(doc, previous, 0o644); err != nil {
		t.Fatal(err)
	}
	p1 := shard{K: 1, N: 2}
	rec := runRecord{runInfo: runInfo{Date: time.Date(2026, 11, 29, 13, 45, 0, 0, time.UTC), Focus: focus.String(), Nodes: 2, Procs: 2, Kubernetes: "v1.35.4", Image: "berth a"}}
	writePart(t, base, p1, rec, namesPattern(p1.names(listed, focus)), listed, map[string]string{p1.names(listed, focus)[0]: "passed"})
	record(t, base, parts, p1, focus, listed)
	out.Reset()
	if err := mergeParts(parts, 2, focus, "v1.35.4", listed, nil, doc, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "conformance: not yet counted: part 2/2") || !strings.Contains(out.String(), "the 1 of 2 parts run: 1 passed, 0 failed, 0 skipped by the suite, 0 skipped by berth's list, 1 not reached") {
		t.Errorf("console:\n%s", out.String())
	}
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	d := string(b)
	if !strings.Contains(d, "## Latest run: `\\[Conformance\\]`") || !strings.Contains(d, "## Latest run: `\\[NodeConformance\\]`") || !strings.Contains(d, "**not yet run: 2/2 (1 specs)**") {
		t.Errorf("the doc should hold the parts' section beside the previous one:\n%s", d)
	}
}

// -merge runs nothing, so it needs only e2e.test, and it is refused with
// the flags that select a run.
func TestRunMergeRefuses(t *testing.T) {
	for _, o := range []options{
		{e2eDir: "x", skips: "skips.yaml", focus: `\[Conformance\]`, merge: 1},
		{e2eDir: "x", skips: "skips.yaml", focus: `\[Conformance\]`, merge: 2, shard: "1/2"},
		{e2eDir: "x", skips: "skips.yaml", focus: `\[Conformance\]`, merge: 2, skip: "x"},
	} {
		if err := run(t.Context(), o, io.Discard); err == nil || !strings.Contains(err.Error(), "-merge N") {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

// A part's failures run again alone (make conformance RERUN= with the
// part's report) are recorded with the part, and the doc shows how each
// went beside it: how a failure under load is told from a bug. A rerun
// is recorded only with the run whose report it read, and only of that
// part's specs.
func TestRerunRecordedWithPart(t *testing.T) {
	listed := parseListTests(listTestsSample)
	focus := regexp.MustCompile(`\[Conformance\]`)
	p1 := shard{K: 1, N: 2}
	n1 := p1.names(listed, focus)
	base, parts := t.TempDir(), t.TempDir()
	runDate := time.Date(2026, 11, 29, 13, 45, 0, 0, time.UTC)
	rec := runRecord{runInfo: runInfo{Date: runDate, Focus: focus.String(), Nodes: 2, Procs: 2, Kubernetes: "v1.35.4", Image: "berth a", Wall: time.Hour}}
	writePart(t, base, p1, rec, namesPattern(n1), listed, map[string]string{n1[0]: "passed", n1[1]: "failed"})
	record(t, base, parts, p1, focus, listed)
	rerunDate := time.Date(2026, 11, 29, 15, 40, 0, 0, time.UTC)
	passed := rerunRecord{Date: rerunDate, Image: "berth a", Wall: 7 * time.Minute,
		Results: summary{Passed: []outcome{{Name: n1[1], Seconds: 375.6}}}}
	doc := filepath.Join(t.TempDir(), "conformance.md")
	var out bytes.Buffer
	// The part's report names its failure for a rerun, and the part.
	names, part, defaultParts, err := rerunSpecs(filepath.Join(p1.dir(base), "junit.xml"), false, nil, listed)
	if err != nil || !slices.Equal(names, n1[1:2]) || part == nil || part.Shard != "1/2" || defaultParts != base {
		t.Fatalf("rerun of part 1's report: %q of %+v, parts in %s, %v", names, part, defaultParts, err)
	}
	// So does its record, sessions later.
	recFile := partFile(parts, focus.String(), p1)
	if names, of, defaultParts, err := rerunSpecs(recFile, false, nil, listed); err != nil || !slices.Equal(names, n1[1:2]) || of == nil || !of.Date.Equal(runDate) || defaultParts != parts {
		t.Fatalf("rerun of part 1's record: %q of %+v, parts in %s, %v", names, of, defaultParts, err)
	}
	if err := recordRerunOf(*part, parts, doc, "v1.35.4", listed, nil, passed, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "part 1/2: recorded the rerun of 1 spec(s) in "+recFile) {
		t.Errorf("console:\n%s", out.String())
	}
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| **failed** | **1** |\n| of which passed run again alone | 1 of the 1 run again |\n",
		"| spec | first line | run again alone |",
		"| " + n1[1] + " | [FAILED] it broke | passed (6m16s, 2026-11-29) |",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the doc lacks %q:\n%s", want, b)
		}
	}
	// Passed run again: nothing is left to run again.
	if names, _, _, err := rerunSpecs(recFile, false, nil, listed); err != nil || len(names) != 0 {
		t.Errorf("rerun of part 1's record after its failure passed: %q, %v", names, err)
	}
	// Run again, and failed again: the latest rerun is the one shown, and
	// the spec is to run again.
	failedAgain := rerunRecord{Date: rerunDate.Add(time.Hour), Results: summary{Failed: []outcome{{Name: n1[1], Why: "[FAILED] still broken"}}}}
	if _, err := recordRerun(parts, focus.String(), p1, runDate, failedAgain); err != nil {
		t.Fatal(err)
	}
	s, _, missing := mergeShards(parts, 2, focus, "v1.35.4", listed)
	if len(s.Failed) != 1 || s.Failed[0].Again != "failed again (2026-11-29): [FAILED] still broken" || len(missing) != 1 {
		t.Errorf("after failing again: failed %+v, missing %v", s.Failed, missing)
	}
	if row := againRow(s.Failed); row != "| of which passed run again alone | 0 of the 1 run again |\n" {
		t.Errorf("again row %q", row)
	}
	if names, _, _, err := rerunSpecs(recFile, false, nil, listed); err != nil || !slices.Equal(names, n1[1:2]) {
		t.Errorf("rerun of part 1's record after its failure failed again: %q, %v", names, err)
	}
	// A rerun of an earlier run of the part is not recorded with this one.
	if said, err := recordRerun(parts, focus.String(), p1, runDate.Add(-24*time.Hour), passed); err == nil || !strings.Contains(err.Error(), "records part 1/2's run of 2026-11-29T13:45:00Z, not the rerun report's run of 2026-11-28T13:45:00Z") {
		t.Errorf("a rerun of another run: %q, %v", said, err)
	}
	// Nor does a record count whose rerun holds another part's spec.
	p, err := readPartRecord(partFile(parts, focus.String(), p1))
	if err != nil {
		t.Fatal(err)
	}
	other := shard{K: 2, N: 2}.names(listed, focus)[0]
	p.Reruns = append(p.Reruns, rerunRecord{Date: rerunDate, Results: summary{Passed: []outcome{{Name: other}}}})
	if err := checkPart(p, "rec.json", p1, focus, "v1.35.4", listed); err == nil || !strings.Contains(err.Error(), "not one of part 1/2's specs") {
		t.Errorf("a rerun of another part's spec: %v", err)
	}
	if _, _, _, err := rerunSpecs(filepath.Join(parts, "none.json"), false, nil, listed); err == nil || !strings.Contains(err.Error(), "none.json") {
		t.Errorf("rerun of a record that is not there: %v", err)
	}
	// A rerun against another e2e.test says nothing of the part's run.
	out.Reset()
	if err := recordRerunOf(*part, parts, doc, "v1.36.0", listed, nil, passed, &out); err != nil || !strings.Contains(out.String(), "not recorded with part 1/2: its run was of e2e.test v1.35.4, this one's is v1.36.0") {
		t.Errorf("another e2e.test: %v\n%s", err, out.String())
	}
}

// A spec the suite skipped at run time for a reason the rig gave (the
// skeleton provider's unset node count) is told from one whose reason
// still holds by running both again (RERUN_SKIPPED=1): only with that
// asked are skips run again, the rerun is recorded with the part, and
// the doc says of each skip how it went, while counting it as the part's
// run did.
func TestRerunSkipped(t *testing.T) {
	listed := parseListTests(listTestsSample)
	focus := regexp.MustCompile(`.`)
	p1 := shard{K: 1, N: 2}
	n1 := p1.names(listed, focus)
	if len(n1) != 3 {
		t.Fatalf("part 1 of the sample: %q", n1)
	}
	rigSkip, stillSkip := "skipped - Requires at least 2 nodes (not -1)", "skipped - Only supported for providers [gce] (not skeleton)"
	base, parts := t.TempDir(), t.TempDir()
	runDate := time.Date(2026, 12, 3, 15, 27, 0, 0, time.UTC)
	rec := runRecord{runInfo: runInfo{Date: runDate, Focus: focus.String(), Nodes: 2, Procs: 2, Kubernetes: "v1.35.4", Image: "berth a", Wall: time.Hour}}
	writePart(t, base, p1, rec, namesPattern(n1), listed, map[string]string{n1[0]: "passed", n1[1]: rigSkip, n1[2]: stillSkip})
	record(t, base, parts, p1, focus, listed)
	recFile := partFile(parts, focus.String(), p1)
	if names, _, _, err := rerunSpecs(recFile, false, nil, listed); err != nil || len(names) != 0 {
		t.Errorf("rerun of the record, skips not asked for: %q, %v", names, err)
	}
	var out bytes.Buffer
	if _, _, err := planRerun([]string{recFile}, false, nil, listed, &out); err == nil {
		t.Errorf("a rerun with nothing to run again, skips not asked for: no error")
	}
	if names, _, _, err := rerunSpecs(filepath.Join(p1.dir(base), "junit.xml"), true, nil, listed); err != nil || !slices.Equal(names, n1[1:]) {
		t.Errorf("rerun of the report with its skips: %q, %v", names, err)
	}
	names, part, _, err := rerunSpecs(recFile, true, nil, listed)
	if err != nil || !slices.Equal(names, n1[1:]) || part == nil {
		t.Fatalf("rerun of the record with its skips: %q of %+v, %v", names, part, err)
	}
	rerun := rerunRecord{Date: runDate.Add(5 * time.Hour), Image: "berth a", Wall: 9 * time.Minute,
		Results: summary{Passed: []outcome{{Name: n1[1], Seconds: 120}}, Skipped: []outcome{{Name: n1[2], Why: stillSkip}}}}
	doc := filepath.Join(t.TempDir(), "conformance.md")
	if err := recordRerunOf(*part, parts, doc, "v1.35.4", listed, nil, rerun, &out); err != nil {
		t.Fatal(err)
	}
	s, recs, missing := mergeShards(parts, 2, focus, "v1.35.4", listed)
	if len(s.Passed) != 1 || len(s.Skipped) != 2 || len(s.Failed) != 0 {
		t.Fatalf("merged: passed %+v, skipped %+v, failed %+v", s.Passed, s.Skipped, s.Failed)
	}
	wantAgain := map[string]string{n1[1]: "passed (2m0s, 2026-12-03)", n1[2]: "skipped again (2026-12-03): " + stillSkip}
	for _, o := range s.Skipped {
		if o.Again != wantAgain[o.Name] {
			t.Errorf("skip %q run again: %q, want %q", o.Name, o.Again, wantAgain[o.Name])
		}
	}
	section := runSection(s, shardsInfo(recs, 2, missing))
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range []string{section, string(b)} {
		for _, want := range []string{
			"| skipped by the suite at run time | 2 |\n| of which passed run again alone | 1 of the 1 run again |\n| skipped by name",
			"| spec | why | run again alone |",
			"| " + n1[1] + " | " + rigSkip + " | passed (2m0s, 2026-12-03) |",
			"| " + n1[2] + " | " + cell(stillSkip) + " | " + cell(wantAgain[n1[2]]) + " |",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("the doc's section lacks %q:\n%s", want, got)
			}
		}
	}
	var console strings.Builder
	writeSummary(&console, s, shardsInfo(recs, 2, missing))
	if want := "SKIPPED (" + rigSkip + "), then run again alone: " + n1[1] + "\n         passed (2m0s, 2026-12-03)"; !strings.Contains(console.String(), want) {
		t.Errorf("console lacks %q:\n%s", want, console.String())
	}
	// Passed run again: only the skip whose reason still holds is left.
	if names, _, _, err := rerunSpecs(recFile, true, nil, listed); err != nil || !slices.Equal(names, n1[2:]) {
		t.Errorf("rerun of the record after one skip passed: %q, %v", names, err)
	}
}

// One cluster runs again what several parts left (RERUN= naming both
// parts' records): the specs of all of them, each once, and each part
// records only its own specs' outcomes, so both records still count. A
// record with nothing left to run again is passed over, said; when no
// file leaves anything, there is nothing to run, and that is an error.
func TestPlanRerunOfParts(t *testing.T) {
	listed := parseListTests(listTestsSample)
	focus := regexp.MustCompile(`\[Conformance\]`)
	p1, p2 := shard{K: 1, N: 2}, shard{K: 2, N: 2}
	n1, n2 := p1.names(listed, focus), p2.names(listed, focus)
	base, parts := t.TempDir(), t.TempDir()
	runDate := time.Date(2026, 11, 29, 13, 45, 0, 0, time.UTC)
	rec := runRecord{runInfo: runInfo{Date: runDate, Focus: focus.String(), Nodes: 2, Procs: 2, Kubernetes: "v1.35.4", Image: "berth a", Wall: time.Hour}}
	states := func(names []string, last string) map[string]string {
		m := map[string]string{}
		for _, n := range names {
			m[n] = "passed"
		}
		m[names[len(names)-1]] = last
		return m
	}
	writePart(t, base, p1, rec, namesPattern(n1), listed, states(n1, "failed"))
	writePart(t, base, p2, rec, namesPattern(n2), listed, states(n2, "skipped")) // never started
	record(t, base, parts, p1, focus, listed)
	record(t, base, parts, p2, focus, listed)
	f1, f2 := partFile(parts, focus.String(), p1), partFile(parts, focus.String(), p2)
	var out bytes.Buffer
	names, sources, err := planRerun([]string{f1, f2}, false, nil, listed, &out)
	want := []string{n1[len(n1)-1], n2[len(n2)-1]}
	if slices.Index(listed, want[0]) > slices.Index(listed, want[1]) {
		want[0], want[1] = want[1], want[0]
	}
	if err != nil || !slices.Equal(names, want) || len(sources) != 2 {
		t.Fatalf("both parts: %q from %d files, %v", names, len(sources), err)
	}
	for i, sh := range []shard{p1, p2} {
		if sources[i].of == nil || sources[i].of.Shard != sh.String() || sources[i].parts != parts || len(sources[i].names) != 1 {
			t.Errorf("file %d: %+v", i+1, sources[i])
		}
	}
	// The one run passes both; each part records its own spec's outcome.
	ran := summary{Passed: []outcome{{Name: names[0], Seconds: 30}, {Name: names[1], Seconds: 40}}}
	doc := filepath.Join(t.TempDir(), "conformance.md")
	for _, src := range sources {
		r := rerunRecord{Date: runDate.Add(3 * time.Hour), Image: "berth b", Results: ran.among(src.names)}
		if got := r.Results.all(); len(got) != 1 || !sameSpec(got[0].Name, src.names[0]) {
			t.Fatalf("%s's share of the rerun: %+v", src.file, got)
		}
		if err := recordRerunOf(*src.of, src.parts, doc, "v1.35.4", listed, nil, r, &out); err != nil {
			t.Fatal(err)
		}
	}
	s, recs, missing := mergeShards(parts, 2, focus, "v1.35.4", listed)
	if len(recs) != 2 || len(missing) != 0 || len(s.Failed) != 1 || !s.Failed[0].passedAgain() || len(s.NotReached) != 1 || !s.NotReached[0].passedAgain() {
		t.Fatalf("after the rerun: %d parts counted, missing %v, failed %+v, not reached %+v", len(recs), missing, s.Failed, s.NotReached)
	}
	// Nothing is left in either: each is said, and the run refused.
	out.Reset()
	_, _, err = planRerun([]string{f1, f2}, false, nil, listed, &out)
	if err == nil || !strings.Contains(err.Error(), f1+", "+f2) {
		t.Errorf("nothing left to run again: %v", err)
	}
	if strings.Count(out.String(), "no spec there failed or was not reached") != 2 {
		t.Errorf("console:\n%s", out.String())
	}
}

// A part's record is named for its focus, short enough for any file
// system however long the focus, and two focuses never share one.
func TestPartFile(t *testing.T) {
	if got := partFile("d", `\[Conformance\]`, shard{K: 2, N: 3}); got != filepath.Join("d", "Conformance-part-2-of-3.json") {
		t.Errorf("[Conformance]: %s", got)
	}
	long := namesPattern(parseListTests(listTestsSample))
	a, b := partFile("d", long, shard{K: 1, N: 2}), partFile("d", long+"x", shard{K: 1, N: 2})
	if len(filepath.Base(a)) > 100 || a == b || !strings.HasSuffix(a, "-part-1-of-2.json") {
		t.Errorf("long focuses: %s, %s", a, b)
	}
	if got := filepath.Base(partFile("d", `.*`, shard{K: 1, N: 2})); len(got) != 16+len("-part-1-of-2.json") {
		t.Errorf("a focus of no word: %s", got)
	}
}

// Specs a part never reached and then ran again alone are counted beside
// "not reached", and one that failed there is listed with the failures,
// in the doc and on the console: a run's leftovers that fail are
// failures, not specs that never ran.
func TestDocNotReachedRunAgain(t *testing.T) {
	s := summary{
		Passed: []outcome{{Name: "a"}},
		NotReached: []outcome{
			{Name: "b", Again: "passed (1m0s, 2026-11-30)"},
			{Name: "c", Again: "failed (2026-11-30): Timed out after 300.001s."},
			{Name: "d"},
			{Name: "e", Again: "not run (2026-11-30)"},
		},
	}
	ri := runInfo{Focus: `\[Conformance\]`, Nodes: 2, Procs: 1, Kubernetes: "v1.35.4", Image: "berth a"}
	sec := runSection(s, ri)
	for _, want := range []string{
		"| **failed** | **0** |\n| skipped",
		"| not reached (the run ended first) | 4 |\n| of which passed run again alone | 1 of the 2 run again |\n",
		"| spec | first line | run again alone |\n|---|---|---|\n| c | not reached in its part's run | failed (2026-11-30): Timed out after 300.001s. |\n",
	} {
		if !strings.Contains(sec, want) {
			t.Errorf("the section lacks %q:\n%s", want, sec)
		}
	}
	for _, absent := range []string{"| b |", "| d |", "| e |"} {
		if strings.Contains(sec, absent) {
			t.Errorf("the section lists %q among the failures:\n%s", absent, sec)
		}
	}
	var out bytes.Buffer
	writeSummary(&out, s, ri)
	for _, want := range []string{
		"  of the 4 not reached, 2 run again alone: 1 passed\n",
		"  NOT REACHED, then run again alone: c\n         failed (2026-11-30): Timed out after 300.001s.\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the console lacks %q:\n%s", want, out.String())
		}
	}
	// A failure run again failed again; a spec never reached failed.
	d := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	got := again(summary{Failed: []outcome{{Name: "x"}}, NotReached: []outcome{{Name: "y"}, {Name: "z"}}},
		[]rerunRecord{{Date: d, Results: summary{Failed: []outcome{{Name: "x", Why: "w"}, {Name: "y", Why: "w"}}, NotReached: []outcome{{Name: "z"}}}}})
	if got.Failed[0].Again != "failed again (2026-11-30): w" || got.NotReached[0].Again != "failed (2026-11-30): w" || got.NotReached[1].Again != "not run (2026-11-30)" {
		t.Errorf("again: failed %+v, not reached %+v", got.Failed, got.NotReached)
	}
	// Nothing run again: the table is as before, with no extra row.
	if sec := runSection(summary{NotReached: []outcome{{Name: "d"}}}, ri); strings.Contains(sec, "run again") {
		t.Errorf("nothing run again, yet:\n%s", sec)
	}
}
