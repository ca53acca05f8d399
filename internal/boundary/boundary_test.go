package boundary

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/berth-node/berth"

// repoRoot is the module root, two levels up from this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod at the module root %s: %v", root, err)
	}
	return root
}

// hostSide are the trees that never ship in the node image (rollout/ is
// the cluster's controller, its own image).
var hostSide = []string{module + "/image", module + "/qemu-tests", module + "/rollout"}

// TestPID1LinksNoHostSideCode fails when berth's binary (./init) depends
// on the image builder or a QEMU rig: their code would ship in PID 1, and
// a change there could break a node.
func TestPID1LinksNoHostSideCode(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "./init")
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps ./init: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps ./init listed %d packages; expected berth's whole dependency tree", len(deps))
	}
	var own int
	for _, d := range deps {
		if !strings.HasPrefix(d, module+"/") {
			continue
		}
		own++
		for _, h := range hostSide {
			if d == h || strings.HasPrefix(d, h+"/") {
				t.Errorf("PID 1 (./init) depends on host-side package %s", d)
			}
		}
	}
	if own < 10 {
		t.Errorf("only %d of berth's own packages in ./init's dependencies; the listing looks wrong", own)
	}
}

// TestNothingReadsOutsideTheRepository fails on any file that names the
// workspace folder beside the repository: a clone has nothing beside it.
func TestNothingReadsOutsideTheRepository(t *testing.T) {
	root := repoRoot(t)
	// Spelled in pieces so this file does not match itself.
	needles := [][]byte{[]byte(".." + "/shared"), []byte("shared" + "/data/"), []byte("shared" + "/DESIGN")}
	var checked int
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch rel {
			case ".git", "build":
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Size() > 4<<20 {
			return nil // data, not code or docs
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		for _, n := range needles {
			if i := bytes.Index(data, n); i >= 0 {
				line := 1 + bytes.Count(data[:i], []byte("\n"))
				t.Errorf("%s:%d refers to %q, outside the repository", rel, line, n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Errorf("checked only %d files; the walk missed the tree", checked)
	}
}

// TestRunnerOwnsItsSpec fails when the service supervisor depends on the
// plan: the low-level runner owns its spec (supervise.Spec, Probe) and the
// decider imports it, never the other way round.
func TestRunnerOwnsItsSpec(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "./runtime/supervise")
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps ./runtime/supervise: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if !strings.Contains(string(out), module+"/runtime/rlimit") {
		t.Fatalf("go list -deps ./runtime/supervise lacks runtime/rlimit, which the spec uses; the listing looks wrong:\n%s", out)
	}
	for _, d := range deps {
		if d == module+"/plan" || strings.HasPrefix(d, module+"/plan/") {
			t.Errorf("runtime/supervise depends on %s: the runner must own its spec", d)
		}
	}
}

// layers are the node code's groups from the bottom up: a package may
// import its own group and those below it, never one above. Tests may
// (runtime/supervise's use init/shutdown), so only non-test imports count.
var layers = [][]string{
	{"internal"},
	{"config", "mounts", "network"},
	{"runtime", "update"},
	{"init"},
}

// TestImportsRunOneWay fails on a non-test import from a lower group into
// a higher one, say runtime/ importing init/plan: the stages of a boot
// read top-down, PID 1 above what it drives.
func TestImportsRunOneWay(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
	cmd.Dir = repoRoot(t)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list ./...: %v\n%s", err, out)
	}
	level := func(pkg string) (int, bool) {
		rel, ok := strings.CutPrefix(pkg, module+"/")
		if !ok {
			return 0, false
		}
		top, _, _ := strings.Cut(rel, "/")
		for i, l := range layers {
			for _, g := range l {
				if top == g {
					return i, true
				}
			}
		}
		return 0, false
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		from, ok := level(f[0])
		if !ok {
			continue // host side: image/, qemu-tests/, components/
		}
		checked++
		for _, imp := range f[1:] {
			if to, ok := level(imp); ok && to > from {
				t.Errorf("%s imports %s: a lower layer must not import a higher one (%v)", f[0], imp, layers)
			}
		}
	}
	if checked < 40 {
		t.Errorf("only %d node packages checked; the listing looks wrong:\n%s", checked, out)
	}
}

// TestDesignLayoutNamesEveryFolder fails when a top-level folder holding
// Go code is missing from docs/design.md's layout, so the docs cannot
// drift from the tree again.
func TestDesignLayoutNamesEveryFolder(t *testing.T) {
	root := repoRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := bytes.Cut(doc, []byte("\n## Layout\n"))
	if !ok {
		t.Fatal("docs/design.md has no ## Layout section")
	}
	section, _, _ := bytes.Cut(after, []byte("\n## "))
	layout := map[string]bool{}
	for _, l := range strings.Split(string(section), "\n") {
		if f := strings.Fields(l); len(f) > 0 && !strings.HasPrefix(l, " ") && strings.HasSuffix(f[0], "/") {
			layout[strings.TrimSuffix(f[0], "/")] = true
		}
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var folders int
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") || e.Name() == "build" {
			continue
		}
		hasGo := false
		filepath.WalkDir(filepath.Join(root, e.Name()), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".go") {
				hasGo = true
				return filepath.SkipAll
			}
			return nil
		})
		if !hasGo {
			continue
		}
		folders++
		if !layout[e.Name()] {
			t.Errorf("top-level folder %s/ holds Go code but is not in docs/design.md's layout (a line starting %q)", e.Name(), e.Name()+"/")
		}
	}
	if folders < 5 {
		t.Errorf("only %d top-level Go folders found; the walk looks wrong", folders)
	}
}
