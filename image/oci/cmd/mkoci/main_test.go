package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
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
		if err := run(context.Background(), []string{"-name", "registry.k8s.io/pause:3.10", "-title", "pause", "-version", "3.10",
			"-entrypoint", "/pause", "-file", "pause=" + src, "-out", out}); err != nil {
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
		t.Fatalf("index.json = %+v", idx)
	}
	var man oci.Manifest
	tr = tar.NewReader(bytes.NewReader(a))
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("manifest blob not found: %v", err)
		}
		if h.Name == "blobs/sha256/"+strings.TrimPrefix(idx.Manifests[0].Digest, "sha256:") {
			if err := json.NewDecoder(tr).Decode(&man); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if man.Annotations[oci.AnnotationTitle] != "pause" || man.Annotations[oci.AnnotationVersion] != "3.10" {
		t.Errorf("manifest annotations = %v", man.Annotations)
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"-name", "x", "-file", "pause=" + filepath.Join(dir, "missing"), "-out", filepath.Join(dir, "o.tar")},
		{"-name", "x", "-file", "nodest", "-out", filepath.Join(dir, "o.tar")},
		{"-name", "x", "-file", "a=/etc/hostname"},
	} {
		if err := run(context.Background(), args); err == nil {
			t.Errorf("run(%s) succeeded", strings.Join(args, " "))
		}
	}
}

// layerEntries reads an image-layout tarball's single layer.
func layerEntries(t *testing.T, b []byte) map[string]*tar.Header {
	t.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		files[h.Name] = data
	}
	var idx oci.Index
	var man oci.Manifest
	blob := func(d string) []byte { return files["blobs/sha256/"+strings.TrimPrefix(d, "sha256:")] }
	if err := json.Unmarshal(files["index.json"], &idx); err != nil || len(idx.Manifests) != 1 {
		t.Fatalf("index.json: %v %+v", err, idx)
	}
	if err := json.Unmarshal(blob(idx.Manifests[0].Digest), &man); err != nil || len(man.Layers) != 1 {
		t.Fatalf("manifest: %v %+v", err, man)
	}
	if man.Annotations[oci.AnnotationVersion] != "v9" || man.Annotations[oci.AnnotationTitle] != "tool" {
		t.Errorf("manifest annotations %v", man.Annotations)
	}
	zr, err := gzip.NewReader(bytes.NewReader(blob(man.Layers[0].Digest)))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*tar.Header{}
	lr := tar.NewReader(zr)
	for {
		h, err := lr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = h
	}
}

