package initramfs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/u-root/u-root/pkg/cpio"

	"github.com/berth-node/berth/image/fstree"
)

// build makes a tree from host files whose on-disk metadata (mtime, mode
// from umask) is set by the caller, to prove none of it leaks into the cpio.
func build(t *testing.T, mtime time.Time, order []string) []byte {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "berth")
	if err := os.WriteFile(src, []byte("\x7fELF static berth"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(src, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	tr := fstree.New()
	for _, p := range order {
		var err error
		switch p {
		case "/init":
			err = tr.AddFile(p, src, 0)
		case "/bin/sh":
			err = tr.AddSymlink(p, "busybox")
		case "/etc/berth/manifest.json":
			err = tr.AddData(p, []byte(`{"berthVersion":"t"}`), 0o644)
		case "/tmp":
			err = tr.AddDir(p, 0o1777)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	if err := Write(&b, tr, 0); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestReproducible(t *testing.T) {
	a := build(t, time.Unix(1000, 0), []string{"/init", "/bin/sh", "/etc/berth/manifest.json", "/tmp"})
	b := build(t, time.Unix(2_000_000_000, 0), []string{"/tmp", "/etc/berth/manifest.json", "/bin/sh", "/init"})
	if !bytes.Equal(a, b) {
		t.Fatal("same tree, different host mtimes and insertion order: cpio bytes differ")
	}
}

func TestContent(t *testing.T) {
	data := build(t, time.Now(), []string{"/init", "/bin/sh", "/etc/berth/manifest.json", "/tmp"})
	recs, err := cpio.ReadAllRecords(cpio.Newc.Reader(bytes.NewReader(data)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range recs {
		names = append(names, r.Name)
		if r.MTime != 0 || r.UID != 0 || r.GID != 0 {
			t.Errorf("%s: mtime %d uid %d gid %d, want all 0", r.Name, r.MTime, r.UID, r.GID)
		}
		switch r.Name {
		case "init":
			if r.Mode != cpio.S_IFREG|0o755 {
				t.Errorf("init mode %o", r.Mode)
			}
		case "tmp":
			if r.Mode != cpio.S_IFDIR|0o1777 {
				t.Errorf("tmp mode %o", r.Mode)
			}
		case "bin/sh":
			if r.Mode&cpio.S_IFMT != cpio.S_IFLNK {
				t.Errorf("bin/sh mode %o, want a symlink", r.Mode)
			}
		}
	}
	want := []string{"bin", "bin/sh", "etc", "etc/berth", "etc/berth/manifest.json", "init", "tmp"}
	if len(names) != len(want) {
		t.Fatalf("records %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("records %v, want %v (sorted, parents first)", names, want)
		}
	}
}
