package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps what Check says instead of
// failing the test running it; its Fatalf stops Check as t.Fatalf does.
type recorder struct {
	testing.TB
	said []string
}

type stopped struct{}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.said = append(r.said, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.said = append(r.said, fmt.Sprintf(format, args...))
	panic(stopped{})
}

func check(t *testing.T, path string, got []byte, update bool) []string {
	t.Helper()
	r := &recorder{TB: t}
	func() {
		defer func() {
			if p := recover(); p != nil {
				if _, ok := p.(stopped); !ok {
					panic(p)
				}
			}
		}()
		Check(r, path, got, update)
	}()
	return r.said
}

// The same output passes; another fails naming the file and showing
// both; a missing file fails saying how to write it; with update the
// file is written from the run, and the run then passes.
func TestCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.golden")
	if said := check(t, path, []byte("a\n"), false); len(said) != 1 || !strings.Contains(said[0], "go test -update writes it") {
		t.Errorf("no golden file: %q", said)
	}
	if said := check(t, path, []byte("a\n"), true); len(said) != 0 {
		t.Errorf("with update: %q", said)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "a\n" {
		t.Errorf("update wrote %q, %v", b, err)
	}
	if said := check(t, path, []byte("a\n"), false); len(said) != 0 {
		t.Errorf("the same output: %q", said)
	}
	said := check(t, path, []byte("b\n"), false)
	if len(said) != 1 || !strings.Contains(said[0], path+": differs from the golden file") || !strings.Contains(said[0], "got:\nb\n") || !strings.Contains(said[0], "want:\na\n") {
		t.Errorf("another output: %q", said)
	}
	// A new golden file's folder is made; one under a file cannot be.
	nested := filepath.Join(t.TempDir(), "new", "case.golden")
	if said := check(t, nested, []byte("c"), true); len(said) != 0 {
		t.Errorf("with update, in a folder not yet made: %q", said)
	}
	if said := check(t, filepath.Join(path, "x.golden"), []byte("a"), true); len(said) != 1 || !strings.Contains(said[0], "rewriting the golden file") {
		t.Errorf("an update that cannot write: %q", said)
	}
}
