package rotate

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestPlan(t *testing.T) {
	got := Plan("/var/log/berth/kubelet.log", 3)
	want := []Rename{
		{"/var/log/berth/kubelet.log.2", "/var/log/berth/kubelet.log.3"},
		{"/var/log/berth/kubelet.log.1", "/var/log/berth/kubelet.log.2"},
		{"/var/log/berth/kubelet.log", "/var/log/berth/kubelet.log.1"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Plan(keep=3) = %v, want %v", got, want)
	}
	if got := Plan("x", 1); !slices.Equal(got, []Rename{{"x", "x.1"}}) {
		t.Errorf("Plan(keep=1) = %v", got)
	}
	if got := Plan("x", 0); got != nil {
		t.Errorf("Plan(keep=0) = %v, want nil", got)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	return string(b)
}

func TestWriterRotates(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "svc.log")
	w := New(path, 10, 2)
	for _, l := range []string{"aaaa\n", "bbbb\n", "cccc\n", "dddd\n", "eeee\n", "ffff\n", "gggg\n"} {
		if _, err := w.Write([]byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// Two lines fit in 10 bytes; the oldest file beyond keep=2 is gone.
	if got := read(t, path); got != "gggg\n" {
		t.Errorf("%s = %q", path, got)
	}
	if got := read(t, path+".1"); got != "eeee\nffff\n" {
		t.Errorf("%s.1 = %q", path, got)
	}
	if got := read(t, path+".2"); got != "cccc\ndddd\n" {
		t.Errorf("%s.2 = %q", path, got)
	}
	if _, err := os.Stat(path + ".3"); !os.IsNotExist(err) {
		t.Errorf("%s.3 exists (err %v); keep is 2", path, err)
	}
}

func TestWriterReopensExisting(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "svc.log")
	if err := os.WriteFile(path, []byte("old-old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := New(path, 10, 1)
	if _, err := w.Write([]byte("new-new\n")); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if got := read(t, path+".1"); got != "old-old\n" {
		t.Errorf("previous boot's log not rotated: .1 = %q", got)
	}
	if got := read(t, path); got != "new-new\n" {
		t.Errorf("log = %q", got)
	}
}

func TestWriterKeepZeroTruncates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "svc.log")
	w := New(path, 8, 0)
	for _, l := range []string{"12345\n", "67890\n"} {
		if _, err := w.Write([]byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	if got := read(t, path); got != "67890\n" {
		t.Errorf("log = %q", got)
	}
	m, _ := filepath.Glob(path + ".*")
	if len(m) != 0 {
		t.Errorf("rotated files with keep=0: %v", m)
	}
}

func TestWriterOversizedLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "svc.log")
	w := New(path, 4, 1)
	long := strings.Repeat("z", 20) + "\n"
	for range 2 {
		if _, err := w.Write([]byte(long)); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	// A line longer than the limit is written whole, alone in its file.
	if got := read(t, path); got != long {
		t.Errorf("log = %q", got)
	}
	if got := read(t, path+".1"); got != long {
		t.Errorf("log.1 = %q", got)
	}
}
