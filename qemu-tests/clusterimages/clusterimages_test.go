package clusterimages

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-node/berth/image/oci"
)

// writeImage writes a one-file OCI tarball named name into dir/file.
func writeImage(t *testing.T, dir, file, name string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := oci.Write(f, oci.Image{Name: name, Entrypoint: []string{"/x"}, Files: []oci.File{{Path: "x", Mode: 0o755, Data: []byte("x")}}}); err != nil {
		t.Fatal(err)
	}
}

func TestFindNamesEachImageByItsIndex(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "images")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeImage(t, dir, "install-cni.tar", "registry.berth.test/berth/install-cni:v1.7.1")
	writeImage(t, dir, "kube-proxy.tar", "registry.berth.test/berth/kube-proxy:v1.35.4")
	writeImage(t, dir, "coredns.tar", "registry.berth.test/berth/coredns:v1.15.0")
	writeImage(t, dir, "busybox.tar", "registry.berth.test/berth/busybox:1.35.0-4")
	writeImage(t, dir, "flannel.tar", "registry.berth.test/berth/flannel:v0.28.10")
	writeImage(t, dir, "flannel-cni-plugin.tar", "registry.berth.test/berth/flannel-cni-plugin:v1.9.1-flannel1")
	writeImage(t, dir, "demo.tar", "localhost/berth-demo:v1")
	s, err := Find(root)
	if err != nil {
		t.Fatal(err)
	}
	want := Set{InstallCNI: "registry.berth.test/berth/install-cni:v1.7.1", KubeProxy: "registry.berth.test/berth/kube-proxy:v1.35.4",
		CoreDNS: "registry.berth.test/berth/coredns:v1.15.0", Busybox: "registry.berth.test/berth/busybox:1.35.0-4", Demo: "registry.berth.test/berth/demo:v1",
		Flannel: "registry.berth.test/berth/flannel:v0.28.10", FlannelCNIPlugin: "registry.berth.test/berth/flannel-cni-plugin:v1.9.1-flannel1"}
	if s.InstallCNI != want.InstallCNI || s.KubeProxy != want.KubeProxy || s.CoreDNS != want.CoreDNS || s.Busybox != want.Busybox || s.Demo != want.Demo ||
		s.Flannel != want.Flannel || s.FlannelCNIPlugin != want.FlannelCNIPlugin {
		t.Errorf("Find = %+v, want %+v", s, want)
	}
	if s.paths[s.Demo] != filepath.Join(dir, "demo.tar") || len(s.paths) != 7 {
		t.Errorf("paths %v", s.paths)
	}

	// A tarball named outside the cluster registry is refused, by path.
	writeImage(t, dir, "coredns.tar", "docker.io/coredns/coredns:1.12")
	if _, err := Find(root); err == nil || !strings.Contains(err.Error(), "coredns.tar") || !strings.Contains(err.Error(), Registry) {
		t.Errorf("Find with a foreign name: %v", err)
	}
	// An optional one missing is found missing only when required, and
	// the error says what builds it.
	writeImage(t, dir, "coredns.tar", "registry.berth.test/berth/coredns:v1.15.0")
	os.Remove(filepath.Join(dir, "busybox.tar"))
	s, err = Find(root)
	if err != nil {
		t.Fatalf("Find without busybox.tar: %v", err)
	}
	if s.Busybox != "" || s.CoreDNS != want.CoreDNS {
		t.Errorf("Find without busybox.tar = %+v", s)
	}
	if err := s.Require("kube-proxy.tar", "coredns.tar"); err != nil {
		t.Errorf("Require of present images: %v", err)
	}
	if err := s.Require("coredns.tar", "busybox.tar"); err == nil || !strings.Contains(err.Error(), "busybox.tar") || !strings.Contains(err.Error(), "make cluster-images") {
		t.Errorf("Require without busybox.tar: %v", err)
	}
	// install-cni is no option: every joining node pulls it.
	os.Remove(filepath.Join(dir, "install-cni.tar"))
	if _, err := Find(root); err == nil || !strings.Contains(err.Error(), "install-cni.tar") || !strings.Contains(err.Error(), "make cluster-images") {
		t.Errorf("Find without install-cni.tar: %v", err)
	}
}

