package plan

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFileModes plans and renders every golden case and checks every file
// against the mode table, both in the plan and on disk under --out: a
// planned file missing from the table fails, as does a table row no case
// writes (a stale row hides a path nobody decides any more).
func TestFileModes(t *testing.T) {
	used := map[string]bool{}
	for _, c := range goldenCases() {
		t.Run(c.name, func(t *testing.T) {
			in := c.inputs(t)
			p, err := Build(in)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range p.Files {
				row, ok := modeRow(f.Path)
				if !ok {
					t.Errorf("%s is planned but missing from the mode table (plan/modes.go)", f.Path)
					continue
				}
				used[f.Path] = true
				if f.Mode != row.mode {
					t.Errorf("%s planned with mode %04o, table says %04o", f.Path, f.Mode, row.mode)
				}
			}

			out := t.TempDir()
			if _, err := Render(in, out, io.Discard); err != nil {
				t.Fatal(err)
			}
			seen := 0
			err = filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				seen++
				node := "/" + filepath.ToSlash(strings.TrimPrefix(path, out+string(filepath.Separator)))
				used[node] = true
				st, err := d.Info()
				if err != nil {
					return err
				}
				row, ok := modeRow(node)
				switch {
				case !ok:
					t.Errorf("render wrote %s, which is missing from the mode table", node)
				case st.Mode().Perm() != row.mode:
					t.Errorf("render wrote %s with mode %04o, table says %04o", node, st.Mode().Perm(), row.mode)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if seen != len(p.Files)+1 {
				t.Errorf("render wrote %d files, want the plan's %d and plan.txt", seen, len(p.Files))
			}
		})
	}
	if t.Failed() {
		return
	}
	for path := range fileModes {
		if !used[path] {
			t.Errorf("mode table row %s is written by no golden case: add a case or drop the row", path)
		}
	}
}

func TestModeTable(t *testing.T) {
	for path, row := range fileModes {
		if !filepath.IsAbs(path) || filepath.Clean(path) != path {
			t.Errorf("%s: not an absolute, clean node path", path)
		}
		if row.why == "" || strings.Contains(row.why, "\n") {
			t.Errorf("%s: want a one-line why, got %q", path, row.why)
		}
		if row.mode&^fs.ModePerm != 0 || row.mode&0o022 != 0 {
			t.Errorf("%s: mode %v is not plain permissions without group/other write", path, row.mode)
		}
	}
	// What an operator expects, spelled out: a change to any of these is a
	// security decision and should fail here first.
	for path, want := range map[string]fs.FileMode{
		"/var/lib/kubelet/kubeconfig":           0o600,
		"/var/lib/kubelet/bootstrap-kubeconfig": 0o600,
		"/etc/containerd/config.toml":           0o600,
		DescribePath:                            0o600,
		"/etc/kubernetes/pki/ca.crt":            0o644,
		"/etc/kubernetes/kubelet/config.json":   0o644,
		"/etc/resolv.conf":                      0o644,
	} {
		if got := ModeFor(path); got != want {
			t.Errorf("ModeFor(%s) = %04o, want %04o", path, got, want)
		}
	}
	if got := ModeFor("/etc/not-in-the-table"); got != 0o600 {
		t.Errorf("a path missing from the table gets %04o, want 0600 (private until decided)", got)
	}
}

// TestRenderReplacesLooserMode renders over an existing plan.txt left 0644
// by an older berth: the atomic write replaces the file, so it ends 0600.
func TestRenderReplacesLooserMode(t *testing.T) {
	out := t.TempDir()
	desc := filepath.Join(out, DescribePath)
	if err := os.MkdirAll(filepath.Dir(desc), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(desc, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Render(caseByName(t, "eksctl").inputs(t), out, io.Discard); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(desc)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != DescribeMode {
		t.Errorf("plan.txt mode %04o after render, want %04o", st.Mode().Perm(), DescribeMode)
	}
}
