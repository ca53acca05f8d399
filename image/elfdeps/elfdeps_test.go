package elfdeps

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-node/berth/image/sysroot"
)

// The build host is Debian x86-64 (CI too): mkfs.ext4 is dynamically
// linked against libext2fs and libc, which must both be found, along with the
// loader named by PT_INTERP.
func TestResolveHostBinary(t *testing.T) {
	bin, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		t.Fatalf("mkfs.ext4 (e2fsprogs, installed by make deps) is missing: %v", err)
	}
	deps, err := Resolve(sysroot.Root{}, []string{bin}, nil)
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
	deps, err := Resolve(sysroot.Root{}, []string{bin}, nil)
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
	_, err = Resolve(sysroot.Root{}, []string{bin}, []string{t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "DT_NEEDED") {
		t.Fatalf("want an error naming DT_NEEDED, got %v", err)
	}
}

func TestResolveNotELF(t *testing.T) {
	p := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Resolve(sysroot.Root{}, []string{p}, nil); err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("want an error naming %s, got %v", p, err)
	}
}

// In an arm64 sysroot every name resolves inside it: the loader through its
// absolute link (the builder has its own /lib/aarch64-linux-gnu when
// libc6:arm64 is installed, which must not be read), libraries in the
// aarch64 multiarch directories, a transitive one in /usr/lib/<tuple>.
func TestResolveInSysroot(t *testing.T) {
	dir, err := filepath.Abs("testdata/arm64root")
	if err != nil {
		t.Fatal(err)
	}
	root, err := sysroot.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sbin", "mkfs.ext4")
	plugin := filepath.Join(dir, "usr/lib/aarch64-linux-gnu/xtables/libxt_a.so")
	deps, err := Resolve(root, []string{bin, plugin}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Dep{
		{Name: "libfoo.so.1", Path: "/lib/aarch64-linux-gnu/libfoo.so.1", Src: filepath.Join(dir, "lib/aarch64-linux-gnu/libfoo.so.1.2.3")},
		{Name: "/lib/ld-linux-aarch64.so.1", Path: "/lib/ld-linux-aarch64.so.1", Src: filepath.Join(dir, "lib/aarch64-linux-gnu/ld-linux-aarch64.so.1")},
		{Name: "libbar.so.2", Path: "/usr/lib/aarch64-linux-gnu/libbar.so.2", Src: filepath.Join(dir, "usr/lib/aarch64-linux-gnu/libbar.so.2")},
	}
	if len(deps) != len(want) {
		t.Fatalf("deps %+v, want %+v", deps, want)
	}
	for i := range want {
		if deps[i] != want[i] {
			t.Errorf("dep %d = %+v, want %+v", i, deps[i], want[i])
		}
	}
	// The host's search directories hold no aarch64 libfoo: naming them
	// explicitly fails, and the error says where it looked.
	_, err = Resolve(root, []string{bin}, []string{"/lib/x86_64-linux-gnu"})
	if err == nil || !strings.Contains(err.Error(), "libfoo.so.1") || !strings.Contains(err.Error(), dir) {
		t.Errorf("want an error naming libfoo.so.1 and the sysroot, got %v", err)
	}
}

func TestSearchDirs(t *testing.T) {
	for m, want := range map[elf.Machine]string{elf.EM_X86_64: "/lib/x86_64-linux-gnu", elf.EM_AARCH64: "/lib/aarch64-linux-gnu"} {
		if got := SearchDirs(m); len(got) == 0 || got[0] != want {
			t.Errorf("SearchDirs(%v) = %v, want %s first", m, got, want)
		}
	}
}
