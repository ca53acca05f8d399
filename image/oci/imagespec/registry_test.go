package imagespec

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-node/berth/image/oci"
)

// writeTarball writes a one-file image for arch to dir/name.
func writeTarball(t *testing.T, dir, name, arch string) string {
	t.Helper()
	var buf bytes.Buffer
	img := oci.Image{
		Name:         "registry.k8s.io/pause:3.10.1",
		Entrypoint:   []string{"/pause"},
		Architecture: arch,
		Files:        []oci.File{{Path: "pause", Data: []byte("not really a program")}},
	}
	if _, err := oci.Write(&buf, img); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const registrySpec = `
name: registry.k8s.io/e2e-test-images/agnhost:2.59
title: agnhost
version: "2.59"
entrypoint: [/agnhost]
root:
  binaries:
    - {name: agnhost, src: "` + hostTrue + `", dst: /agnhost}
registry:
  dir: /var/registry
  images:
    - {name: pause, tag: testing, tarball: "${TARBALL}"}
`

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// TestRegistryLayout resolves pause:testing the way agnhost's
// fake-registry-server and a client do: the tag file names the index's
// digest, the index (verified against that digest, as containerd verifies
// what it fetched by digest) names the image's manifest for the platform,
// and every blob the manifest names is there under its digest.
func TestRegistryLayout(t *testing.T) {
	dir := t.TempDir()
	tarball := writeTarball(t, dir, "pause.tar", "amd64")
	s, err := Parse([]byte(registrySpec), map[string]string{"TARBALL": tarball})
	if err != nil {
		t.Fatal(err)
	}
	img, err := Build(context.Background(), s, dir, "")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]oci.File{}
	for _, f := range img.Files {
		files["/"+strings.TrimPrefix(f.Path, "/")] = f
	}
	get := func(p string) []byte {
		t.Helper()
		f, ok := files[p]
		if !ok || f.Dir {
			t.Fatalf("%s is not a file in the image", p)
		}
		if f.Mode != 0o644 {
			t.Errorf("%s has mode %04o, want 0644 (the server runs as user 5123)", p, f.Mode)
		}
		return f.Data
	}
	idxDigest := strings.TrimSpace(string(get("/var/registry/pause/manifests/testing")))
	idxJSON := get("/var/registry/pause/manifests/" + idxDigest)
	if got := sha(idxJSON); got != idxDigest {
		t.Fatalf("index file has digest %s, its tag says %s", got, idxDigest)
	}
	var idx oci.Index
	if err := json.Unmarshal(idxJSON, &idx); err != nil {
		t.Fatal(err)
	}
	if idx.MediaType != oci.MediaTypeIndex || len(idx.Manifests) != 1 {
		t.Fatalf("index = %s", idxJSON)
	}
	d := idx.Manifests[0]
	if d.Platform == nil || d.Platform.Architecture != "amd64" || d.Platform.OS != "linux" {
		t.Errorf("index's manifest has platform %+v, want linux/amd64", d.Platform)
	}
	manJSON := get("/var/registry/pause/manifests/" + d.Digest)
	if sha(manJSON) != d.Digest || int64(len(manJSON)) != d.Size {
		t.Fatalf("manifest file: digest %s, %d bytes; index says %s, %d", sha(manJSON), len(manJSON), d.Digest, d.Size)
	}
	var m oci.Manifest
	if err := json.Unmarshal(manJSON, &m); err != nil {
		t.Fatal(err)
	}
	if m.MediaType == "" {
		t.Error("manifest has no mediaType: the server could not set its Content-Type")
	}
	for _, b := range append([]oci.Descriptor{m.Config}, m.Layers...) {
		data := get("/var/registry/pause/blobs/" + b.Digest)
		if sha(data) != b.Digest {
			t.Errorf("blob %s has digest %s", b.Digest, sha(data))
		}
	}
	for _, p := range []string{"/var", "/var/registry", "/var/registry/pause/blobs"} {
		if f := files[p]; !f.Dir || f.Mode != 0o755 {
			t.Errorf("%s = %+v, want a directory 0755", p, f)
		}
	}
	if _, ok := files["/agnhost"]; !ok {
		t.Error("the root's files are gone")
	}
}

func TestRegistryErrors(t *testing.T) {
	dir := t.TempDir()
	arm := writeTarball(t, dir, "pause-arm64.tar", "arm64")
	build := func(spec string, vars map[string]string) error {
		s, err := Parse([]byte(spec), vars)
		if err != nil {
			return err
		}
		_, err = Build(context.Background(), s, dir, "")
		return err
	}
	for _, tc := range []struct {
		name, spec, tarball, want string
	}{
		{"other architecture", registrySpec, arm, "is for linux/arm64, the image for linux/amd64"},
		{"missing tarball", registrySpec, filepath.Join(dir, "nope.tar"), "registry.images[0] (pause:testing): open"},
		{"not a tarball", registrySpec, "/dev/null", "has no index.json"},
		{"name with a slash", strings.Replace(registrySpec, "name: pause", "name: e2e/pause", 1), arm, `registry.images[0].name "e2e/pause"`},
		{"digest as tag", strings.Replace(registrySpec, "tag: testing", "tag: \"sha256:00\"", 1), arm, `registry.images[0].tag "sha256:00"`},
		{"relative dir", strings.Replace(registrySpec, "dir: /var/registry", "dir: var/registry", 1), arm, `registry.dir "var/registry"`},
		{"same image twice", registrySpec + "    - {name: pause, tag: testing, tarball: x}\n", arm, "registry.images[1]: pause:testing is listed twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := build(tc.spec, map[string]string{"TARBALL": tc.tarball})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
