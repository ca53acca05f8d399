//go:build components

package imagespec

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-node/berth/image/elfarch"
	"github.com/berth-node/berth/image/oci"
)

// builtImage is one cluster image tarball as components.mk wrote it.
type builtImage struct {
	name    string
	man     oci.Manifest
	config  oci.Config
	entries map[string]*tar.Header
	data    map[string][]byte
}

func readTarball(t *testing.T, file string) builtImage {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("reading %s (make cluster-images): %v", file, err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(raw))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("%s: %s: %v", file, h.Name, err)
		}
		files[h.Name] = b
	}
	blob := func(d string) []byte {
		b, ok := files["blobs/sha256/"+strings.TrimPrefix(d, "sha256:")]
		if !ok {
			t.Fatalf("%s: blob %s missing", file, d)
		}
		return b
	}
	var idx oci.Index
	if err := json.Unmarshal(files["index.json"], &idx); err != nil || len(idx.Manifests) != 1 {
		t.Fatalf("%s: index.json: %v (%d manifests)", file, err, len(idx.Manifests))
	}
	img := builtImage{name: idx.Manifests[0].Annotations[oci.AnnotationImageName], entries: map[string]*tar.Header{}, data: map[string][]byte{}}
	if err := json.Unmarshal(blob(idx.Manifests[0].Digest), &img.man); err != nil || len(img.man.Layers) != 1 {
		t.Fatalf("%s: manifest: %v", file, err)
	}
	if err := json.Unmarshal(blob(img.man.Config.Digest), &img.config); err != nil {
		t.Fatalf("%s: config: %v", file, err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(blob(img.man.Layers[0].Digest)))
	if err != nil {
		t.Fatalf("%s: layer: %v", file, err)
	}
	lr := tar.NewReader(zr)
	for {
		h, err := lr.Next()
		if err == io.EOF {
			return img
		}
		if err != nil {
			t.Fatalf("%s: layer: %v", file, err)
		}
		p := "/" + strings.TrimSuffix(h.Name, "/")
		img.entries[p] = h
		if img.data[p], err = io.ReadAll(lr); err != nil {
			t.Fatalf("%s: layer %s: %v", file, h.Name, err)
		}
	}
}

// resolve follows symlinks inside the image, as exec would.
func (img builtImage) resolve(t *testing.T, p string) string {
	t.Helper()
	for range 16 {
		h, ok := img.entries[p]
		if !ok {
			t.Fatalf("%s: %s is not in the image", img.name, p)
		}
		if h.Typeflag != tar.TypeSymlink {
			return p
		}
		if path.IsAbs(h.Linkname) {
			p = h.Linkname
		} else {
			p = path.Join(path.Dir(p), h.Linkname)
		}
	}
	t.Fatalf("%s: %s: too many symlinks", img.name, p)
	return ""
}

// checkRuns checks that img would run on an arch node: its config names
// arch, its entrypoint is an executable ELF file, and every ELF file in it is
// for arch's machine (a host binary in an arm64 image fails only at exec).
func (img builtImage) checkRuns(t *testing.T, arch string) {
	t.Helper()
	if img.config.Architecture != arch || img.config.OS != "linux" {
		t.Errorf("config is for %s/%s, want linux/%s", img.config.OS, img.config.Architecture, arch)
	}
	want, ok := elfarch.Machine(arch)
	if !ok {
		t.Fatalf("architecture %q: want one of %s", arch, elfarch.Names)
	}
	if len(img.config.Config.Entrypoint) == 0 {
		t.Fatal("no entrypoint")
	}
	ep := img.resolve(t, img.config.Config.Entrypoint[0])
	if h := img.entries[ep]; h.Typeflag != tar.TypeReg || h.Mode&0o111 == 0 || !bytes.HasPrefix(img.data[ep], []byte("\x7fELF")) {
		t.Errorf("entrypoint %s: type %c mode %o, want an executable ELF file", ep, h.Typeflag, h.Mode)
	}
	for p, h := range img.entries {
		if h.Typeflag == tar.TypeReg {
			if err := elfarch.Check(p, img.data[p], want); err != nil {
				t.Error(err)
			}
		}
	}
}

