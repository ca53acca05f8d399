package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/internal/golden"
)

func TestParseSelectionRefuses(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"empty", " \n", "the selection is empty"},
		{"no title", "focus: a\n", "title: want one line"},
		{"two-line title", "title: \"a\\nb\"\nfocus: a\n", "title: want one line"},
		{"no focus", "title: t\n", "focus: empty"},
		{"focus not a pattern", "title: t\nfocus: '[a'\n", `focus "[a"`},
		{"unknown field", "title: t\nfocus: a\nskip: b\n", `unknown field "skip"`},
		{"rule without pattern", "title: t\nfocus: a\nexclude:\n- reason: r\n", "exclude[0]: no pattern"},
		{"rule without reason", "title: t\nfocus: a\nexclude:\n- pattern: b\n", "exclude[0] (b): want a one-line reason"},
		{"rule not a pattern", "title: t\nfocus: a\nexclude:\n- {pattern: 'x', reason: r}\n- {pattern: '(b', reason: r}\n", `exclude[1]: pattern "(b"`},
		{"rule twice", "title: t\nfocus: a\nexclude:\n- {pattern: b, reason: r}\n- {pattern: b, reason: s}\n", "exclude[1]: the same pattern as exclude[0]"},
	} {
		_, err := parseSelection([]byte(c.yaml), "sel.yaml")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "sel.yaml") {
			t.Errorf("%s: %v, want an error naming sel.yaml and %q", c.name, err, c.want)
		}
	}
}

var selectionListed = []string{
	"[sig-node] Pods should run [NodeConformance] [Conformance]",
	"[sig-node] Probing should restart",
	"[sig-network] Services should serve [Conformance]",
	"[sig-network] Services should drain [Serial]",
	"[sig-node] Resize should grow [Serial] [Slow]",
	"[sig-storage] Volumes should mount",
	"[sig-network] DNS should resolve",
}

// resolve keeps the focus's specs no rule takes out, in the listing's
// order, and counts each taken out spec once, by the first rule.
func TestResolveSelection(t *testing.T) {
	s, err := parseSelection([]byte(`title: node and network
focus: '^\[sig-(node|network)\] '
exclude:
  - {pattern: '\[(Conformance|NodeConformance)\]', reason: own sections}
  - {pattern: '\[Serial\]', reason: serial}
  - {pattern: '\[Slow\]', reason: slow}
`), "sel.yaml")
	if err != nil {
		t.Fatal(err)
	}
	names, info, err := s.resolve(selectionListed, "sel.yaml")
	if err == nil {
		t.Fatalf("the [Slow] rule takes out nothing [Serial] left, yet resolve kept %q", names)
	}
	if !strings.Contains(err.Error(), `the rule "\\[Slow\\]" takes out none`) {
		t.Errorf("error %v should name the rule that took out nothing", err)
	}
	s.Exclude = s.Exclude[:2]
	names, info, err = s.resolve(selectionListed, "sel.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"[sig-node] Probing should restart", "[sig-network] DNS should resolve"}
	if !slices.Equal(names, want) {
		t.Errorf("kept %q, want %q", names, want)
	}
	if info.Matched != 6 || info.Kept != 2 || info.Rules[0].Specs != 2 || info.Rules[1].Specs != 2 || info.File != "sel.yaml" {
		t.Errorf("info %+v: want 6 matched, 2 kept, 2 taken out by each rule", info)
	}
	s.Exclude = append(s.Exclude, selectionRule{Pattern: "should", Reason: "all"})
	if _, _, err := s.resolve(selectionListed, "sel.yaml"); err == nil || !strings.Contains(err.Error(), "its rules leave none of the 6 specs") {
		t.Errorf("a selection that keeps nothing: %v", err)
	}
}

// TestRepoSelection: make conformance SELECTION=qemu-tests/conformance/wider.yaml
// loads; TestWiderAgainstSuite holds it to e2e.test's listing.
func TestRepoSelection(t *testing.T) {
	s, err := loadSelection("wider.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Exclude) == 0 {
		t.Errorf("wider.yaml has no rule: every [Conformance] spec would run again in it")
	}
}

// TestDocSelectionGolden: a selection's section is named for its file,
// says what it runs, and a second run of it replaces it.
func TestDocSelectionGolden(t *testing.T) {
	s, list := sampleSummary(t)
	ri := runInfo{Date: time.Date(2026, 12, 3, 16, 0, 0, 0, time.UTC), Focus: `(?:^|\s)(?:a|b)$`, Nodes: 2, Procs: 2,
		Kubernetes: "v1.35.4", Image: "berth x, kernel 6.1", Wall: 50 * time.Minute, ClusterReadySeconds: 270,
		Selection: &selectionInfo{File: "qemu-tests/conformance/wider.yaml", Title: "node | network", Focus: `^\[sig-(node|network)\] `, Matched: 853, Kept: 245,
			Rules: []ruleCount{{selectionRule{`\[(Conformance|NodeConformance)\]`, "own sections"}, 344}, {selectionRule{`\[DRA\]`, "no driver image"}, 21}}}}
	before, err := os.ReadFile(filepath.Join("testdata", "doc-previous.md"))
	if err != nil {
		t.Fatal(err)
	}
	var first, again bytes.Buffer
	writeDoc(&first, s, ri, list, before)
	ri.Image = "berth y"
	writeDoc(&again, s, ri, list, first.Bytes())
	if d := again.String(); strings.Contains(d, "berth x") || strings.Count(d, "## Latest run: `qemu-tests/conformance/wider.yaml`") != 1 {
		t.Errorf("a second run of the selection should replace its section:\n%s", d)
	}
	writeSummary(&first, s, ri)
	golden.Check(t, filepath.Join("testdata", "doc-selection.golden"), first.Bytes(), *update)
}

func FuzzParseSelection(f *testing.F) {
	b, err := os.ReadFile("wider.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte("title: t\nfocus: a\nexclude:\n- {pattern: b, reason: r}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := parseSelection(b, "f.yaml")
		if err != nil {
			return
		}
		// Whatever parses resolves without a panic, and keeps only specs
		// its focus matches.
		names, _, err := s.resolve(selectionListed, "f.yaml")
		if err == nil && len(names) == 0 {
			t.Errorf("resolved to no spec without an error")
		}
	})
}
