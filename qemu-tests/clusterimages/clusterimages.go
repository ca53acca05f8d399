// Package clusterimages is the test cluster's images as a guest pulls them:
// the OCI tarballs `make cluster-images` builds (install-cni, kube-proxy,
// CoreDNS, busybox) and the demo image, served by the registry stand-in
// under registry.berth.test, which a berth node reaches through the
// berth.dev/registry-mirrors annotation in its user data. The QEMU tests,
// `make demo` and `make cluster` share it; WithUpstream adds the e2e
// suite's images under their upstream names.
package clusterimages

import (
	"archive/tar"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/berth-node/berth/image/oci"
	"github.com/berth-node/berth/qemu-tests/awsstub"
	"github.com/berth-node/berth/qemu-tests/awsstub/registry"
)

// Registry is the registry host every cluster image reference names.
const Registry = "registry.berth.test"

// demoRef is the demo image's reference in the cluster: demo.tar is named
// localhost/berth-demo:v1 for the node image's baked import, and served
// under this name for pulls.
const demoRef = Registry + "/berth/demo:v1"

// Set is the cluster's image references and the tarballs behind them.
type Set struct {
	InstallCNI, KubeProxy, CoreDNS, Busybox, Demo string
	// Flannel and FlannelCNIPlugin are flannel's two images (TestCluster's
	// CNI across nodes).
	Flannel, FlannelCNIPlugin string
	// Rollout is the rollout controller's image (make rollout-image),
	// which TestRollout deploys.
	Rollout string
	// paths maps each reference to its tarball.
	paths map[string]string
	// missing holds, by tarball name, why an optional image is absent.
	missing map[string]error
}

// Find reads the image tarballs under componentsDir/images: each
// tarball's reference is the name its index gives it (mkoci writes the
// pinned version into the tag), so the tests pull exactly what was built.
// install-cni and the demo image must be there: every joining node pulls
// the CNI. kube-proxy, CoreDNS and busybox are taken when present: the
// arm64 tests' directory holds only what they pull (make test-qemu-arm64
// builds no arm64 CoreDNS), and a caller that needs one says so with
// Require. A tarball that is there but unreadable or misnamed is an error
// whatever it is.
func Find(componentsDir string) (Set, error) {
	dir := filepath.Join(componentsDir, "images")
	s := Set{paths: map[string]string{}, missing: map[string]error{}}
	for _, im := range []struct {
		file     string
		ref      *string
		optional bool
		// make is the target that builds it, when not cluster-images.
		make string
	}{
		{"install-cni.tar", &s.InstallCNI, false, ""},
		{"kube-proxy.tar", &s.KubeProxy, true, ""},
		{"coredns.tar", &s.CoreDNS, true, ""},
		{"busybox.tar", &s.Busybox, true, ""},
		{"flannel.tar", &s.Flannel, true, ""},
		{"flannel-cni-plugin.tar", &s.FlannelCNIPlugin, true, ""},
		{"berth-rollout.tar", &s.Rollout, true, "rollout-image"},
	} {
		p := filepath.Join(dir, im.file)
		target := cmp.Or(im.make, "cluster-images")
		if _, err := os.Stat(p); im.optional && errors.Is(err, fs.ErrNotExist) {
			s.missing[im.file] = fmt.Errorf("cluster image %s (make %s builds it): %w", p, target, err)
			continue
		}
		name, err := ImageName(p)
		if err != nil {
			return s, fmt.Errorf("cluster image %s (make %s builds it): %w", p, target, err)
		}
		if !strings.HasPrefix(name, Registry+"/") {
			return s, fmt.Errorf("cluster image %s is named %q, want a name under %s/", p, name, Registry)
		}
		*im.ref = name
		s.paths[name] = p
	}
	demo := filepath.Join(dir, "demo.tar")
	if _, err := os.Stat(demo); err != nil {
		return s, fmt.Errorf("demo image: %w", err)
	}
	s.Demo = demoRef
	s.paths[demoRef] = demo
	return s, nil
}

