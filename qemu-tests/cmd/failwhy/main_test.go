package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden file")

// The golden file holds what failwhy prints for testdata/suite.log, read
// against testdata/src: TestA's error and its last line (a wait through a
// helper) with two continuation lines kept, not its t.Log lines nor the
// harness's (a logf under a fmt.Errorf, a console tail in a cleanup); TestB's subtest's t.Fatal written over two
// lines, the parent silent; TestD, which wrote nothing; not TestC, which
// passed.
func TestGolden(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "suite.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fails, err := parse(f)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	write(&out, fails, sourceLines([]string{"testdata/none", filepath.Join("testdata", "src")}), 2)
	golden := filepath.Join("testdata", "why.golden")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != string(want) {
		t.Errorf("failwhy printed:\n%s\nwant (%s):\n%s", out.String(), golden, want)
	}
}

// A message whose file is in no source directory cannot be told from a
// t.Log line, so it is shown.
func TestUnknownFileShown(t *testing.T) {
	fails, err := parse(strings.NewReader("=== RUN   TestX\n    other_test.go:3: something\n    other_test.go:4: more\n--- FAIL: TestX (1.00s)\n"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	write(&out, fails, sourceLines([]string{t.TempDir()}), 6)
	if want := "why TestX failed:\n  other_test.go:3: something\n  other_test.go:4: more\n"; out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
}

func FuzzParse(f *testing.F) {
	seed, err := os.ReadFile(filepath.Join("testdata", "suite.log"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte("--- FAIL: TestX\n        orphan continuation\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		fails, err := parse(bytes.NewReader(b))
		if err != nil {
			return
		}
		var out bytes.Buffer
		write(&out, fails, sourceLines([]string{filepath.Join("testdata", "src")}), 3)
		if len(fails) > 0 && out.Len() == 0 && !strings.Contains(string(b), "/") {
			t.Errorf("%d failed tests and nothing printed", len(fails))
		}
	})
}
