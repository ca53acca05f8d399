package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata's golden files")

// sampleSummary is testdata's ginkgo report summarized with testdata's
// skip list, focused on [NodeConformance].
func sampleSummary(t *testing.T) (summary, skipList) {
	t.Helper()
	j, err := readJUnit(filepath.Join("testdata", "junit.xml"))
	if err != nil {
		t.Fatal(err)
	}
	list, err := loadSkips(filepath.Join("testdata", "skips.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return summarize(j, regexp.MustCompile(`\[NodeConformance\]`).MatchString, list), list
}

func TestSummarize(t *testing.T) {
	s, _ := sampleSummary(t)
	names := func(os []outcome) (n []string) {
		for _, o := range os {
			n = append(n, o.Name)
		}
		return n
	}
	if got := names(s.Passed); len(got) != 1 || got[0] != "[sig-node] Pods should get a host IP [NodeConformance] [Conformance]" {
		t.Errorf("passed %q", got)
	}
	if len(s.Failed) != 1 || !strings.HasPrefix(s.Failed[0].Name, "[sig-node] Container Runtime blackbox test") ||
		s.Failed[0].Why != "[FAILED] Timed out after 300.000s." {
		t.Errorf("failed %+v: want the blackbox spec with its first line", s.Failed)
	}
	// The Deployment spec is outside the focus; the sysctl spec is on the
	// list, the seccomp one skipped by the suite itself, with its reason.
	if len(s.Listed) != 1 || !strings.HasPrefix(s.Listed[0].Name, "[sig-node] Sysctls") || s.Listed[0].Why != "an example entry for the test" {
		t.Errorf("listed %+v", s.Listed)
	}
	if len(s.Skipped) != 1 || !strings.Contains(s.Skipped[0].Why, "Only supported for providers") {
		t.Errorf("skipped %+v", s.Skipped)
	}
	if len(s.Setup) != 0 {
		t.Errorf("setup %+v: the passed [SynchronizedBeforeSuite] is no failure", s.Setup)
	}
}

func TestSuiteNodeFailureCounts(t *testing.T) {
	const x = `<testsuites><testsuite name="s"><testcase name="[SynchronizedBeforeSuite]" status="failed"><failure message="[FAILED] no nodes are Ready"></failure></testcase></testsuite></testsuites>`
	j, err := parseJUnit(strings.NewReader(x), "x")
	if err != nil {
		t.Fatal(err)
	}
	s := summarize(j, nil, nil)
	if len(s.Setup) != 1 || s.Setup[0].Why != "[FAILED] no nodes are Ready" {
		t.Errorf("setup %+v: want the suite node's failure", s.Setup)
	}
}

func TestParseJUnitRefuses(t *testing.T) {
	for name, x := range map[string]string{"not xml": "garbage", "no suite": "<testsuites></testsuites>"} {
		if _, err := parseJUnit(strings.NewReader(x), "r.xml"); err == nil || !strings.Contains(err.Error(), "r.xml") {
			t.Errorf("%s: %v, want an error naming the file", name, err)
		}
	}
}

func TestSkipList(t *testing.T) {
	for name, c := range map[string]struct{ yaml, want string }{
		"no reason":   {"- name: a\n", "entry 1 (a): want a one-line reason"},
		"no name":     {"- reason: r\n", "entry 1: no name"},
		"repeated":    {"- {name: a, reason: r}\n- {name: a, reason: s}\n", `entries 1 and 2 both name "a"`},
		"unknown key": {"- {name: a, reason: r, why: x}\n", `unknown field "why"`},
		"two lines":   {"- {name: a, reason: \"r\\ns\"}\n", "want a one-line reason"},
	} {
		if _, err := parseSkips([]byte(c.yaml), "skips.yaml"); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "skips.yaml") {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	l, err := parseSkips([]byte("- {name: \"[sig-node] a.b (c) [X]\", reason: r}\n- {name: d, reason: s}\n"), "skips.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// What ginkgo matches: the suite's description, a space, the spec's
	// text (see TestNamesPatternAgainstSuite for e2e.test itself).
	re := regexp.MustCompile(l.pattern())
	for text, want := range map[string]bool{
		"Kubernetes e2e suite [sig-node] a.b (c) [X]":   true,
		"[sig-node] a.b (c) [X]":                        true,
		"Kubernetes e2e suite [sig-node] a.b (c) [X] y": false, // a longer name
		"Kubernetes e2e suite [sig-node] aXb (c) [X]":   false,
		"Kubernetes e2e suite x[sig-node] a.b (c) [X]":  false,
		"Kubernetes e2e suite d":                        true,
		"Kubernetes e2e suite ed":                       false,
	} {
		if re.MatchString(text) != want {
			t.Errorf("skip pattern %q on %q: want %v", l.pattern(), text, want)
		}
	}
	if p := skipList(nil).pattern(); p != "" {
		t.Errorf("an empty list's pattern is %q, want none", p)
	}
	if r, ok := l.reason("[sig-node] a.b (c) [X] [NodeConformance]"); !ok || r != "r" {
		t.Errorf("reason with ginkgo's labels appended: %q %v", r, ok)
	}
}

// TestDocGolden: docs/conformance.md's layout, from the sample report.
func TestDocGolden(t *testing.T) {
	s, list := sampleSummary(t)
	ri := runInfo{Date: time.Date(2026, 11, 28, 18, 0, 0, 0, time.UTC), Focus: `\[NodeConformance\]`, Nodes: 2, Procs: 4,
		Kubernetes: "v1.35.4", Image: "berth x, kernel 6.1", Wall: 312 * time.Second, ClusterReadySeconds: 250}
	var b bytes.Buffer
	writeDoc(&b, s, ri, list)
	writeSummary(&b, s, ri)
	golden := filepath.Join("testdata", "doc.golden")
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("the doc and summary differ from %s (go test -update rewrites it):\n%s", golden, b.String())
	}
}

func TestPrefixWriter(t *testing.T) {
	var b bytes.Buffer
	w := prefixed(&b, "e2e: ")
	for _, s := range []string{"one\ntw", "o\n", "three\nfour"} {
		if _, err := w.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.String(); got != "e2e: one\ne2e: two\ne2e: three\n" {
		t.Errorf("got %q: want whole lines, each behind the prefix, the partial one held", got)
	}
}

// TestRepoSkipList: the list make conformance reads loads, every entry
// with a name and a reason.
func TestRepoSkipList(t *testing.T) {
	l, err := loadSkips("skips.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l {
		if e.Name == "" || e.Reason == "" {
			t.Errorf("entry %+v", e)
		}
	}
	if p := l.pattern(); len(l) > 0 {
		if _, err := regexp.Compile(p); err != nil {
			t.Errorf("the list's --skip pattern does not compile: %v", err)
		}
	}
}
