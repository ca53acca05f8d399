package version

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

const importPath = "github.com/berth-node/berth/internal/version"

// TestMakefileStampsThisPackage builds berth the way the Makefile does,
// with the -X flag read from its LDFLAGS, and runs `berth version`: the
// linker ignores an -X for a path that does not exist, so a package move
// would otherwise leave every image saying "dev".
func TestMakefileStampsThisPackage(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^LDFLAGS\s*:=.*-X (\S+)\.Version=\$\(VERSION\)`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("the Makefile's LDFLAGS has no -X ....Version=$(VERSION)")
	}
	if got := string(m[1]); got != importPath {
		t.Fatalf("the Makefile stamps %s.Version; the version lives in %s", got, importPath)
	}
	bin := filepath.Join(t.TempDir(), "berth")
	const stamp = "v9.9.9-stamped"
	// The Makefile's own build flags (-trimpath, CGO off, linux, the host's arch), so
	// that this build's compiles are the ones `make build` caches: under
	// make test the two run side by side, and different flags would compile
	// berth and its ~500 dependencies twice. Only -X differs, and it is a
	// link flag.
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "-ldflags", "-s -w -X "+string(m[1])+".Version="+stamp, "./init")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./init: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("berth version: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != stamp {
		t.Errorf("berth version printed %q, want the stamped %q", got, stamp)
	}
}
