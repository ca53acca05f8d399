package docs

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The checker's own tests: each check, fed a fixture with the fault it is
// for, must report that fault and nothing else.

func TestCheckLinksFindsBrokenOnes(t *testing.T) {
	got := CheckLinks(filepath.Join("testdata", "links"), []string{"README.md", "docs/page.md"})
	want := []string{
		`README.md:7: link "docs/missing.md": no file docs/missing.md`,
		`README.md:8: link "docs/page.md#no-such-heading": docs/page.md has no heading whose anchor is #no-such-heading`,
		`README.md:9: link "../../../etc/passwd": leads outside the repository`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("CheckLinks:\n got %q\nwant %q", got, want)
	}
	// The same fixture with the broken lines fixed passes: the check is
	// not merely noisy.
	if got := CheckLinks(filepath.Join("testdata", "links"), []string{"docs/page.md"}); len(got) != 0 {
		t.Errorf("a page whose links all resolve: %q", got)
	}
}

func TestAnchorsAreGitHubs(t *testing.T) {
	md := "# berth\n## Reading a node's boot: the console and boot.json\n## arm64 (Graviton)\n" +
		"## Make an AMI\n## Make an AMI\n### `berth check` --strict!\n```\n# not a heading\n```\n#nospace\n"
	got := Anchors(md)
	for _, a := range []string{"berth", "reading-a-nodes-boot-the-console-and-bootjson", "arm64-graviton", "make-an-ami", "make-an-ami-1", "berth-check---strict"} {
		if !got[a] {
			t.Errorf("no anchor %q in %v", a, got)
		}
	}
	if got["not-a-heading"] || got["nospace"] || len(got) != 6 {
		t.Errorf("anchors %v: want exactly the six headings'", got)
	}
}

func TestMakeTargetWithoutDocsFails(t *testing.T) {
	mk := read(t, "docs/testdata/make/Makefile")
	documented, rules := MakeTargets(map[string]string{"Makefile": mk})
	if !slices.Equal(documented, []string{"build", "keys"}) {
		t.Errorf("documented targets %v, want [build keys] (a block's later \"## word:\" line is prose)", documented)
	}
	for _, r := range []string{"build", "keys", "clean"} {
		if !rules[r] {
			t.Errorf("no rule %s in %v", r, rules)
		}
	}
	if rules["X"] {
		t.Errorf("a variable taken for a rule: %v", rules)
	}
	doc := read(t, "docs/testdata/make/testing.md")
	sec, ok := Section(doc, "make-targets")
	if !ok {
		t.Fatal("fixture has no make-targets section")
	}
	got := Compare("make target", documented, FirstColumn(sec), "add a row")
	if want := []string{"make target keys is in the code but not in the docs: add a row"}; !slices.Equal(got, want) {
		t.Errorf("Compare: got %q, want %q", got, want)
	}
	// A target the docs name that is gone.
	got = Compare("make target", []string{"build"}, []string{"build", "publish"}, "")
	if len(got) != 1 || !strings.Contains(got[0], "publish is in the docs but the code has none") {
		t.Errorf("a documented target that is gone: %q", got)
	}
	if m := MakeMentions(doc); !slices.Equal(m, []string{"build", "gone"}) {
		t.Errorf("MakeMentions %v, want [build gone]", m)
	}
}

func TestListedStringsResolvesConstants(t *testing.T) {
	root := filepath.Join("testdata", "listed")
	got, err := ListedStrings(root, "example.test/m", filepath.Join(root, "cmd", "cmd.go"), "knownKeys")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"berth.a", "berth.b", "berth.c"}) {
		t.Errorf("ListedStrings %v, want [berth.a berth.b berth.c]", got)
	}
	if _, err := ListedStrings(root, "example.test/m", filepath.Join(root, "cmd", "cmd.go"), "noSuchFunc"); err == nil {
		t.Error("a missing function gave no error")
	}
	// A key the code knows and the table lacks, and one the table names
	// that the code dropped.
	table := CmdlineKeys("| `berth.a=X` | ... |\n| `berth.b=Y`, `berth.gone=Z` | ... |")
	problems := Compare("key", got, table, "add a row")
	if len(problems) != 2 || !strings.Contains(problems[0], "berth.c is in the code but not in the docs") ||
		!strings.Contains(problems[1], "berth.gone is in the docs but the code has none") {
		t.Errorf("Compare: %q", problems)
	}
}

func TestCmdlineKeysAndBerthNames(t *testing.T) {
	if got := CmdlineKeys("`berth.ipv6=1`, `berth.net.timeout=5s`, registry.berth.test, berth.root"); !slices.Equal(got, []string{"berth.ipv6", "berth.net.timeout"}) {
		t.Errorf("CmdlineKeys %v", got)
	}
	if got := BerthNames("berth.dev/on-* and berth.dev/on- prefixes; berth.dev/sysctls, berth.dev/on-asg-termination."); !slices.Equal(got, []string{"berth.dev/sysctls", "berth.dev/on-asg-termination"}) {
		t.Errorf("BerthNames %v", got)
	}
}

func TestSectionRoundTrip(t *testing.T) {
	md := "a\n<!-- BEGIN t: note -->\n\nold\n\n<!-- END t -->\nz\n"
	if s, ok := Section(md, "t"); !ok || strings.TrimSpace(s) != "old" {
		t.Errorf("Section %q %v", s, ok)
	}
	got, err := ReplaceSection(md, "t", "new\nrows")
	if err != nil {
		t.Fatal(err)
	}
	if want := "a\n<!-- BEGIN t: note -->\n\nnew\nrows\n\n<!-- END t -->\nz\n"; got != want {
		t.Errorf("ReplaceSection:\n%q\nwant\n%q", got, want)
	}
	if _, err := ReplaceSection(md, "u", "x"); err == nil {
		t.Error("a missing section gave no error")
	}
}

func TestDatePattern(t *testing.T) {
	// The dates are built, so that this file holds none itself.
	date := strings.Join([]string{"2026", "11", "29"}, "-")
	for s, want := range map[string]bool{"run " + date + " here": true, "1.26-1.36 cores": false, "v1.35.4": false, "x" + date: false} {
		if got := datePattern.MatchString(s); got != want {
			t.Errorf("datePattern on %q: %v, want %v", s, got, want)
		}
	}
}
