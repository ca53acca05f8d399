package boundary

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// noBareGo are the trees where a go statement is allowed: host-side code
// that never ships (the image builder, the QEMU rigs, the components'
// own modules) and package safe, which is how everything else starts
// goroutines.
var noBareGo = []string{"image", "qemu-tests", "components", "internal/safe"}

// TestNoBareGoStatements fails on any go statement in code that ships.
// berth is PID 1: a panic that escapes a goroutine ends the process and
// the kernel panics, so every goroutine starts through safe.Go or
// safe.Loop, which recover and hand the panic to the goroutine's owner as
// an error. Tests may use go freely.
func TestNoBareGoStatements(t *testing.T) {
	root := repoRoot(t)
	fset := token.NewFileSet()
	var parsed int
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "." {
				return nil
			}
			name := d.Name()
			// What the go tool ignores, the build output, and the trees
			// exempted above.
			if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor" ||
				rel == "build" || exempt(rel) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Errorf("parsing %s: %v", rel, err)
			return nil
		}
		parsed++
		seen[filepath.ToSlash(filepath.Dir(rel))] = true
		ast.Inspect(f, func(n ast.Node) bool {
			if g, ok := n.(*ast.GoStmt); ok {
				pos := fset.Position(g.Go)
				t.Errorf("%s:%d: bare go statement; start goroutines with safe.Go or safe.Loop, so that a panic becomes the owner's error and not PID 1's exit",
					rel, pos.Line)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if parsed < 50 {
		t.Errorf("parsed only %d files; the walk missed the tree", parsed)
	}
	// The packages that start goroutines, at least, were looked at.
	for _, dir := range []string{"init", "runtime/supervise", "runtime/reaper", "init/kmod", "init/shutdown", "mounts", "network"} {
		if !seen[dir] {
			t.Errorf("no file of %s/ was parsed", dir)
		}
	}
	t.Logf("checked %d files in %d directories", parsed, len(seen))
}

func exempt(rel string) bool {
	for _, e := range noBareGo {
		if rel == e || strings.HasPrefix(rel, e+"/") {
			return true
		}
	}
	return false
}