// componentsEnv is what make test-components-images passes: the node
// architecture's components directory, the cluster images' references and
// the architecture itself.
func componentsEnv(t *testing.T) (dir string, refs []string, arch string) {
	t.Helper()
	dir, arch = os.Getenv("BERTH_COMPONENTS_DIR"), os.Getenv("BERTH_ARCH")
	refs = strings.Fields(os.Getenv("BERTH_CLUSTER_IMAGES"))
	if dir == "" || len(refs) == 0 || arch == "" {
		t.Fatal("BERTH_COMPONENTS_DIR, BERTH_CLUSTER_IMAGES or BERTH_ARCH is unset: run make test-components-images (ARCH=arm64 for arm64's)")
	}
	return dir, refs, arch
}

// TestNodeImages checks the pause and demo tarballs berth imports on the
// node: built for the node's architecture, entrypoint and all.
func TestNodeImages(t *testing.T) {
	dir, _, arch := componentsEnv(t)
	for file, title := range map[string]string{"pause.tar": "pause", "demo.tar": "berth-demo"} {
		t.Run(title, func(t *testing.T) {
			img := readTarball(t, filepath.Join(dir, "images", file))
			if a := img.man.Annotations; a[oci.AnnotationTitle] != title {
				t.Errorf("annotations %v, want title %s", a, title)
			}
			img.checkRuns(t, arch)
		})
	}
}

// TestClusterImages opens each tarball `make cluster-images` wrote and
// checks what a node needs of it: the name the registry serves it under,
// its annotations, the node's architecture, an entrypoint that is an
// executable ELF of its machine (every other ELF file too), and its
// multi-call links.
func TestClusterImages(t *testing.T) {
	dir, refs, arch := componentsEnv(t)
	links := map[string][]string{
		"kube-proxy": {"/usr/sbin/iptables", "/usr/sbin/iptables-save", "/usr/sbin/iptables-restore",
			"/usr/sbin/ip6tables", "/usr/sbin/ip6tables-save", "/usr/sbin/ip6tables-restore",
			"/usr/sbin/iptables-nft", "/usr/sbin/iptables-nft-save", "/usr/sbin/iptables-nft-restore"},
		"busybox": {"/bin/sh", "/bin/ls", "/bin/cat", "/bin/nslookup", "/bin/wget", "/bin/sleep", "/bin/ps",
			"/bin/ip", "/bin/grep", "/bin/head", "/bin/env", "/bin/id", "/bin/mount", "/bin/stat"},
		"install-cni": {"/cni/bin/bridge", "/cni/bin/host-local", "/cni/bin/loopback", "/cni/bin/portmap"},
		// What flannel's manifest runs in them: cp of the plugin, then
		// install-conf, then flanneld, which execs iptables.
		"flannel-cni-plugin": {"/flannel", "/bin/cp"},
		"flannel": {"/opt/bin/flanneld", "/opt/bin/install-conf", "/usr/sbin/iptables", "/usr/sbin/iptables-save",
			"/usr/sbin/iptables-restore", "/usr/sbin/ip6tables"},
	}
	for _, ref := range refs {
		repo, tag, _ := strings.Cut(path.Base(ref), ":")
		t.Run(repo, func(t *testing.T) {
			img := readTarball(t, filepath.Join(dir, "images", repo+".tar"))
			if img.name != ref {
				t.Errorf("tarball names itself %q, want %q", img.name, ref)
			}
			if a := img.man.Annotations; a[oci.AnnotationTitle] != repo || a[oci.AnnotationVersion] != tag {
				t.Errorf("annotations %v, want title %s and version %s", a, repo, tag)
			}
			img.checkRuns(t, arch)
			for _, l := range links[repo] {
				if p := img.resolve(t, l); img.entries[p].Typeflag != tar.TypeReg {
					t.Errorf("%s resolves to %s, no regular file", l, p)
				}
			}
		})
	}
}
