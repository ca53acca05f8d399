package figures

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const md = `intro

<!-- BEGIN timings: written by the commands -->

| what | by | last run |
|---|---|---|
| lint | ` + "`make lint`" + ` | 2.0 min |
| demo | ` + "`make demo`" + ` | 1 s |

<!-- END timings -->

<!-- BEGIN other -->
| what | last |
|---|---|
| lint | untouched |
<!-- END other -->
`

func TestSetLastTouchesOneCell(t *testing.T) {
	out, err := SetLast(md, "timings", "lint", "1.5 min, CPU 2.0 min")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(md, "| lint | `make lint` | 2.0 min |", "| lint | `make lint` | 1.5 min, CPU 2.0 min |", 1)
	if out != want {
		t.Errorf("SetLast:\n%s\nwant:\n%s", out, want)
	}
	sec, _ := Section(out, "other")
	if !strings.Contains(sec, "| lint | untouched |") {
		t.Errorf("another section's row of the same key changed:\n%s", sec)
	}
	rows := Rows(mustSection(t, out, "timings"))
	if len(rows) != 2 || rows[0].Key() != "lint" || rows[1].Key() != "demo" || rows[0].Cells[2] != "1.5 min, CPU 2.0 min" {
		t.Errorf("rows after SetLast: %+v", rows)
	}
}

func mustSection(t *testing.T, md, name string) string {
	t.Helper()
	s, ok := Section(md, name)
	if !ok {
		t.Fatalf("no section %s", name)
	}
	return s
}

func TestSetLastErrorsNameWhatIsWrong(t *testing.T) {
	dup := strings.Replace(md, "| demo |", "| lint |", 1)
	for _, c := range []struct {
		md, section, key, value, want string
	}{
		{md, "nosuch", "lint", "1 s", `no section "nosuch"`},
		{md, "timings", "nosuch", "1 s", `no row keyed "nosuch"`},
		{md, "timings", "lint", "1 | 2", "cannot hold"},
		{dup, "timings", "lint", "1 s", `two rows keyed "lint"`},
	} {
		_, err := SetLast(c.md, c.section, c.key, c.value)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("SetLast(%s, %s, %q): %v, want an error with %q", c.section, c.key, c.value, err, c.want)
		}
	}
}

func TestReplaceSection(t *testing.T) {
	out, err := ReplaceSection(md, "other", "new body")
	if err != nil {
		t.Fatal(err)
	}
	if got := mustSection(t, out, "other"); got != "\nnew body\n\n" {
		t.Errorf("section after ReplaceSection: %q", got)
	}
	if mustSection(t, out, "timings") != mustSection(t, md, "timings") {
		t.Error("ReplaceSection touched another section")
	}
	if _, err := ReplaceSection(md, "nosuch", "x"); err == nil {
		t.Error("ReplaceSection of a missing section: no error")
	}
}

func TestUpdateKeepsModeAndLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "doc.md")
	if err := os.WriteFile(p, []byte(md), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := Update(p, func(s string) (string, error) { return SetLast(s, "timings", "demo", "2 s") }); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if !strings.Contains(string(b), "| demo | `make demo` | 2 s |") {
		t.Errorf("doc after Update:\n%s", b)
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o640 {
		t.Errorf("mode after Update: %v, want 0640", st.Mode().Perm())
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("files left beside the doc: %v", ents)
	}
	err := Update(p, func(s string) (string, error) { return SetLast(s, "timings", "nosuch", "1 s") })
	if err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("a failed edit: %v, want an error naming %s", err, p)
	}
}

func FuzzSetLast(f *testing.F) {
	f.Add(md, "timings", "lint", "3 s")
	f.Add("<!-- BEGIN x\n| a | b |\n|--|--|\n| k | v |\n<!-- END x -->", "x", "k", "w")
	f.Fuzz(func(t *testing.T, doc, section, key, value string) {
		out, err := SetLast(doc, section, key, value)
		if err != nil {
			return
		}
		// What is outside the section never changes.
		start := strings.Index(doc, "<!-- BEGIN "+section)
		if start < 0 || out[:start] != doc[:start] {
			t.Fatalf("text before the section changed")
		}
		if _, ok := Section(out, section); !ok {
			t.Fatalf("the section is gone after SetLast")
		}
	})
}