func TestImageNameRejectsNonLayouts(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.tar")
	if err := os.WriteFile(p, []byte("not a tar"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ImageName(p); err == nil {
		t.Error("ImageName of a non-tar succeeded")
	}
}

func TestSplitRef(t *testing.T) {
	for _, tc := range []struct{ ref, repo, tag string }{
		{"registry.berth.test/berth/demo:v1", "berth/demo", "v1"},
		{"registry.berth.test/berth/busybox:1.35.0-4", "berth/busybox", "1.35.0-4"},
		{"registry.berth.test/berth/demo", "", ""},
		{"docker.io/berth/demo:v1", "", ""},
		{"registry.berth.test/berth/demo:", "", ""},
	} {
		repo, tag, ok := splitRef(tc.ref)
		if repo != tc.repo || tag != tc.tag || ok != (tc.repo != "") {
			t.Errorf("splitRef(%q) = %q %q %v", tc.ref, repo, tag, ok)
		}
	}
}

func TestMirrorAnnotation(t *testing.T) {
	var m map[string][]string
	if err := json.Unmarshal([]byte(MirrorAnnotation("http://10.0.2.2:5000")), &m); err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 || len(m[Registry]) != 1 || m[Registry][0] != "http://10.0.2.2:5000" {
		t.Errorf("MirrorAnnotation: %v", m)
	}
}

// The e2e suite's images are served under Registry/<upstream name>, as
// its repo list asks for them, by the real registry stand-in.
func TestWithUpstreamServesUpstreamNames(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "images")
	e2e := filepath.Join(root, "e2e-images")
	for _, d := range []string{dir, e2e} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeImage(t, dir, "install-cni.tar", "registry.berth.test/berth/install-cni:v1.7.1")
	writeImage(t, dir, "demo.tar", "localhost/berth-demo:v1")
	writeImage(t, e2e, "agnhost-2.59.tar", "registry.k8s.io/e2e-test-images/agnhost:2.59")
	writeImage(t, e2e, "pause-3.10.1.tar", "registry.k8s.io/pause:3.10.1")
	s, err := Find(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.WithUpstream(filepath.Join(root, "none")); err == nil || !strings.Contains(err.Error(), "make e2e-images") {
		t.Errorf("WithUpstream of an empty folder: %v", err)
	}
	u, err := s.WithUpstream(e2e)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.paths) != 2 || len(u.paths) != 4 {
		t.Errorf("paths before %v, after %v: want the set unchanged and two added", s.paths, u.paths)
	}
	_, guestURL, stop, err := u.Serve(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	host := strings.Replace(guestURL, "10.0.2.2", "127.0.0.1", 1)
	for path, want := range map[string]int{
		"/v2/registry.k8s.io/e2e-test-images/agnhost/manifests/2.59": http.StatusOK,
		"/v2/registry.k8s.io/pause/manifests/3.10.1":                 http.StatusOK,
		"/v2/berth/install-cni/manifests/v1.7.1":                     http.StatusOK,
		// The suite's deliberately invalid image stays unserved.
		"/v2/invalid.registry.k8s.io/invalid/alpine/manifests/3.1": http.StatusNotFound,
	} {
		req, err := http.NewRequest(http.MethodGet, host+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %s, want %d", path, resp.Status, want)
		}
	}

	for name, img := range map[string]string{
		"under the cluster registry": "registry.berth.test/berth/x:1",
		"without a tag":              "registry.k8s.io/pause",
		"twice":                      "registry.k8s.io/pause:3.10.1",
	} {
		bad := t.TempDir()
		writeImage(t, bad, "x.tar", img)
		if name == "twice" {
			writeImage(t, bad, "y.tar", img)
		}
		if _, err := s.WithUpstream(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%s: WithUpstream: %v: want an error naming the file", name, err)
		}
	}
}
