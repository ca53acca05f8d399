package docs

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/berth-node/berth/config/al2"
	"github.com/berth-node/berth/config/bottlerocket"
	"github.com/berth-node/berth/config/cmdline"
	"github.com/berth-node/berth/config/fate"
	"github.com/berth-node/berth/docs/figures"
)

var update = flag.Bool("update", false, "rewrite the generated sections of docs/*.md from the code")

const module = "github.com/berth-node/berth"

// root is the repository: this package is its docs/ folder.
const root = ".."

// pages are the Markdown files the checks read, relative to root.
func pages(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	m, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range m {
		files = append(files, filepath.ToSlash(strings.TrimPrefix(f, root+string(filepath.Separator))))
	}
	if len(files) < 8 {
		t.Fatalf("only %d pages found (%v); the glob looks wrong", len(files), files)
	}
	return files
}

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// allDocs is every page's text, joined.
func allDocs(t *testing.T) string {
	var b strings.Builder
	for _, p := range pages(t) {
		b.WriteString(read(t, p))
		b.WriteString("\n")
	}
	return b.String()
}

func report(t *testing.T, problems []string) {
	t.Helper()
	for _, p := range problems {
		t.Error(p)
	}
}

// section returns a named section of a page, failing the test when the
// page has none.
func section(t *testing.T, page, name string) string {
	t.Helper()
	s, ok := Section(read(t, page), name)
	if !ok {
		t.Fatalf("%s has no section %s (<!-- BEGIN %s ... --> ... <!-- END %s -->)", page, name, name, name)
	}
	return s
}

func TestLinksResolve(t *testing.T) {
	report(t, CheckLinks(root, pages(t)))
}

// The lists the code owns, each checked against the docs the same way:
// the names the code knows, the names the page's section gives, and what
// to do about a difference.
func TestMakeTargetsAreDocumented(t *testing.T) {
	makefiles := map[string]string{"Makefile": read(t, "Makefile"), "components.mk": read(t, "components.mk")}
	documented, rules := MakeTargets(makefiles)
	if len(documented) < 30 || !slices.Contains(documented, "test") || !slices.Contains(documented, "demo") {
		t.Fatalf("only %d \"## target:\" comments found (%v); the parse looks wrong", len(documented), documented)
	}
	for _, d := range documented {
		if !rules[d] {
			t.Errorf("Makefile comment \"## %s:\" documents a target no rule defines", d)
		}
	}
	table := FirstColumn(section(t, "docs/testing.md", "make-targets"))
	report(t, Compare("make target", documented, table,
		"add a row | `NAME` | what it does | to the make-targets table in docs/testing.md"))
	for _, p := range pages(t) {
		for _, m := range MakeMentions(read(t, p)) {
			if !rules[m] && !slices.Contains(documented, m) {
				t.Errorf("%s names `make %s`, which Makefile and components.mk do not define", p, m)
			}
		}
	}
	// make help prints the same set, from the same comments.
	cmd := exec.Command("make", "--no-print-directory", "-s", "help")
	cmd.Dir = root
	// Run from make test's own make, the child must not join its jobserver.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(e string) bool {
		return strings.HasPrefix(e, "MAKEFLAGS=") || strings.HasPrefix(e, "MFLAGS=") || strings.HasPrefix(e, "MAKELEVEL=")
	})
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make help: %v\n%s", err, out)
	}
	var helped []string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); strings.HasPrefix(l, "  ") && len(f) > 1 {
			helped = append(helped, f[0])
		}
	}
	for _, p := range Compare("make help line", documented, helped, "tools/make-help.awk misses it") {
		t.Error(p)
	}
}

func TestCmdlineKeysAreDocumented(t *testing.T) {
	code, err := ListedStrings(root, module, filepath.Join(root, "config", "cmdline", "cmdline.go"), "knownKeys")
	if err != nil {
		t.Fatal(err)
	}
	if len(code) < 10 || !slices.Contains(code, "berth.onfail") {
		t.Fatalf("config/cmdline's knownKeys resolved to %v; the parse looks wrong", code)
	}
	// The keys read from the source are the ones the parser knows.
	unknown := func(k string) bool {
		_, warns := cmdline.Decode(cmdline.Parse(k + "=x"))
		return slices.ContainsFunc(warns, func(w string) bool { return strings.Contains(w, "unknown kernel command line key") })
	}
	if !unknown("berth.nosuchkey") {
		t.Fatal("cmdline.Decode no longer warns of an unknown key; this check needs another way to ask")
	}
	for _, k := range code {
		if unknown(k) {
			t.Errorf("knownKeys lists %s but Decode calls it unknown", k)
		}
	}
	table := CmdlineKeys(section(t, "docs/user-data.md", "cmdline-keys"))
	report(t, Compare("kernel command line key", code, table,
		"add a row for it to the cmdline-keys table in docs/user-data.md"))
	for _, k := range uniq(CmdlineKeys(allDocs(t))) {
		if !slices.Contains(code, k) {
			t.Errorf("the docs name %s=, which berth does not read (it would draw the unknown-key warning)", k)
		}
	}
}

