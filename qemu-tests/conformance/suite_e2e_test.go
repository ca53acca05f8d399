//go:build components && e2e

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestNamesPatternAgainstSuite holds namesPattern to ginkgo itself: a dry
// run of e2e.test (BERTH_E2E_DIR, make e2e) focused with the subset's
// pattern selects exactly the subset's specs, and the same pattern as
// --skip leaves every one of them out: so the subset runs what it names
// and the skip list skips what it names, no more.
func TestNamesPatternAgainstSuite(t *testing.T) {
	dir := e2eDir(t)
	s, err := loadSubset("subset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pattern := namesPattern(s.names())
	dry := func(flagName string) summary { return dryRun(t, dir, flagName, pattern) }
	focused := dry("focus")
	var ran []string
	for _, o := range focused.Passed {
		ran = append(ran, o.Name)
	}
	if err := s.check(focused, nil); err != nil {
		t.Errorf("focused on the subset: %v", err)
	}
	if len(ran) != len(s) {
		t.Errorf("focused on the subset's %d names, the dry run selects %d specs: %q", len(s), len(ran), ran)
	}
	skipped := dry("skip")
	for _, o := range skipped.Passed {
		if slices.ContainsFunc(s, func(e subsetEntry) bool { return sameSpec(o.Name, e.Name) }) {
			t.Errorf("--skip with the subset's pattern still selects %s", o.Name)
		}
	}
	if len(skipped.Passed) < 1000 {
		t.Errorf("--skip with the subset's pattern selects only %d specs: it skips more than it names", len(skipped.Passed))
	}
}

// dryRun is e2e.test's dry run with --ginkgo.<flagName>=pattern: what it
// would run, without running it.
func dryRun(t *testing.T, dir, flagName, pattern string) summary {
	t.Helper()
	out := t.TempDir()
	cmd := exec.Command(filepath.Join(dir, "e2e.test"), "--provider=skeleton", "--ginkgo.dry-run", "--ginkgo.no-color",
		"--ginkgo."+flagName+"="+pattern, "--ginkgo.junit-report="+filepath.Join(out, "junit.xml"))
	cmd.Dir = out
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("e2e.test dry run with --%s: %v\n%s", flagName, err, b[max(0, len(b)-2000):])
	}
	j, err := readJUnit(filepath.Join(out, "junit.xml"))
	if err != nil {
		t.Fatal(err)
	}
	return summarize(j, nil, nil)
}

// TestSkipListAgainstSuite: make conformance's --skip pattern, from
// skips.yaml, selects exactly the specs the list names in e2e.test's own
// dry run (a name that no longer matches would skip nothing, silently).
func TestSkipListAgainstSuite(t *testing.T) {
	dir := e2eDir(t)
	l, err := loadSkips("skips.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(l) == 0 {
		if l.pattern() != "" {
			t.Errorf("an empty skip list gives the pattern %q", l.pattern())
		}
		return
	}
	focused := dryRun(t, dir, "focus", l.pattern())
	for _, e := range l {
		if !slices.ContainsFunc(focused.Passed, func(o outcome) bool { return sameSpec(o.Name, e.Name) }) {
			t.Errorf("skips.yaml names %q, which e2e.test does not select by the list's pattern", e.Name)
		}
	}
	if len(focused.Passed) != len(l) {
		t.Errorf("the skip list's pattern selects %d specs for its %d names", len(focused.Passed), len(l))
	}
}

// e2eDir is BERTH_E2E_DIR, where make test-e2e-images built e2e.test.
func e2eDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("BERTH_E2E_DIR")
	if dir == "" {
		t.Fatal("BERTH_E2E_DIR is not set: run make test-e2e-images")
	}
	return dir
}

// TestListTestsAgainstSuite holds -rerun's reading of e2e.test
// --list-tests to the suite: it finds the counts (441
// [Conformance] specs, 197 [NodeConformance]), and a dry run focused on
// the names pattern of the first 20 [Conformance] names it read selects
// exactly those 20.
func TestListTestsAgainstSuite(t *testing.T) {
	dir := e2eDir(t)
	names, err := listTests(t.Context(), filepath.Join(dir, "e2e.test"))
	if err != nil {
		t.Fatal(err)
	}
	var conf, node []string
	for _, n := range names {
		if strings.Contains(n, "[Conformance]") {
			conf = append(conf, n)
		}
		if strings.Contains(n, "[NodeConformance]") {
			node = append(node, n)
		}
	}
	if len(conf) != 441 || len(node) != 197 {
		t.Fatalf("--list-tests read as %d [Conformance] and %d [NodeConformance] names, want 441 and 197", len(conf), len(node))
	}
	focused := dryRun(t, dir, "focus", namesPattern(conf[:20]))
	if len(focused.Passed) != 20 {
		t.Errorf("a dry run focused on 20 listed names selects %d specs", len(focused.Passed))
	}
	for _, o := range focused.Passed {
		if !slices.ContainsFunc(conf[:20], func(n string) bool { return sameSpec(o.Name, n) }) {
			t.Errorf("the dry run selects %s, not among the 20", o.Name)
		}
	}
}

