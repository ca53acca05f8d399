package erofs

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/berth-node/berth/image/fstree"
)

func sample(t *testing.T, extra string) *fstree.Tree {
	t.Helper()
	tr := fstree.New()
	for _, err := range []error{
		tr.AddData("/sbin/berth", bytes.Repeat([]byte("berth"), 5000), 0o755),
		tr.AddData("/etc/os-release", []byte("NAME=berth\n"+extra), 0o644),
		tr.AddSymlink("/init", "/sbin/berth"),
		tr.AddDir("/proc", 0o555),
		tr.AddDir("/tmp", 0o1777),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

// CI installs erofs-utils with make deps; without it the root image cannot be
// built at all, so this fails rather than skips.
func requireMkfs(t *testing.T) {
	if _, err := exec.LookPath("mkfs.erofs"); err != nil {
		t.Fatalf("mkfs.erofs (erofs-utils, installed by make deps) is missing: %v", err)
	}
}

func TestBuildReproducible(t *testing.T) {
	requireMkfs(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.erofs"), filepath.Join(dir, "b.erofs")
	ctx := context.Background()
	if err := Build(ctx, sample(t, ""), a, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := Build(ctx, sample(t, ""), b, Options{}); err != nil {
		t.Fatal(err)
	}
	ab, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if len(ab) == 0 || !bytes.Equal(ab, bb) {
		t.Fatalf("two builds of one tree differ (%d vs %d bytes)", len(ab), len(bb))
	}
	// erofs superblock magic 0xE0F5E1E2 at offset 1024.
	if len(ab) < 1028 || !bytes.Equal(ab[1024:1028], []byte{0xe2, 0xe1, 0xf5, 0xe0}) {
		t.Fatalf("%s has no erofs magic", a)
	}
	if err := Build(ctx, sample(t, "X=1\n"), b, Options{}); err != nil {
		t.Fatal(err)
	}
	bb, _ = os.ReadFile(b)
	if bytes.Equal(ab, bb) {
		t.Fatal("a different tree gave the same image")
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".erofs-stage-*"))
	if len(left) != 0 {
		t.Errorf("staging dirs left behind: %v", left)
	}
}

func TestUUID(t *testing.T) {
	u1, u2 := UUID(sample(t, "")), UUID(sample(t, "a=b\n"))
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(u1) {
		t.Errorf("UUID %q is not an RFC 4122 v4 string", u1)
	}
	if u1 == u2 || u1 != UUID(sample(t, "")) {
		t.Errorf("UUID not content-derived: %s %s", u1, u2)
	}
}
