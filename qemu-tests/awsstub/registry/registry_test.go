package registry

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/berth-node/berth/image/oci"
)

const imageName = "111122223333.dkr.ecr.us-west-2.amazonaws.com/team/demo:v1"

// tarball writes an image whose content depends on its name, so two names
// never share blobs.
func tarball(t *testing.T, name string) ([]byte, oci.Result) {
	t.Helper()
	var buf bytes.Buffer
	res, err := oci.Write(&buf, oci.Image{Name: name, Entrypoint: []string{"/demo"},
		Files: []oci.File{{Path: "demo", Data: []byte("#!/bin/sh\necho " + name + "\n")}}})
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), res
}

func start(t *testing.T) (*Server, string, oci.Result) {
	t.Helper()
	s := New(Config{Authorize: func(u, p string) bool { return u == "AWS" && p == "pw" }})
	tb, res := tarball(t, imageName)
	imgs, err := s.Load(bytes.NewReader(tb), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(imgs) != 1 || imgs[0] != (Image{Repository: "team/demo", Tag: "v1", ManifestDigest: res.ManifestDigest}) {
		t.Fatalf("loaded %+v", imgs)
	}
	u, stop, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return s, u, res
}

func get(t *testing.T, method, url string, auth bool) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth {
		req.SetBasicAuth("AWS", "pw")
	}
	req.Header.Set("Accept", oci.MediaTypeManifest+", "+oci.MediaTypeIndex)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func sha(b []byte) string { h := sha256.Sum256(b); return "sha256:" + hex.EncodeToString(h[:]) }

func TestPullVerifiesDigests(t *testing.T) {
	_, base, res := start(t)
	resp, _ := get(t, http.MethodGet, base+"/v2/", true)
	if resp.StatusCode != 200 || resp.Header.Get("Docker-Distribution-API-Version") != "registry/2.0" {
		t.Fatalf("/v2/: %s %v", resp.Status, resp.Header)
	}
	resp, body := get(t, http.MethodGet, base+"/v2/team/demo/manifests/v1", true)
	if resp.StatusCode != 200 {
		t.Fatalf("manifest: %s %s", resp.Status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != oci.MediaTypeManifest {
		t.Errorf("manifest Content-Type %q", ct)
	}
	if d := resp.Header.Get("Docker-Content-Digest"); d != res.ManifestDigest || sha(body) != d {
		t.Fatalf("manifest digest header %s, body %s, want %s", d, sha(body), res.ManifestDigest)
	}
	var m oci.Manifest
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	for _, d := range append([]oci.Descriptor{m.Config}, m.Layers...) {
		resp, b := get(t, http.MethodGet, base+"/v2/team/demo/blobs/"+d.Digest, true)
		if resp.StatusCode != 200 || sha(b) != d.Digest || int64(len(b)) != d.Size {
			t.Fatalf("blob %s: %s, %d bytes, digest %s", d.Digest, resp.Status, len(b), sha(b))
		}
		if resp.Header.Get("Docker-Content-Digest") != d.Digest || resp.Header.Get("Content-Type") != d.MediaType {
			t.Errorf("blob %s headers %v", d.Digest, resp.Header)
		}
	}
	// By digest, and HEAD (what containerd resolves with first).
	resp, b := get(t, http.MethodHead, base+"/v2/team/demo/manifests/"+res.ManifestDigest, true)
	if resp.StatusCode != 200 || len(b) != 0 || resp.Header.Get("Docker-Content-Digest") != res.ManifestDigest ||
		resp.ContentLength != int64(len(body)) {
		t.Fatalf("HEAD by digest: %s len %d headers %v", resp.Status, resp.ContentLength, resp.Header)
	}
}

func TestCredentialsRequired(t *testing.T) {
	s, base, res := start(t)
	for _, p := range []string{"/v2/", "/v2/team/demo/manifests/v1", "/v2/team/demo/blobs/" + res.LayerDigest} {
		resp, body := get(t, http.MethodGet, base+p, false)
		if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), `Basic realm=`) {
			t.Fatalf("%s without credentials: %s %v", p, resp.Status, resp.Header)
		}
		var e ErrorBody
		if err := json.Unmarshal(body, &e); err != nil || len(e.Errors) != 1 || e.Errors[0].Code != "UNAUTHORIZED" {
			t.Fatalf("%s error body %s", p, body)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/v2/", nil)
	req.SetBasicAuth("AWS", "wrong")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("wrong password: %s", resp.Status)
	}
	if r := s.Requests(); len(r) != 4 || r[0].Status != 401 {
		t.Fatalf("request log %+v", r)
	}
}

func TestNotFound(t *testing.T) {
	s, base, res := start(t)
	other, ores := tarball(t, "other:1")
	if _, err := s.Load(bytes.NewReader(other), ""); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"/v2/team/demo/manifests/v2":                          "MANIFEST_UNKNOWN",
		"/v2/nope/manifests/v1":                               "NAME_UNKNOWN",
		"/v2/team/demo/blobs/" + ores.LayerDigest:             "BLOB_UNKNOWN", // another repository's blob
		"/v2/other/manifests/" + res.ManifestDigest:           "MANIFEST_UNKNOWN",
		"/v2/team/demo/blobs/sha256:../../etc/passwd":         "NAME_INVALID",
		"/v2/team/demo/manifests/" + strings.Repeat("x", 200): "NAME_INVALID",
	}
	for p, code := range cases {
		resp, body := get(t, http.MethodGet, base+p, true)
		var e ErrorBody
		if resp.StatusCode != 404 || json.Unmarshal(body, &e) != nil || len(e.Errors) != 1 || e.Errors[0].Code != code {
			t.Errorf("%s: %s %s, want 404 %s", p, resp.Status, body, code)
		}
	}
	if resp, _ := get(t, http.MethodGet, base+"/v2/other/manifests/1", true); resp.StatusCode != 200 {
		t.Errorf("second image: %s", resp.Status)
	}
}

func TestLoadRejectsCorruptBlob(t *testing.T) {
	tb, res := tarball(t, "demo:1")
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	tr := tar.NewReader(bytes.NewReader(tb))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		if strings.HasSuffix(h.Name, strings.TrimPrefix(res.LayerDigest, "sha256:")) {
			b[len(b)/2] ^= 0xff
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write(b)
	}
	tw.Close()
	_, err := New(Config{}).Load(&out, "")
	if err == nil || !strings.Contains(err.Error(), "has digest") {
		t.Fatalf("corrupt blob loaded: %v", err)
	}
}

func TestLoadWithExplicitRef(t *testing.T) {
	tb, res := tarball(t, "registry.k8s.io/pause:3.10")
	s := New(Config{})
	imgs, err := s.Load(bytes.NewReader(tb), "mirror/pause:latest")
	if err != nil {
		t.Fatal(err)
	}
	if imgs[0] != (Image{Repository: "mirror/pause", Tag: "latest", ManifestDigest: res.ManifestDigest}) {
		t.Fatalf("loaded %+v", imgs)
	}
	if _, err := s.Load(bytes.NewReader(tb), "Bad Name"); err == nil {
		t.Fatal("invalid ref accepted")
	}
}

// TestStartAnonymous is the cluster's registry: a tarball served under a
// name of the test's choosing, pulled without credentials the way
// containerd pulls (GET /v2/, HEAD then GET the manifest by tag, the
// config and layers by digest), every digest checked.
func TestStartAnonymous(t *testing.T) {
	tb, res := tarball(t, "registry.k8s.io/some/other:name")
	path := t.TempDir() + "/busybox.tar"
	if err := os.WriteFile(path, tb, 0o644); err != nil {
		t.Fatal(err)
	}
	s, base, stop, err := StartAnonymous("127.0.0.1:0", []OCIImage{{Repository: "berth/busybox", Tag: "1.37.0-4", Path: path}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if resp, _ := get(t, http.MethodGet, base+"/v2/", false); resp.StatusCode != 200 {
		t.Fatalf("/v2/ anonymous: %s", resp.Status)
	}
	resp, b := get(t, http.MethodHead, base+"/v2/berth/busybox/manifests/1.37.0-4", false)
	if resp.StatusCode != 200 || len(b) != 0 || resp.Header.Get("Docker-Content-Digest") != res.ManifestDigest ||
		resp.Header.Get("Content-Type") != oci.MediaTypeManifest || resp.ContentLength <= 0 {
		t.Fatalf("HEAD manifest by tag: %s len %d %v", resp.Status, resp.ContentLength, resp.Header)
	}
	resp, body := get(t, http.MethodGet, base+"/v2/berth/busybox/manifests/1.37.0-4", false)
	if resp.StatusCode != 200 || sha(body) != res.ManifestDigest {
		t.Fatalf("GET manifest by tag: %s, digest %s", resp.Status, sha(body))
	}
	var m oci.Manifest
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	for _, d := range append([]oci.Descriptor{m.Config}, m.Layers...) {
		resp, b := get(t, http.MethodGet, base+"/v2/berth/busybox/blobs/"+d.Digest, false)
		if resp.StatusCode != 200 || sha(b) != d.Digest || int64(len(b)) != d.Size {
			t.Fatalf("blob %s: %s, %d bytes", d.Digest, resp.Status, len(b))
		}
	}
	// The tarball's own name is not served: only the name it was loaded as.
	resp, body = get(t, http.MethodGet, base+"/v2/some/other/manifests/name", false)
	var eb ErrorBody
	if resp.StatusCode != 404 || json.Unmarshal(body, &eb) != nil || len(eb.Errors) != 1 || eb.Errors[0].Code != "NAME_UNKNOWN" {
		t.Fatalf("unloaded name: %s %s", resp.Status, body)
	}
	if len(s.Requests()) != 5+len(m.Layers) { // /v2/, HEAD, GET, config, layers, the 404
		t.Errorf("request log has %d entries", len(s.Requests()))
	}
	if _, _, _, err := StartAnonymous("127.0.0.1:0", []OCIImage{{Repository: "x", Tag: "y", Path: path + ".missing"}}, nil); err == nil ||
		!strings.Contains(err.Error(), "busybox.tar.missing") {
		t.Errorf("missing tarball: %v", err)
	}
}