// WithUpstream adds every image tarball in dir (build/components/
// e2e-images: the e2e suite's images, named as upstream names them, e.g.
// registry.k8s.io/e2e-test-images/agnhost:2.59) to the set, served under
// Registry/<upstream name>: the e2e suite's KUBE_TEST_REPO_LIST sends each
// upstream registry there (image/oci/e2erepo), and the node's mirror
// annotation for Registry reaches the stand-in. A name already under
// Registry, without a tag, or that two tarballs share is an error naming
// the file.
func (s Set) WithUpstream(dir string) (Set, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.tar"))
	if err != nil {
		return s, fmt.Errorf("listing %s: %w", dir, err)
	}
	if len(files) == 0 {
		return s, fmt.Errorf("no image tarballs in %s (make e2e-images builds them)", dir)
	}
	paths := make(map[string]string, len(s.paths)+len(files))
	for k, v := range s.paths {
		paths[k] = v
	}
	for _, p := range files {
		name, err := ImageName(p)
		if err != nil {
			return s, err
		}
		if strings.HasPrefix(name, Registry+"/") {
			return s, fmt.Errorf("upstream image %s is named %q, under the cluster's own registry", p, name)
		}
		ref := Registry + "/" + name
		if _, _, ok := splitRef(ref); !ok {
			return s, fmt.Errorf("upstream image %s is named %q: want REGISTRY/REPO:TAG", p, name)
		}
		if other, dup := paths[ref]; dup {
			return s, fmt.Errorf("upstream images %s and %s are both named %q", other, p, name)
		}
		paths[ref] = p
	}
	s.paths = paths
	return s, nil
}

// Require says which of the named tarballs (kube-proxy.tar, coredns.tar,
// busybox.tar) Find did not find, and what builds them.
func (s Set) Require(files ...string) error {
	var errs []error
	for _, f := range files {
		if err := s.missing[f]; err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ImageName returns the io.containerd.image.name of the one image in an
// OCI image-layout tarball.
func ImageName(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return "", fmt.Errorf("%s: no index.json", path)
		}
		if err != nil {
			return "", fmt.Errorf("reading %s: %w", path, err)
		}
		if strings.TrimPrefix(h.Name, "./") != "index.json" {
			continue
		}
		var idx oci.Index
		if err := json.NewDecoder(io.LimitReader(tr, 1<<20)).Decode(&idx); err != nil {
			return "", fmt.Errorf("%s: index.json: %w", path, err)
		}
		if len(idx.Manifests) != 1 {
			return "", fmt.Errorf("%s: index.json has %d manifests, want 1", path, len(idx.Manifests))
		}
		name := idx.Manifests[0].Annotations[oci.AnnotationImageName]
		if name == "" {
			return "", fmt.Errorf("%s: index.json's manifest has no io.containerd.image.name", path)
		}
		return name, nil
	}
}

// Serve starts the registry stand-in on 127.0.0.1 with every image of the
// set, for anonymous pulls. guestURL is its address as a QEMU guest dials
// it (http://10.0.2.2:PORT); stop shuts it down.
func (s Set) Serve(log *slog.Logger) (srv *registry.Server, guestURL string, stop func(), err error) {
	var images []registry.OCIImage
	for ref, p := range s.paths {
		repo, tag, ok := splitRef(ref)
		if !ok {
			return nil, "", nil, fmt.Errorf("cluster image reference %q: want %s/REPO:TAG", ref, Registry)
		}
		images = append(images, registry.OCIImage{Repository: repo, Tag: tag, Path: p})
	}
	srv, url, stop, err := registry.StartAnonymous("127.0.0.1:0", images, log)
	if err != nil {
		return nil, "", nil, fmt.Errorf("starting the registry stand-in for the cluster's images: %w", err)
	}
	return srv, awsstub.GuestURL(url), stop, nil
}

// splitRef splits registry.berth.test/REPO:TAG.
func splitRef(ref string) (repo, tag string, ok bool) {
	rest, ok := strings.CutPrefix(ref, Registry+"/")
	if !ok {
		return "", "", false
	}
	i := strings.LastIndex(rest, ":")
	if i <= 0 || i == len(rest)-1 {
		return "", "", false
	}
	return rest[:i], rest[i+1:], true
}

// MirrorAnnotation is the berth.dev/registry-mirrors value that sends a
// node's pulls of registry.berth.test to the stand-in at guestURL.
func MirrorAnnotation(guestURL string) string {
	b, _ := json.Marshal(map[string][]string{Registry: {guestURL}})
	return string(b)
}
