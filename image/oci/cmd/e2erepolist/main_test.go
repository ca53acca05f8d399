package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	out := filepath.Join(t.TempDir(), "repo-list.yaml")
	if err := run([]string{"-registry", "registry.berth.test", "-out", out}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\npromoterE2eRegistry: registry.berth.test/registry.k8s.io/e2e-test-images\n") {
		t.Errorf("the file has no promoterE2eRegistry line for registry.berth.test:\n%s", b)
	}
	for name, args := range map[string][]string{
		"no registry": {"-out", out},
		"no out":      {"-registry", "registry.berth.test"},
		"bad":         {"-registry", "Bad Host", "-out", out},
		"extra":       {"-registry", "registry.berth.test", "-out", out, "x"},
	} {
		if err := run(args); err == nil {
			t.Errorf("%s: run(%q) succeeded", name, args)
		}
	}
}
