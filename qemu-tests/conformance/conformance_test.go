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

	"github.com/berth-node/berth/internal/golden"
)

var update = flag.Bool("update", false, "rewrite testdata's golden files")

// sampleSummary is testdata's ginkgo report summarized with testdata's
// skip list, focused on [NodeConformance].
func sampleSummary(t *testing.T) (summary, skipList) {
	t.Helper()
	j, list := sampleReport(t)
	return summarize(j, regexp.MustCompile(`\[NodeConformance\]`).MatchString, list), list
}

// sampleReport is testdata's JUnit report and skip list.
func sampleReport(t *testing.T) (junitSuites, skipList) {
	t.Helper()
	j, err := readJUnit(filepath.Join("testdata", "junit.xml"))
	if err != nil {
		t.Fatal(err)
	}
	list, err := loadSkips(filepath.Join("testdata", "skips.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return j, list
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

// TestNotReached: when ginkgo's --timeout ends a run, the spec then
// running is "timedout" and every spec it never started is "skipped" with
// no reason. Those are counted as not reached, apart from the suite's own
// run-time skips (which say why), and a spec the run's -skip left out is
// no result at all.
func TestNotReached(t *testing.T) {
	const x = `<testsuites><testsuite name="s">
<testcase name="[It] [sig-apps] ran [Conformance] [sig-apps, Conformance]" status="passed"></testcase>
<testcase name="[It] [sig-apps] cut [Conformance] [sig-apps, Conformance]" status="timedout"><failure message="A suite timeout occurred"></failure></testcase>
<testcase name="[It] [sig-apps] later [Conformance] [sig-apps, Conformance]" status="skipped"><skipped message="skipped"></skipped></testcase>
<testcase name="[It] [sig-apps] interrupted [Conformance] [sig-apps, Conformance]" status="interrupted"><failure message="Interrupted by User"></failure></testcase>
<testcase name="[It] [sig-node] gce only [Conformance] [sig-node, Conformance]" status="skipped"><skipped message="skipped - Only supported for providers [gce]"></skipped></testcase>
<testcase name="[It] [sig-node] node [NodeConformance] [Conformance] [sig-node, NodeConformance, Conformance]" status="skipped"><skipped message="skipped"></skipped></testcase>
<testcase name="[It] [sig-node] not conformance [sig-node]" status="skipped"><skipped message="skipped"></skipped></testcase>
</testsuite></testsuites>`
	j, err := parseJUnit(strings.NewReader(x), "x")
	if err != nil {
		t.Fatal(err)
	}
	asked := notSkipped(regexp.MustCompile(`\[Conformance\]`).MatchString, regexp.MustCompile(`\[NodeConformance\]`))
	s := summarize(j, asked, nil)
	if len(s.Passed) != 1 || len(s.Failed) != 1 || s.Failed[0].Why != "A suite timeout occurred" {
		t.Errorf("passed %+v, failed %+v: want one each, the cut spec's first line its reason", s.Passed, s.Failed)
	}
	// A spec an interrupt cut short did not end either: not reached,
	// not a failure of berth's.
	if len(s.NotReached) != 2 || !strings.Contains(s.NotReached[0].Name, "interrupted") || s.NotReached[0].Why != "Interrupted by User" || !strings.Contains(s.NotReached[1].Name, "later") {
		t.Errorf("not reached %+v: want the interrupted spec and the one after the cut, not the -skip'd [NodeConformance] one", s.NotReached)
	}
	if len(s.Skipped) != 1 || !strings.Contains(s.Skipped[0].Why, "Only supported for providers") {
		t.Errorf("skipped %+v: want the suite's own skip, with its reason", s.Skipped)
	}
	var sum bytes.Buffer
	writeSummary(&sum, s, runInfo{Focus: `\[Conformance\]`, Nodes: 2})
	if want := "1 passed, 1 failed, 1 skipped by the suite, 0 skipped by berth's list, 2 not reached"; !strings.Contains(sum.String(), want) {
		t.Errorf("summary %q: want %q", sum.String(), want)
	}
	if err := (subset{{Name: "[sig-apps] later [Conformance]"}}).check(s, nil); err == nil || !strings.Contains(err.Error(), "not reached") {
		t.Errorf("subset check: %v: want the spec named as not reached", err)
	}
}

// TestFocusAsked: a focus anchored at the end of the spec's text, as
// namesPattern writes one, still finds the JUnit case whose name has
// ginkgo's labels after the text; an unanchored one finds it as before.
func TestFocusAsked(t *testing.T) {
	const c = "[It] [sig-network] Services should serve a basic endpoint from pods [Conformance] [sig-network, Conformance]"
	for _, f := range []string{namesPattern([]string{"[sig-network] Services should serve a basic endpoint from pods [Conformance]"}), `\[Conformance\]`, `basic endpoint`} {
		if !focusAsked(regexp.MustCompile(f))(c) {
			t.Errorf("focus %q does not ask for %q", f, c)
		}
	}
	for _, f := range []string{namesPattern([]string{"[sig-network] Services should serve"}), `\[NodeConformance\]`} {
		if focusAsked(regexp.MustCompile(f))(c) {
			t.Errorf("focus %q asks for %q", f, c)
		}
	}
	// A -skip of whole names leaves out what it names, as ginkgo did.
	byName := regexp.MustCompile(namesPattern([]string{"[sig-network] Services should serve a basic endpoint from pods [Conformance]"}))
	if notSkipped(func(string) bool { return true }, byName)(c) {
		t.Errorf("-skip %q still asks for %q", byName, c)
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

// TestDocGolden: docs/conformance.md's layout, from the sample report,
// written over a doc holding a [NodeConformance] run (docs/conformance.md
// of 2026-11-29), which stays as that focus's section.
func TestDocGolden(t *testing.T) {
	s, list := sampleSummary(t)
	ri := runInfo{Date: time.Date(2026, 11, 28, 18, 0, 0, 0, time.UTC), Focus: `\[Conformance\]`, Nodes: 2, Procs: 4,
		Kubernetes: "v1.35.4", Image: "berth x, kernel 6.1", Wall: 312 * time.Second, ClusterReadySeconds: 250}
	before, err := os.ReadFile(filepath.Join("testdata", "doc-previous.md"))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	writeDoc(&b, s, ri, list, before)
	writeSummary(&b, s, ri)
	goldenPath := filepath.Join("testdata", "doc.golden")
	golden.Check(t, goldenPath, b.Bytes(), *update)
}

// A run replaces its own focus's section and keeps the others as they
// were; the same run written twice gives the same doc.
func TestDocKeepsOtherFocuses(t *testing.T) {
	s, list := sampleSummary(t)
	conf := runInfo{Date: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC), Focus: `\[Conformance\]`, Nodes: 2, Procs: 2,
		Kubernetes: "v1.35.4", Image: "berth y", Wall: time.Hour, ClusterReadySeconds: 150}
	node := conf
	node.Focus, node.Nodes, node.Image = `\[NodeConformance\]|a|b`, 1, "berth z"
	var first, second, third bytes.Buffer
	writeDoc(&first, s, conf, list, nil)
	writeDoc(&second, s, node, list, first.Bytes())
	writeDoc(&third, s, node, list, second.Bytes())
	if !bytes.Equal(second.Bytes(), third.Bytes()) {
		t.Errorf("writing the same run again changed the doc:\n%s\nthen\n%s", second.Bytes(), third.Bytes())
	}
	doc := second.String()
	ci, ni := strings.Index(doc, "## Latest run: `\\[Conformance\\]`"), strings.Index(doc, "## Latest run: `\\[NodeConformance\\]\\|a\\|b`")
	if ci < 0 || ni < 0 || ci > ni {
		t.Fatalf("want the [Conformance] section, then the [NodeConformance] one:\n%s", doc)
	}
	if !strings.Contains(doc[ci:ni], "| node image | berth y |") || !strings.Contains(doc[ni:], "| node image | berth z |") {
		t.Errorf("each section should hold its own run:\n%s", doc)
	}
	if n := strings.Count(doc, "## Skipped by name"); n != 1 {
		t.Errorf("%d skip-list sections, want 1", n)
	}
	conf.Image = "berth w"
	var fourth bytes.Buffer
	writeDoc(&fourth, s, conf, list, second.Bytes())
	if d := fourth.String(); strings.Contains(d, "berth y") || !strings.Contains(d, "berth w") || !strings.Contains(d, "berth z") {
		t.Errorf("a new [Conformance] run should replace that section only:\n%s", d)
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

// An empty focus would have ginkgo run the whole suite: refused before
// anything starts.
func TestRunRefusesEmptyFocus(t *testing.T) {
	o := options{cluster: "c", e2eDir: "e", kubectl: "k", repoList: "r", e2eImages: "i",
		skips: filepath.Join("testdata", "skips.yaml"), out: t.TempDir(), focus: " \n"}
	var out bytes.Buffer
	if err := run(t.Context(), o, &out); err == nil || !strings.Contains(err.Error(), "-focus is empty") {
		t.Errorf("run with an empty focus: %v, want it refused", err)
	}
}
