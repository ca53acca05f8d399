package elfdeps

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The build host is Debian x86-64 (CI too): mkfs.ext4 is dynamically
// linked against libext2fs and libc, which must both be found, along with the
// loader named by PT_INTERP.
func TestResolveHostBinary(t *testing.T) {
	bin, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		t.Fatalf("mkfs.ext4 (e2fsprogs, installed by make deps) is missing: %v", err)
	}
	deps, err := Resolve([]string{bin}, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, d := range deps {
		names[d.Name] = d.Path
		if _, err := os.Stat(d.Path); err != nil {
			t.Errorf("dep %s resolved to missing %s", d.Name, d.Path)
		}
	}
	for _, want := range []string{"libc.so.6", "libext2fs.so.2", "/lib64/ld-linux-x86-64.so.2"} {
		if _, ok := names[want]; !ok {
			t.Errorf("Resolve(%s) lacks %s; got %v", bin, want, names)
		}
	}
	// libext2fs needs libcom_err: a transitive dep, not named by mkfs.ext4 itself.
	if _, ok := names["libcom_err.so.2"]; !ok {
		t.Errorf("transitive libcom_err.so.2 missing: %v", names)
	}
	for i := 1; i < len(deps); i++ {
		if deps[i-1].Path >= deps[i].Path {
			t.Errorf("not sorted/unique at %d: %s, %s", i, deps[i-1].Path, deps[i].Path)
		}
	}
}

func TestResolveStaticBinary(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\nfunc main(){}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "static")
	cmd := exec.Command("go", "build", "-o", bin, src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	deps, err := Resolve([]string{bin}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(deps) != 0 {
		t.Errorf("static binary has deps %v", deps)
	}
}

func TestResolveMissingLibraryNamesIt(t *testing.T) {
	bin, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		t.Fatalf("mkfs.ext4 missing: %v", err)
	}
	_, err = Resolve([]string{bin}, []string{t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "DT_NEEDED") {
		t.Fatalf("want an error naming DT_NEEDED, got %v", err)
	}
}

func TestResolveNotELF(t *testing.T) {
	p := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Resolve([]string{p}, nil); err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("want an error naming %s, got %v", p, err)
	}
}
