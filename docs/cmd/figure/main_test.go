package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/docs/figures"
)

const doc = `# Testing

<!-- BEGIN timings: written by docs/cmd/figure -->

| what | written by | last run |
|---|---|---|
| lint | make lint | 2.0 min, CPU 3.0 min |
| test | make test | 60.0 min, CPU 100.0 min, warm |

<!-- END timings -->
`

func writeDoc(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "testing.md")
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func lastCell(t *testing.T, path, key string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sec, ok := figures.Section(string(b), "timings")
	if !ok {
		t.Fatalf("no timings section in:\n%s", b)
	}
	for _, r := range figures.Rows(sec) {
		if r.Key() == key {
			return r.Cells[len(r.Cells)-1]
		}
	}
	t.Fatalf("no row %q in:\n%s", key, sec)
	return ""
}

// A command that succeeds has its times written into its row, and only
// there; one that fails writes nothing and its status is figure's.
func TestRunWritesOnSuccessOnly(t *testing.T) {
	p := writeDoc(t)
	missing := filepath.Join(t.TempDir(), "no-build")
	if code := cli([]string{"-doc", p, "-row", "test", "-cold-if-absent", missing, "--", "sh", "-c", "sleep 0.2"}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	got := lastCell(t, p, "test")
	if !regexp.MustCompile(`^[0-9]+ s, CPU [0-9]+ s, cold$`).MatchString(got) {
		t.Errorf("test row's figure %q: want \"N s, CPU N s, cold\"", got)
	}
	if l := lastCell(t, p, "lint"); l != "2.0 min, CPU 3.0 min" {
		t.Errorf("the lint row changed: %q", l)
	}

	before, _ := os.ReadFile(p)
	if code := cli([]string{"-doc", p, "-row", "lint", "--", "sh", "-c", "exit 3"}); code != 3 {
		t.Errorf("a command exiting 3: figure exited %d", code)
	}
	after, _ := os.ReadFile(p)
	if string(before) != string(after) {
		t.Errorf("a failed command changed the doc:\n%s", after)
	}
}

func TestSetAndErrors(t *testing.T) {
	p := writeDoc(t)
	if code := cli([]string{"-doc", p, "-row", "lint", "-set", "1.5 min, CPU 2.5 min"}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if l := lastCell(t, p, "lint"); l != "1.5 min, CPU 2.5 min" {
		t.Errorf("lint row after -set: %q", l)
	}
	for _, args := range [][]string{
		{"-doc", p, "-row", "nosuch", "-set", "1 s"},
		{"-doc", p, "-row", "lint", "-set", "a | b"},
		{"-doc", p, "-row", "lint"},
		{"-doc", p, "-row", "lint", "-set", "1 s", "--", "true"},
		{"-doc", filepath.Join(t.TempDir(), "none.md"), "-row", "lint", "-set", "1 s"},
	} {
		if code := cli(args); code != 2 {
			t.Errorf("figure %s: exit %d, want 2", strings.Join(args, " "), code)
		}
	}
}

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		wall, cpu time.Duration
		want      string
	}{
		{42 * time.Second, 70 * time.Second, "42 s, CPU 1.2 min"},
		{61*time.Minute + 30*time.Second, 2 * time.Hour, "61.5 min, CPU 120.0 min"},
	} {
		if got := Format(c.wall, c.cpu); got != c.want {
			t.Errorf("Format(%s, %s) = %q, want %q", c.wall, c.cpu, got, c.want)
		}
	}
}

func TestDryRunWritesNothing(t *testing.T) {
	p := writeDoc(t)
	t.Setenv("MAKEFLAGS", "n --no-print-directory")
	before, _ := os.ReadFile(p)
	if code := cli([]string{"-doc", p, "-row", "lint", "--", "true"}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	after, _ := os.ReadFile(p)
	if string(before) != string(after) {
		t.Errorf("make -n wrote a figure:\n%s", after)
	}
	for flags, want := range map[string]bool{"": false, " -- X=1": false, "-j2": false, "rRn": true, "q": true, "s --no-print-directory": false} {
		if got := dryRun(flags); got != want {
			t.Errorf("dryRun(%q) = %v, want %v", flags, got, want)
		}
	}
}
