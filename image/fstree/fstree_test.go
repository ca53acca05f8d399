package fstree

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAddRules(t *testing.T) {
	tr := New()
	if err := tr.AddData("/etc/hosts", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !tr.Has("/etc") {
		t.Error("parent /etc not created")
	}
	if err := tr.AddData("/etc/hosts", []byte("y"), 0o644); err == nil || !strings.Contains(err.Error(), "/etc/hosts") {
		t.Errorf("adding a path twice: want an error naming it, got %v", err)
	}
	if err := tr.AddData("/etc/hosts/x", nil, 0o644); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("child of a file: got %v", err)
	}
	if err := tr.AddData("relative", nil, 0o644); err == nil {
		t.Error("relative path accepted")
	}
	if err := tr.AddDir("/etc", 0o700); err != nil {
		t.Errorf("re-adding a dir: %v", err)
	}
	var got []string
	for _, e := range tr.Entries() {
		got = append(got, e.Path)
	}
	if strings.Join(got, ",") != "/,/etc,/etc/hosts" {
		t.Errorf("entries %v", got)
	}
}

func TestManifestAndMaterialize(t *testing.T) {
	tr := New()
	for _, err := range []error{
		tr.AddData("/b/file", []byte("hello\n"), 0o640),
		tr.AddSymlink("/a/link", "../b/file"),
		tr.AddDir("/tmp", 0o1777),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	files := tr.Manifest()
	if len(files) != 2 || files[0].Path != "/a/link" || files[0].Link != "../b/file" ||
		files[1].Path != "/b/file" || files[1].Mode != "0640" || files[1].Size != 6 ||
		files[1].SHA256 != "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03" {
		t.Errorf("manifest %+v", files)
	}
	dir := filepath.Join(t.TempDir(), "stage")
	if err := tr.Materialize(dir); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, "tmp"))
	if err != nil || st.Mode()&os.ModeSticky == 0 || st.Mode().Perm() != 0o777 {
		t.Errorf("/tmp staged as %v (%v), want sticky 0777", st.Mode(), err)
	}
	st, err = os.Stat(filepath.Join(dir, "b/file"))
	if err != nil || st.Mode().Perm() != 0o640 {
		t.Errorf("/b/file staged as %v (%v)", st.Mode(), err)
	}
	if target, err := os.Readlink(filepath.Join(dir, "a/link")); err != nil || target != "../b/file" {
		t.Errorf("link %q %v", target, err)
	}
}
