//go:build components

package builtin

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestEmbeddedIsGenerated holds the embedded accepts data byte for byte
// to what `make accepts` generated (BERTH_COMPONENTS_DIR/accepts) for the
// versions components.mk pins, so that they cannot drift: after a version
// bump or a generator change, `make builtin-manifest` copies them in.
func TestEmbeddedIsGenerated(t *testing.T) {
	dir := os.Getenv("BERTH_COMPONENTS_DIR")
	if dir == "" {
		t.Fatal("BERTH_COMPONENTS_DIR is not set: run `make accepts` and set it to build/components")
	}
	m, err := Manifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		component string
		gz        []byte
	}{{"kubelet", kubeletGz}, {"containerd", containerdGz}} {
		gen := filepath.Join(dir, "accepts", f.component+"-"+m.Components[f.component]+".json")
		want, err := os.ReadFile(gen)
		if err != nil {
			t.Fatalf("%v: run `make accepts`", err)
		}
		got, err := gunzip(f.gz)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s.json.gz differs from %s (%d and %d bytes): run make builtin-manifest", f.component, gen, len(got), len(want))
		}
	}
}