func TestRunSpec(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "tool.yaml")
	if err := os.WriteFile(spec, []byte(`
name: registry.berth.test/berth/tool:${V}
title: tool
version: ${V}
entrypoint: [/usr/sbin/tool]
root:
  binaries:
    - {name: tool, src: /bin/true, links: [tool-a, tool-b]}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "tool.tar")
	if err := run(context.Background(), []string{"-spec", spec, "-var", "V=v9", "-out", out}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	layer := layerEntries(t, b)
	if h := layer["usr/sbin/tool"]; h == nil || h.Typeflag != tar.TypeReg || h.Mode != 0o755 {
		t.Errorf("usr/sbin/tool = %+v", h)
	}
	for _, ln := range []string{"usr/sbin/tool-a", "usr/sbin/tool-b"} {
		if h := layer[ln]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "tool" {
			t.Errorf("%s = %+v, want a link to tool", ln, h)
		}
	}
	var libs int
	for name := range layer {
		if strings.Contains(name, ".so") {
			libs++
		}
	}
	if libs == 0 {
		t.Errorf("no shared library in the layer: %v", layer)
	}

	for _, args := range [][]string{
		{"-spec", spec, "-out", out},                                      // ${V} unset
		{"-spec", spec, "-var", "V=v9", "-name", "x", "-out", out},        // both ways at once
		{"-name", "x", "-var", "V=v9", "-file", "a=" + spec, "-out", out}, // -var without -spec
		{"-spec", spec, "-var", "novalue", "-out", out},
	} {
		if err := run(context.Background(), args); err == nil {
			t.Errorf("run(%s) succeeded", strings.Join(args, " "))
		}
	}
}

// imageConfig reads the image config of an image-layout tarball.
func imageConfig(t *testing.T, file string) oci.Config {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(raw))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		files[h.Name] = b
	}
	blob := func(d string) []byte { return files["blobs/sha256/"+strings.TrimPrefix(d, "sha256:")] }
	var idx oci.Index
	var man oci.Manifest
	var cfg oci.Config
	if err := json.Unmarshal(files["index.json"], &idx); err != nil || len(idx.Manifests) != 1 {
		t.Fatalf("%s: index.json: %v %+v", file, err, idx)
	}
	if err := json.Unmarshal(blob(idx.Manifests[0].Digest), &man); err != nil {
		t.Fatalf("%s: manifest: %v", file, err)
	}
	if err := json.Unmarshal(blob(man.Config.Digest), &cfg); err != nil {
		t.Fatalf("%s: config: %v", file, err)
	}
	return cfg
}

// TestRunArch checks that -arch reaches the image config, in both modes, and
// that a host (x86-64) program is refused in an arm64 image: on a Graviton
// node it would fail only at exec.
func TestRunArch(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "hello")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho hello\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "o.tar")
	for _, arch := range []string{"amd64", "arm64"} {
		if err := run(context.Background(), []string{"-name", "x:1", "-arch", arch, "-entrypoint", "/hello", "-file", "hello=" + script, "-out", out}); err != nil {
			t.Fatalf("-arch %s: %v", arch, err)
		}
		if cfg := imageConfig(t, out); cfg.Architecture != arch || cfg.OS != "linux" {
			t.Errorf("-arch %s: config says %s/%s", arch, cfg.OS, cfg.Architecture)
		}
	}

	// A spec with no architecture takes -arch's.
	noArch := filepath.Join(dir, "noarch.yaml")
	if err := os.WriteFile(noArch, []byte(`
name: registry.berth.test/berth/tool:v9
title: tool
version: v9
entrypoint: [/hello]
root:
  files:
    - {src: `+script+`, dst: /hello, mode: "0755"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), []string{"-spec", noArch, "-arch", "arm64", "-out", out}); err != nil {
		t.Fatalf("-spec -arch arm64: %v", err)
	}
	if cfg := imageConfig(t, out); cfg.Architecture != "arm64" {
		t.Errorf("-spec -arch arm64: config says %s", cfg.Architecture)
	}
	if err := run(context.Background(), []string{"-spec", noArch, "-out", out}); err != nil {
		t.Fatalf("-spec: %v", err)
	}
	if cfg := imageConfig(t, out); cfg.Architecture != "amd64" {
		t.Errorf("-spec with no -arch: config says %s, want amd64", cfg.Architecture)
	}

	amd64Spec := filepath.Join(dir, "amd64.yaml")
	if err := os.WriteFile(amd64Spec, []byte(`
name: registry.berth.test/berth/tool:v9
title: tool
version: v9
architecture: amd64
entrypoint: [/hello]
root:
  files:
    - {src: `+script+`, dst: /hello, mode: "0755"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	binSpec := filepath.Join(dir, "bin.yaml")
	if err := os.WriteFile(binSpec, []byte(`
name: registry.berth.test/berth/tool:v9
title: tool
version: v9
entrypoint: [/usr/bin/true]
root:
  binaries:
    - {name: true, src: /bin/true}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-name", "x:1", "-arch", "arm64", "-entrypoint", "/true", "-file", "true=/bin/true", "-out", out}, "ELF for EM_X86_64"},
		{[]string{"-name", "x:1", "-arch", "riscv64", "-entrypoint", "/hello", "-file", "hello=" + script, "-out", out}, `-arch "riscv64"`},
		{[]string{"-spec", amd64Spec, "-arch", "arm64", "-out", out}, "is for amd64"},
		{[]string{"-spec", binSpec, "-arch", "arm64", "-out", out}, "ELF for EM_X86_64"},
	} {
		err := run(context.Background(), tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%s) = %v, want an error with %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

// TestRunSysroot builds an arm64 image whose host program comes from an
// arm64 sysroot, as make cluster-images ARCH=arm64 packs kube-proxy's
// iptables and busybox; -sysroot and -host-files make sense only with a
// spec.
func TestRunSysroot(t *testing.T) {
	dir := t.TempDir()
	specFile := filepath.Join(dir, "tool.yaml")
	if err := os.WriteFile(specFile, []byte(`
name: registry.berth.test/berth/tool:v9
title: tool
version: v9
entrypoint: [/usr/sbin/mkfs.ext4]
root:
  binaries:
    - {name: mkfs.ext4}
  plugins:
    - {dir: "/usr/lib/${MULTIARCH}/xtables"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	sysroot, err := filepath.Abs("../../../elfdeps/testdata/arm64root")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "tool.tar")
	if err := run(context.Background(), []string{"-spec", specFile, "-arch", "arm64", "-sysroot", sysroot, "-out", out}); err != nil {
		t.Fatalf("-spec -arch arm64 -sysroot: %v", err)
	}
	if cfg := imageConfig(t, out); cfg.Architecture != "arm64" {
		t.Errorf("config says %s, want arm64", cfg.Architecture)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	layer := map[string]bool{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(h.Name, "blobs/") {
			if zr, err := gzip.NewReader(tr); err == nil {
				lr := tar.NewReader(zr)
				for {
					lh, err := lr.Next()
					if err != nil {
						break
					}
					layer[lh.Name] = true
				}
			}
		}
	}
	for _, p := range []string{"usr/sbin/mkfs.ext4", "lib/ld-linux-aarch64.so.1", "usr/lib/aarch64-linux-gnu/xtables/libxt_a.so"} {
		if !layer[p] {
			t.Errorf("layer lacks %s (has %v)", p, layer)
		}
	}
	for _, args := range [][]string{
		{"-name", "x:1", "-sysroot", sysroot, "-entrypoint", "/true", "-file", "true=/bin/true", "-out", out},
		{"-name", "x:1", "-host-files", "-entrypoint", "/true", "-file", "true=/bin/true"},
	} {
		if err := run(context.Background(), args); err == nil || !strings.Contains(err.Error(), "-spec files only") {
			t.Errorf("run(%s) = %v, want a -spec only error", strings.Join(args, " "), err)
		}
	}
	if err := run(context.Background(), []string{"-spec", specFile, "-arch", "arm64", "-sysroot", sysroot, "-host-files"}); err != nil {
		t.Errorf("-host-files needs no -out: %v", err)
	}
}
