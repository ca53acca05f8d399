package sysroot

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// tree makes files (path → content) and links (path → target) under a new
// directory, as dpkg -x of Debian's packages leaves them: absolute links
// (/lib/ld-linux-aarch64.so.1), relative ones (libfoo.so.1 → libfoo.so.1.2),
// links to directories.
func tree(t *testing.T, files, links map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for p, target := range links {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, full); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestPathResolvesLinksInside(t *testing.T) {
	dir := tree(t, map[string]string{
		"lib/aarch64-linux-gnu/ld-linux-aarch64.so.1":  "loader",
		"lib/aarch64-linux-gnu/libfoo.so.1.2":          "foo",
		"sbin/mke2fs":                                  "mke2fs",
		"usr/lib/aarch64-linux-gnu/xtables/libxt_a.so": "a",
	}, map[string]string{
		// Absolute: on the builder it would name the amd64 host's own file.
		"lib/ld-linux-aarch64.so.1":         "/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1",
		"lib/aarch64-linux-gnu/libfoo.so.1": "libfoo.so.1.2",
		"sbin/mkfs.ext4":                    "mke2fs",
		"usr/sbin":                          "../sbin",
		"lib64":                             "lib",
		"escape":                            "../../../../etc",
		"loop":                              "loop",
	})
	r, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{
		"/lib/ld-linux-aarch64.so.1":                    "loader",
		"/lib64/ld-linux-aarch64.so.1":                  "loader",
		"/lib/aarch64-linux-gnu/libfoo.so.1":            "foo",
		"/usr/sbin/mkfs.ext4":                           "mke2fs",
		"/usr/lib/aarch64-linux-gnu/xtables/libxt_a.so": "a",
		"/escape/../sbin/mke2fs":                        "mke2fs",
	} {
		hp, err := r.Path(p)
		if err != nil {
			t.Errorf("Path(%s): %v", p, err)
			continue
		}
		got, err := os.ReadFile(hp)
		if err != nil || string(got) != want {
			t.Errorf("Path(%s) = %s holding %q (%v), want %q", p, hp, got, err, want)
		}
	}
	// ".." above the top stays at the top: /escape is /etc of the root.
	if hp, err := r.Path("/escape/passwd"); err != nil || hp != filepath.Join(dir, "etc", "passwd") {
		t.Errorf("Path(/escape/passwd) = %s, %v; want %s", hp, err, filepath.Join(dir, "etc", "passwd"))
	}
	if _, err := r.Stat("/sbin/missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Stat(missing) = %v, want not exist", err)
	}
	if _, err := r.Path("/loop/x"); err == nil {
		t.Error("Path through a link to itself: no error")
	}
	if _, err := r.Path("lib/x"); err == nil {
		t.Error("relative path: no error")
	}
	if target, err := r.Readlink("/usr/sbin/mkfs.ext4"); err != nil || target != "mke2fs" {
		t.Errorf("Readlink = %q, %v; want mke2fs", target, err)
	}
	ents, err := r.ReadDir("/usr/lib/aarch64-linux-gnu/xtables")
	if err != nil || len(ents) != 1 || ents[0].Name() != "libxt_a.so" {
		t.Errorf("ReadDir = %v, %v", ents, err)
	}
	if p, ok := r.FromHost(filepath.Join(dir, "sbin", "mke2fs")); !ok || p != "/sbin/mke2fs" {
		t.Errorf("FromHost = %q, %v", p, ok)
	}
	if _, ok := r.FromHost("/work/build/kubelet"); ok {
		t.Error("FromHost of a file outside the root: ok")
	}
}

func TestHostRootIsIdentity(t *testing.T) {
	for _, d := range []string{"", "/"} {
		r, err := New(d)
		if err != nil || !r.IsHost() || r.String() != "/" {
			t.Fatalf("New(%q) = %v, %v", d, r, err)
		}
		if hp, err := r.Path("/usr/sbin/../bin/x"); err != nil || hp != "/usr/sbin/../bin/x" {
			t.Errorf("Path = %q, %v: the host root leaves paths to the OS", hp, err)
		}
	}
	if _, err := New(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("New(missing dir): no error")
	}
}