// TestShardsAgainstSuite holds SHARD= to the suite: the two parts of
// [Conformance] hold its 441 specs between them, each once; a dry run
// focused on part 1 selects exactly part 1's specs, and its own report
// (ginkgo's FocusStrings) is read back as part 1 (readShard's check),
// not part 2; and -rerun finds nothing to rerun in a report where every
// asked spec passed, though thousands outside its focus are "skipped".
func TestShardsAgainstSuite(t *testing.T) {
	dir := e2eDir(t)
	listed, err := listTests(t.Context(), filepath.Join(dir, "e2e.test"))
	if err != nil {
		t.Fatal(err)
	}
	focus := regexp.MustCompile(`\[Conformance\]`)
	p1, p2 := shard{K: 1, N: 2}.names(listed, focus), shard{K: 2, N: 2}.names(listed, focus)
	all := slices.Sorted(slices.Values(append(slices.Clone(p1), p2...)))
	if len(all) != 441 || len(slices.Compact(slices.Clone(all))) != 441 {
		t.Fatalf("the two parts hold %d specs (%d distinct), want the 441 [Conformance] specs", len(all), len(slices.Compact(slices.Clone(all))))
	}
	out := t.TempDir()
	cmd := exec.Command(filepath.Join(dir, "e2e.test"), "--provider=skeleton", "--ginkgo.dry-run", "--ginkgo.no-color",
		"--ginkgo.focus="+namesPattern(p1), "--ginkgo.junit-report="+filepath.Join(out, "junit.xml"))
	cmd.Dir = out
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("e2e.test dry run: %v\n%s", err, b[max(0, len(b)-2000):])
	}
	j, err := readJUnit(filepath.Join(out, "junit.xml"))
	if err != nil {
		t.Fatal(err)
	}
	s := summarize(j, nil, nil)
	if len(s.Passed) != len(p1) {
		t.Errorf("a dry run focused on part 1's %d specs selects %d", len(p1), len(s.Passed))
	}
	rec := runRecord{runInfo: runInfo{Focus: focus.String(), Kubernetes: "v"}, Shard: "1/2"}
	for k, want := range map[int]bool{1: true, 2: false} {
		dirK := shard{K: k, N: 2}.dir(t.TempDir())
		if err := os.MkdirAll(dirK, 0o755); err != nil {
			t.Fatal(err)
		}
		rec.Shard = shard{K: k, N: 2}.String()
		if err := writeRunRecord(dirK, rec); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(out, "junit.xml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dirK, "junit.xml"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		parts := t.TempDir()
		if _, err := recordPart(dirK, parts, shard{K: k, N: 2}, focus, "v", listed, nil); (err == nil) != want {
			t.Errorf("the dry run's report recorded as part %d/2: %v", k, err)
		}
		got, recs, _ := mergeShards(parts, 2, focus, "v", listed)
		if want && (len(recs) != 1 || len(got.Passed) != len(p1)) {
			t.Errorf("recorded as part 1/2, %d parts count %d passed, want 1 part, %d", len(recs), len(got.Passed), len(p1))
		}
	}
	again, err := rerunNames(j, "dry run", false, nil, listed)
	if err != nil || len(again) != 0 {
		t.Errorf("rerun of a report with every asked spec passed: %d specs, %v", len(again), err)
	}
}

// TestWiderAgainstSuite holds make conformance
// SELECTION=qemu-tests/conformance/wider.yaml to this e2e.test: every
// rule takes out at least one spec, no kept spec carries a tag a rule
// names, and a dry run focused on the pattern of its names selects
// exactly those specs.
func TestWiderAgainstSuite(t *testing.T) {
	dir := e2eDir(t)
	listed, err := listTests(t.Context(), filepath.Join(dir, "e2e.test"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := loadSelection("wider.yaml")
	if err != nil {
		t.Fatal(err)
	}
	names, info, err := s.resolve(listed, "wider.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		for _, tag := range []string{"[Conformance]", "[Serial]", "[Disruptive]", "[Slow]", "[Feature:", "[Alpha]"} {
			if strings.Contains(n, tag) {
				t.Errorf("kept %s, which is %s", n, tag)
			}
		}
	}
	focused := dryRun(t, dir, "focus", namesPattern(names))
	if len(focused.Passed) != info.Kept {
		t.Errorf("a dry run focused on the selection's %d names selects %d specs", info.Kept, len(focused.Passed))
	}
	for _, o := range focused.Passed {
		if !slices.ContainsFunc(names, func(n string) bool { return sameSpec(o.Name, n) }) {
			t.Errorf("the dry run selects %s, not in the selection", o.Name)
		}
	}
}
