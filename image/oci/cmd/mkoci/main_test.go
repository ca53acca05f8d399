package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-node/berth/image/oci"
)

// TestRunWritesImportableLayout runs the command as make does and checks the
// tarball names the image and is identical across runs.
func TestRunWritesImportableLayout(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "pause")
	if err := os.WriteFile(src, []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	out1, out2 := filepath.Join(dir, "a.tar"), filepath.Join(dir, "b.tar")
	for _, out := range []string{out1, out2} {
		if err := run([]string{"-name", "registry.k8s.io/pause:3.10", "-entrypoint", "/pause", "-file", "pause=" + src, "-out", out}); err != nil {
			t.Fatalf("run: %v", err)
		}
	}
	a, err := os.ReadFile(out1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out2)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("two runs wrote different tarballs")
	}
	tr := tar.NewReader(bytes.NewReader(a))
	var idx oci.Index
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == "index.json" {
			if err := json.NewDecoder(tr).Decode(&idx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(idx.Manifests) != 1 || idx.Manifests[0].Annotations[oci.AnnotationImageName] != "registry.k8s.io/pause:3.10" {
		t.Errorf("index.json = %+v", idx)
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"-name", "x", "-file", "pause=" + filepath.Join(dir, "missing"), "-out", filepath.Join(dir, "o.tar")},
		{"-name", "x", "-file", "nodest", "-out", filepath.Join(dir, "o.tar")},
		{"-name", "x", "-file", "a=/etc/hostname"},
	} {
		if err := run(args); err == nil {
			t.Errorf("run(%s) succeeded", strings.Join(args, " "))
		}
	}
}
