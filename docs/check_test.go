// Package docs holds berth's user documentation and, in its tests, the
// checks that keep it true: every relative link and anchor resolves, and
// the lists the code owns (make targets, kernel command line keys,
// berth.dev/ names, Bottlerocket settings, bootstrap.sh options) are named
// in the docs exactly as the code knows them.
package docs

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/berth-node/berth/docs/figures"
)

// The checker: pure functions over file contents, so that testdata
// fixtures can show each one catching what it is for.

// prose returns md's lines with fenced code blocks blanked (a fence's
// contents are not links or headings), keeping line numbers.
func prose(md string) []string {
	lines := strings.Split(md, "\n")
	out := make([]string, len(lines))
	fence := ""
	for i, l := range lines {
		t := strings.TrimLeft(l, " ")
		if fence == "" && (strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~")) {
			fence = t[:3]
			continue
		}
		if fence != "" {
			if strings.HasPrefix(t, fence) {
				fence = ""
			}
			continue
		}
		out[i] = l
	}
	return out
}

var codeSpan = regexp.MustCompile("`+[^`]*`+")

// Anchors returns the GitHub anchors of md's headings: lower case, every
// character but letters, digits, blanks, '-' and '_' dropped, blanks made
// '-', and a repeated anchor suffixed -1, -2, ... as GitHub does.
func Anchors(md string) map[string]bool {
	seen := map[string]int{}
	anchors := map[string]bool{}
	for _, l := range prose(md) {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		level := len(l) - len(strings.TrimLeft(l, "#"))
		if level > 6 || len(l) == level || l[level] != ' ' {
			continue
		}
		text := strings.TrimSpace(strings.TrimRight(strings.TrimSpace(l[level:]), "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			anchors[a+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

// link matches an inline link or image: [text](target) or
// [text](target "title").
var link = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// CheckLinks returns a problem for every relative link in the files
// (paths relative to root) whose file does not exist or whose #anchor is
// no heading of the target. Links with a scheme (https:, mailto:) are not
// followed.
func CheckLinks(root string, files []string) []string {
	var problems []string
	anchorsOf := map[string]map[string]bool{}
	anchors := func(path string) (map[string]bool, error) {
		if a, ok := anchorsOf[path]; ok {
			return a, nil
		}
		b, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			return nil, err
		}
		anchorsOf[path] = Anchors(string(b))
		return anchorsOf[path], nil
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", f, err))
			continue
		}
		for i, l := range prose(string(b)) {
			l = codeSpan.ReplaceAllString(l, "")
			for _, m := range link.FindAllStringSubmatch(l, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				where := fmt.Sprintf("%s:%d: link %q", f, i+1, target)
				path, anchor, _ := strings.Cut(target, "#")
				rel := f
				if path != "" {
					rel = filepath.ToSlash(filepath.Join(filepath.Dir(f), path))
					if strings.HasPrefix(rel, "../") {
						problems = append(problems, where+": leads outside the repository")
						continue
					}
					if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
						problems = append(problems, where+": no file "+rel)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(rel, ".md") {
					problems = append(problems, where+": an anchor into "+rel+", which is no Markdown page")
					continue
				}
				a, err := anchors(rel)
				if err != nil {
					problems = append(problems, where+": "+err.Error())
					continue
				}
				if !a[anchor] {
					problems = append(problems, fmt.Sprintf("%s: %s has no heading whose anchor is #%s", where, rel, anchor))
				}
			}
		}
	}
	return problems
}

// Section and ReplaceSection are package figures': the commands that
// write figures into the docs read sections the same way.
var (
	Section        = figures.Section
	ReplaceSection = figures.ReplaceSection
)

// FirstColumn returns the first code span of each table row in section:
// | `name` | ... | gives name.
func FirstColumn(section string) []string {
	var names []string
	for _, l := range strings.Split(section, "\n") {
		if rest, ok := strings.CutPrefix(l, "| `"); ok {
			if name, _, ok := strings.Cut(rest, "`"); ok {
				names = append(names, name)
			}
		}
	}
	return names
}

var targetComment = regexp.MustCompile(`^## ([a-z][a-z0-9-]*):`)

// MakeTargets reads makefiles and returns the targets each "## target:"
// comment documents (the first line of a block of "##" lines: a later line
// of the block that happens to start "## word:" is prose), in order, and
// every target a rule defines.
func MakeTargets(makefiles map[string]string) (documented []string, rules map[string]bool) {
	rules = map[string]bool{}
	names := make([]string, 0, len(makefiles))
	for n := range makefiles {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		inBlock := false
		sc := bufio.NewScanner(strings.NewReader(makefiles[n]))
		for sc.Scan() {
			l := sc.Text()
			if strings.HasPrefix(l, "##") {
				if m := targetComment.FindStringSubmatch(l); m != nil && !inBlock {
					documented = append(documented, m[1])
				}
				inBlock = true
				continue
			}
			inBlock = false
			if l == "" || strings.HasPrefix(l, "\t") || strings.HasPrefix(l, "#") || strings.HasPrefix(l, " ") {
				continue
			}
			head, _, ok := strings.Cut(l, ":")
			if !ok || strings.HasPrefix(l[len(head):], ":=") || strings.ContainsAny(head, "=$(") {
				continue
			}
			for _, t := range strings.Fields(head) {
				rules[t] = true
			}
			if strings.HasPrefix(head, ".PHONY") {
				for _, t := range strings.Fields(l[len(head)+1:]) {
					rules[t] = true
				}
			}
		}
	}
	return documented, rules
}

// makeMention finds `make TARGET` in a code span and "make TARGET" at the
// start of a line of a shell block.
var makeMention = regexp.MustCompile("(?:`|^)make ([a-z][a-z0-9-]*)")

// MakeMentions returns the targets md names as `make TARGET`, in code
// spans or at the start of a code block's lines.
func MakeMentions(md string) []string {
	var out []string
	for _, l := range strings.Split(md, "\n") {
		for _, m := range makeMention.FindAllStringSubmatch(strings.TrimSpace(l), -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// cmdlineKey matches berth.KEY= in text.
var cmdlineKey = regexp.MustCompile(`\bberth\.([a-z][a-z0-9]*(?:\.[a-z][a-z0-9]*)*)=`)

// CmdlineKeys returns the berth.* keys md names as berth.KEY=.
func CmdlineKeys(md string) []string {
	var out []string
	for _, m := range cmdlineKey.FindAllStringSubmatch(md, -1) {
		out = append(out, "berth."+m[1])
	}
	return out
}

// berthName matches a berth.dev/ name; one followed by '-' or '*' is a
// prefix (berth.dev/on-*), not a name.
var berthName = regexp.MustCompile(`berth\.dev/[a-z0-9]+(?:-[a-z0-9]+)*[-*]?`)

// BerthNames returns the berth.dev/ names (annotations and labels) in s.
func BerthNames(s string) []string {
	var out []string
	for _, m := range berthName.FindAllString(s, -1) {
		if !strings.HasSuffix(m, "-") && !strings.HasSuffix(m, "*") {
			out = append(out, m)
		}
	}
	return out
}

// Compare returns a problem for each name code knows that docs lacks, and
// each docs names that code does not know. fix says where to act.
func Compare(what string, code, docs []string, fix string) []string {
	var problems []string
	for _, n := range uniq(code) {
		if !slices.Contains(docs, n) {
			problems = append(problems, fmt.Sprintf("%s %s is in the code but not in the docs: %s", what, n, fix))
		}
	}
	for _, n := range uniq(docs) {
		if !slices.Contains(code, n) {
			problems = append(problems, fmt.Sprintf("%s %s is in the docs but the code has none: remove it from the docs, or restore it in the code", what, n))
		}
	}
	return problems
}

func uniq(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

// StringConsts parses the non-test Go files of dir and returns its
// string constants by name.
func StringConsts(dir string) (map[string]string, error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	consts := map[string]string{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							if v, err := strconv.Unquote(lit.Value); err == nil {
								consts[n.Name] = v
							}
						}
					}
				}
			}
		}
	}
	return consts, nil
}

// ListedStrings returns the strings function fn of the Go file path
// returns as a composite literal of constants (return []string{KeyA,
// pkg.KeyB, ...}), each constant resolved in its own package: a local
// name in path's directory, pkg.Name in the directory of pkg's import
// path under root (the module's packages only).
func ListedStrings(root, module, path, fn string) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		return nil, err
	}
	imports := map[string]string{}
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		name := p[strings.LastIndex(p, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		imports[name] = p
	}
	var lit *ast.CompositeLit
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == fn && fd.Body != nil {
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				if r, ok := n.(*ast.ReturnStmt); ok && len(r.Results) == 1 {
					if c, ok := r.Results[0].(*ast.CompositeLit); ok {
						lit = c
					}
				}
				return lit == nil
			})
		}
	}
	if lit == nil {
		return nil, fmt.Errorf("%s: no func %s returning a composite literal", path, fn)
	}
	cache := map[string]map[string]string{}
	constsIn := func(dir string) (map[string]string, error) {
		if c, ok := cache[dir]; ok {
			return c, nil
		}
		c, err := StringConsts(dir)
		cache[dir] = c
		return c, err
	}
	var out []string
	for _, e := range lit.Elts {
		var dir, name string
		switch x := e.(type) {
		case *ast.Ident:
			dir, name = filepath.Dir(path), x.Name
		case *ast.SelectorExpr:
			pkg, ok := x.X.(*ast.Ident)
			if !ok {
				return nil, fmt.Errorf("%s: %s: an element that is no constant", path, fset.Position(e.Pos()))
			}
			imp, ok := imports[pkg.Name]
			rel, inModule := strings.CutPrefix(imp, module+"/")
			if !ok || !inModule {
				return nil, fmt.Errorf("%s: %s.%s: not a package of %s", fset.Position(e.Pos()), pkg.Name, x.Sel.Name, module)
			}
			dir, name = filepath.Join(root, rel), x.Sel.Name
		case *ast.BasicLit:
			v, err := strconv.Unquote(x.Value)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
			continue
		default:
			return nil, fmt.Errorf("%s: an element that is no constant", fset.Position(e.Pos()))
		}
		c, err := constsIn(dir)
		if err != nil {
			return nil, err
		}
		v, ok := c[name]
		if !ok {
			return nil, fmt.Errorf("%s: no string constant %s in %s", fset.Position(e.Pos()), name, dir)
		}
		out = append(out, v)
	}
	return out, nil
}

// datePattern is a calendar date, YYYY-MM-DD.
var datePattern = regexp.MustCompile(`\b[0-9]{4}-[0-9]{2}-[0-9]{2}\b`)
