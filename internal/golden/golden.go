// Package golden keeps a test's expected output in a file under
// testdata/ and compares each run's output with it. With update (each
// test package's own `go test -update` flag) the file is rewritten from
// the run first, for a change that is meant, and the change then shows
// in the diff for review.
package golden

import (
	"bytes"
	"os"
	"testing"

	"github.com/berth-node/berth/internal/fsutil"
)

// Check compares got with the golden file at path and fails t, naming
// the file and showing both, when they differ; with update it writes got
// to path first, making its folder if need be.
func Check(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := fsutil.WriteFileAtomic(path, got, 0o644); err != nil {
			t.Fatalf("rewriting the golden file: %v", err)
			return
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
		return
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: differs from the golden file (go test -update rewrites it):\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}