// TestBerthNamesAreDocumented: every berth.dev/ name (annotation or
// label) in the node's code is named in the docs, and every one the docs
// name is in the code.
func TestBerthNamesAreDocumented(t *testing.T) {
	var code []string
	fset := token.NewFileSet()
	for _, dir := range []string{"config", "init", "mounts", "network", "runtime", "internal", "update", "rollout"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, p, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil {
						code = append(code, BerthNames(s)...)
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Contains(code, "berth.dev/registry-mirrors") || !slices.Contains(code, "berth.dev/on-spot-interruption") {
		t.Fatalf("berth.dev/ names found in the code: %v; the walk looks wrong", uniq(code))
	}
	report(t, Compare("berth.dev/ name", code, BerthNames(allDocs(t)),
		"say what it does in docs/user-data.md (\"berth's annotations\"), or where it is a label, where it is set"))
}

// tableCheck holds a page's generated table to the rows the code's table
// gives, or with -update writes them.
func tableCheck(t *testing.T, page, name, header string, rows []string, keyPrefix string) {
	t.Helper()
	if *update {
		md, err := ReplaceSection(read(t, page), name, header+"\n"+strings.Join(rows, "\n"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, page), []byte(md), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, l := range strings.Split(section(t, page, name), "\n") {
		if strings.HasPrefix(l, "| `"+keyPrefix) {
			got = append(got, l)
		}
	}
	keys := func(rows []string) []string { return FirstColumn(strings.Join(rows, "\n")) }
	report(t, Compare(name+" row", keys(rows), keys(got), "run go test ./docs -update"))
	if len(got) == len(rows) {
		for i := range rows {
			if got[i] != rows[i] {
				t.Errorf("%s, %s row %d differs from the code's table (go test ./docs -update rewrites it):\n got %s\nwant %s", page, name, i+1, got[i], rows[i])
			}
		}
	}
}

func TestBottlerocketSettingsTable(t *testing.T) {
	var rows []string
	for _, s := range bottlerocket.Table {
		rows = append(rows, fate.Row(s.Key, s.Fate, s.Why))
	}
	if len(rows) < 50 {
		t.Fatalf("bottlerocket.Table has %d rows", len(rows))
	}
	tableCheck(t, "docs/user-data.md", "bottlerocket-settings", "| setting | fate | how |\n|---|---|---|", rows, "settings.")
}

func TestAL2OptionsTable(t *testing.T) {
	var rows []string
	for _, o := range al2.Table {
		rows = append(rows, fate.Row(o.Name, o.Fate, o.Why))
	}
	if len(rows) < 10 {
		t.Fatalf("al2.Table has %d rows", len(rows))
	}
	tableCheck(t, "docs/user-data.md", "al2-options", "| option | fate | how |\n|---|---|---|", rows, "--")
}

// TestNoDatesInDocs: the docs say what is, not when it was; the dated
// record of each conformance run is the one exception (make conformance
// writes it).
func TestNoDatesInDocs(t *testing.T) {
	for _, p := range pages(t) {
		if strings.HasPrefix(p, "docs/conformance") {
			continue
		}
		for i, l := range strings.Split(read(t, p), "\n") {
			if d := datePattern.FindString(l); d != "" {
				t.Errorf("%s:%d: a date (%s): say what is, and leave when to git", p, i+1, d)
			}
		}
	}
}

// TestREADMEKeepsTheTestCommand: CI runs `make test` (.ci/run) because
// the README says so; the README must go on saying it.
func TestREADMEKeepsTheTestCommand(t *testing.T) {
	readme := read(t, "README.md")
	if !strings.Contains(readme, "\nmake test ") {
		t.Error("README.md no longer shows `make test` in its commands block")
	}
	if ci := read(t, ".ci/run"); !strings.Contains(ci, "exec make test\n") {
		t.Errorf(".ci/run no longer runs make test:\n%s", ci)
	}
	if n := strings.Count(readme, "\n"); n > 250 {
		t.Errorf("README.md has %d lines; it is the front door (about 200 at most): move reference into docs/", n)
	}
}

// TestFiguresHaveWriters: every figure in docs/testing.md's timings table
// is written by a make target (`$(FIGURE) -row KEY` in a recipe, through
// docs/cmd/figure) and every such target has its row, so no figure there
// is typed by hand and left to age. The README's demo timeline is make
// demo's (-readme).
func TestFiguresHaveWriters(t *testing.T) {
	makefile := read(t, "Makefile") + read(t, "components.mk")
	var written []string
	for _, m := range regexp.MustCompile(`\$\(FIGURE\) -row ([A-Za-z0-9_-]+)`).FindAllStringSubmatch(makefile, -1) {
		written = append(written, m[1])
	}
	if len(written) < 6 {
		t.Fatalf("only %d $(FIGURE) -row writers in the Makefile (%v); the parse looks wrong", len(written), written)
	}
	var rows []string
	for _, r := range figures.Rows(section(t, "docs/testing.md", "timings")) {
		rows = append(rows, r.Key())
	}
	report(t, Compare("timings row", uniq(written), rows,
		"give each $(FIGURE) -row KEY a row | KEY | written by | last run | in docs/testing.md's timings table, and each row a writer"))
	if !strings.Contains(makefile, "-readme README.md") {
		t.Error("make demo no longer writes the README's timeline (-readme README.md)")
	}
	section(t, "README.md", "demo-timeline")
}
