package oci

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// tarOf writes entries, in order, as a tarball.
func tarOf(t testing.TB, entries ...any) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i := 0; i < len(entries); i += 2 {
		name, data := entries[i].(string), entries[i+1].([]byte)
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func blobName(d string) string { return "blobs/sha256/" + strings.TrimPrefix(d, "sha256:") }

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestImageIDOfWrittenImage(t *testing.T) {
	for _, arch := range []string{"amd64", "arm64"} {
		img := sampleImage()
		img.Architecture = arch
		b, res := write(t, img)
		got, err := ImageID(bytes.NewReader(b), arch)
		if err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
		if got != res.ConfigDigest {
			t.Errorf("%s: ImageID %s, want the config digest Write reported, %s", arch, got, res.ConfigDigest)
		}
	}
}

// multiPlatform is a layout whose index.json names one index (a registry's
// manifest list) of an amd64 and an arm64 image, each with its own config.
func multiPlatform(t testing.TB) (tarball []byte, configs map[string]string) {
	t.Helper()
	configs = map[string]string{}
	var entries []any
	var descs []Descriptor
	for _, arch := range []string{"amd64", "arm64"} {
		cfg := mustJSON(t, Config{Architecture: arch, OS: "linux"})
		cd := digest(cfg)
		configs[arch] = cd
		man := mustJSON(t, Manifest{SchemaVersion: 2, MediaType: MediaTypeManifest, Config: Descriptor{MediaType: MediaTypeConfig, Digest: cd, Size: int64(len(cfg))}})
		entries = append(entries, blobName(cd), cfg, blobName(digest(man)), man)
		descs = append(descs, Descriptor{MediaType: MediaTypeManifest, Digest: digest(man), Size: int64(len(man)), Platform: &Platform{Architecture: arch, OS: "linux"}})
	}
	inner := mustJSON(t, Index{SchemaVersion: 2, MediaType: MediaTypeIndex, Manifests: descs})
	outer := mustJSON(t, Index{SchemaVersion: 2, MediaType: MediaTypeIndex, Manifests: []Descriptor{{MediaType: MediaTypeIndex, Digest: digest(inner), Size: int64(len(inner))}}})
	entries = append(entries, blobName(digest(inner)), inner, "index.json", outer)
	return tarOf(t, entries...), configs
}

func TestImageIDPicksThePlatform(t *testing.T) {
	b, configs := multiPlatform(t)
	for arch, want := range configs {
		got, err := ImageID(bytes.NewReader(b), arch)
		if err != nil || got != want {
			t.Errorf("%s: ImageID %q, %v; want %s", arch, got, err, want)
		}
	}
	if _, err := ImageID(bytes.NewReader(b), "riscv64"); err == nil || !strings.Contains(err.Error(), "no image manifest for linux/riscv64") {
		t.Errorf("riscv64: %v, want no image manifest for linux/riscv64", err)
	}
}

func TestImageIDRefuses(t *testing.T) {
	img := sampleImage()
	good, res := write(t, img)
	cfg := mustJSON(t, Config{Architecture: "amd64", OS: "linux"})
	man := mustJSON(t, Manifest{SchemaVersion: 2, MediaType: MediaTypeManifest, Config: Descriptor{MediaType: MediaTypeConfig, Digest: digest(cfg), Size: int64(len(cfg))}})
	mdesc := Descriptor{MediaType: MediaTypeManifest, Digest: digest(man), Size: int64(len(man))}
	two := mustJSON(t, Index{SchemaVersion: 2, Manifests: []Descriptor{mdesc, mdesc}})
	one := mustJSON(t, Index{SchemaVersion: 2, Manifests: []Descriptor{mdesc}})
	for _, tc := range []struct {
		name, want string
		tarball    []byte
	}{
		{"not a tarball", "reading image tarball", []byte("not a tar at all, but long enough to be read as a header block? no")},
		{"docker save", "no index.json", tarOf(t, "manifest.json", []byte("[]"))},
		{"bad index", "index.json", tarOf(t, "index.json", []byte("{"))},
		{"two manifests", "2 image manifests for linux/amd64 (index.json manifests[0], index.json manifests[1])", tarOf(t, blobName(digest(cfg)), cfg, blobName(digest(man)), man, "index.json", two)},
		{"no config", "config " + digest(cfg) + " missing", tarOf(t, blobName(digest(man)), man, "index.json", one)},
		{"no manifest", "manifest " + digest(man) + " missing", tarOf(t, "index.json", one)},
		{"blob not its digest", "has digest", tarOf(t, blobName(res.ConfigDigest), []byte("{}"), "index.json", one)},
	} {
		_, err := ImageID(bytes.NewReader(tc.tarball), "amd64")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := ImageID(bytes.NewReader(good), "amd64"); err != nil {
		t.Errorf("the written image: %v", err)
	}
}

// FuzzImageID: any bytes give an id or an error, never a panic, and an id
// is always a sha256 digest of a blob the tarball holds.
func FuzzImageID(f *testing.F) {
	b, _ := write(f, sampleImage())
	f.Add(b)
	mp, _ := multiPlatform(f)
	f.Add(mp)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		id, err := ImageID(bytes.NewReader(data), "amd64")
		if err != nil {
			return
		}
		if !strings.HasPrefix(id, "sha256:") || len(id) != len("sha256:")+64 {
			t.Fatalf("id %q is not a sha256 digest", id)
		}
		if !bytes.Contains(data, []byte(strings.TrimPrefix(id, "sha256:"))) {
			t.Fatalf("id %s names no entry of the tarball", id)
		}
	})
}
