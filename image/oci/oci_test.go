package oci

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-node/berth/internal/golden"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

func sampleImage() Image {
	return Image{
		Name:       "registry.k8s.io/pause:3.10",
		Entrypoint: []string{"/pause"},
		Env:        []string{"PATH=/"},
		Files: []File{
			{Path: "pause", Data: []byte("\x7fELF not really")},
			{Path: "/etc/hostname", Mode: 0o644, Data: []byte("demo\n")},
			{Path: "bin/sub/tool", Mode: 0o700, Data: []byte("#!tool")},
		},
	}
}

func write(t testing.TB, img Image) ([]byte, Result) {
	t.Helper()
	var buf bytes.Buffer
	res, err := Write(&buf, img)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	return buf.Bytes(), res
}

// layout is a parsed image-layout tarball, every blob checked against its digest.
type layout struct {
	order  []string
	files  map[string][]byte
	index  Index
	man    Manifest
	config Config
	layer  map[string]*tar.Header
	data   map[string][]byte
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func parse(t *testing.T, b []byte) layout {
	t.Helper()
	l := layout{files: map[string][]byte{}, layer: map[string]*tar.Header{}, data: map[string][]byte{}}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("reading outer tar: %v", err)
		}
		l.order = append(l.order, h.Name)
		if !h.ModTime.Equal(epoch) || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: mtime %v uid %d gid %d, want epoch and root", h.Name, h.ModTime, h.Uid, h.Gid)
		}
		if h.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatalf("reading %s: %v", h.Name, err)
			}
			l.files[h.Name] = data
		}
	}
	if got := string(l.files["oci-layout"]); got != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout = %q", got)
	}
	blob := func(d Descriptor) []byte {
		t.Helper()
		data, ok := l.files["blobs/sha256/"+strings.TrimPrefix(d.Digest, "sha256:")]
		if !ok {
			t.Fatalf("blob %s missing", d.Digest)
		}
		if sha(data) != d.Digest {
			t.Fatalf("blob %s has digest %s", d.Digest, sha(data))
		}
		if int64(len(data)) != d.Size {
			t.Fatalf("blob %s: size %d, descriptor says %d", d.Digest, len(data), d.Size)
		}
		return data
	}
	if err := json.Unmarshal(l.files["index.json"], &l.index); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	if l.index.SchemaVersion != 2 || l.index.MediaType != MediaTypeIndex || len(l.index.Manifests) != 1 {
		t.Fatalf("index.json = %+v", l.index)
	}
	md := l.index.Manifests[0]
	if md.MediaType != MediaTypeManifest {
		t.Fatalf("index manifest media type %q", md.MediaType)
	}
	if err := json.Unmarshal(blob(md), &l.man); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	if l.man.SchemaVersion != 2 || l.man.MediaType != MediaTypeManifest || l.man.Config.MediaType != MediaTypeConfig ||
		len(l.man.Layers) != 1 || l.man.Layers[0].MediaType != MediaTypeLayer {
		t.Fatalf("manifest = %+v", l.man)
	}
	if err := json.Unmarshal(blob(l.man.Config), &l.config); err != nil {
		t.Fatalf("config: %v", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(blob(l.man.Layers[0])))
	if err != nil {
		t.Fatalf("layer gzip: %v", err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("layer gunzip: %v", err)
	}
	if len(l.config.RootFS.DiffIDs) != 1 || l.config.RootFS.DiffIDs[0] != sha(raw) {
		t.Errorf("config diff_ids %v, uncompressed layer is %s", l.config.RootFS.DiffIDs, sha(raw))
	}
	lr := tar.NewReader(bytes.NewReader(raw))
	for {
		h, err := lr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("reading layer tar: %v", err)
		}
		l.layer[h.Name] = h
		d, _ := io.ReadAll(lr)
		l.data[h.Name] = d
	}
	return l
}

func TestWriteLayoutParsesBack(t *testing.T) {
	b, res := write(t, sampleImage())
	l := parse(t, b)

	ann := l.index.Manifests[0].Annotations
	if ann[AnnotationImageName] != "registry.k8s.io/pause:3.10" {
		t.Errorf("%s = %q", AnnotationImageName, ann[AnnotationImageName])
	}
	if ann[AnnotationRefName] != "3.10" {
		t.Errorf("%s = %q, want the tag", AnnotationRefName, ann[AnnotationRefName])
	}
	if res.ManifestDigest != l.index.Manifests[0].Digest || res.ConfigDigest != l.man.Config.Digest || res.LayerDigest != l.man.Layers[0].Digest {
		t.Errorf("Result %+v does not match the layout", res)
	}
	if l.config.OS != "linux" || l.config.Architecture != "amd64" {
		t.Errorf("platform %s/%s", l.config.OS, l.config.Architecture)
	}
	if fmt.Sprint(l.config.Config.Entrypoint) != "[/pause]" || fmt.Sprint(l.config.Config.Env) != "[PATH=/]" {
		t.Errorf("run config %+v", l.config.Config)
	}
	want := map[string]struct {
		mode int64
		data string
		dir  bool
	}{
		"bin/":         {mode: 0o755, dir: true},
		"bin/sub/":     {mode: 0o755, dir: true},
		"bin/sub/tool": {mode: 0o700, data: "#!tool"},
		"etc/":         {mode: 0o755, dir: true},
		"etc/hostname": {mode: 0o644, data: "demo\n"},
		"pause":        {mode: 0o755, data: "\x7fELF not really"},
	}
	if len(l.layer) != len(want) {
		t.Errorf("layer has %d entries, want %d: %v", len(l.layer), len(want), keys(l.layer))
	}
	for name, w := range want {
		h, ok := l.layer[name]
		if !ok {
			t.Errorf("layer lacks %s", name)
			continue
		}
		if h.Mode != w.mode || (h.Typeflag == tar.TypeDir) != w.dir || string(l.data[name]) != w.data {
			t.Errorf("%s: mode %o dir %v data %q, want %o %v %q", name, h.Mode, h.Typeflag == tar.TypeDir, l.data[name], w.mode, w.dir, w.data)
		}
		if !h.ModTime.Equal(epoch) || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: mtime %v uid %d gid %d", name, h.ModTime, h.Uid, h.Gid)
		}
	}
}

func keys(m map[string]*tar.Header) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	return k
}

func TestWriteIsReproducible(t *testing.T) {
	a, ra := write(t, sampleImage())
	// The same files given in another order must not change a byte.
	img := sampleImage()
	img.Files[0], img.Files[2] = img.Files[2], img.Files[0]
	b, rb := write(t, img)
	if !bytes.Equal(a, b) || ra != rb {
		t.Fatalf("two writes of the same image differ (%s vs %s)", ra.ManifestDigest, rb.ManifestDigest)
	}
	// Any content change must change the image digest.
	img.Files[1].Data = []byte("other\n")
	_, rc := write(t, img)
	if rc.ManifestDigest == ra.ManifestDigest {
		t.Fatalf("changed content kept manifest digest %s", rc.ManifestDigest)
	}
}

// TestGolden pins the exact layout (entry order, index.json, digests), so an
// accidental change to the output format shows up in review.
func TestGolden(t *testing.T) {
	b, res := write(t, sampleImage())
	l := parse(t, b)
	var got strings.Builder
	fmt.Fprintf(&got, "entries: %s\n", strings.Join(l.order, " "))
	fmt.Fprintf(&got, "index.json: %s\n", l.files["index.json"])
	fmt.Fprintf(&got, "manifest: %s\nconfig: %s\nlayer: %s\n", res.ManifestDigest, res.ConfigDigest, res.LayerDigest)
	goldenPath := filepath.Join("testdata", "sample.golden")
	golden.Check(t, goldenPath, []byte(got.String()), *update)
}

func TestRefName(t *testing.T) {
	for in, want := range map[string]string{
		"registry.k8s.io/pause:3.10":          "3.10",
		"localhost:5000/demo":                 "localhost:5000/demo",
		"localhost:5000/demo:v1":              "v1",
		"docker.io/library/busybox@sha256:ab": "sha256:ab",
		"demo":                                "demo",
	} {
		if got := refName(in); got != want {
			t.Errorf("refName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestWriteRejectsBadInput(t *testing.T) {
	for name, img := range map[string]Image{
		"no name":        {Files: []File{{Path: "a"}}},
		"space in name":  {Name: "a b", Files: []File{{Path: "a"}}},
		"no files":       {Name: "x"},
		"escape":         {Name: "x", Files: []File{{Path: "../../etc/passwd"}}},
		"root":           {Name: "x", Files: []File{{Path: "/"}}},
		"duplicate":      {Name: "x", Files: []File{{Path: "a"}, {Path: "/a"}}},
		"file as parent": {Name: "x", Files: []File{{Path: "a"}, {Path: "a/b"}}},
	} {
		if _, err := Write(io.Discard, img); err == nil {
			t.Errorf("%s: Write accepted %+v", name, img)
		}
	}
}

func TestWriteLinksDirsAndAnnotations(t *testing.T) {
	img := Image{
		Name:       "registry.berth.test/berth/busybox:1.35.0",
		Entrypoint: []string{"/bin/sh"},
		Files: []File{
			{Path: "bin/busybox", Data: []byte("\x7fELF")},
			{Path: "bin/sh", Symlink: "busybox"},
			{Path: "var/empty", Dir: true, Mode: 0o700},
			{Path: "tmp", Dir: true, Mode: fs.ModeSticky | 0o777},
			// A named directory may be the parent of other entries.
			{Path: "etc", Dir: true, Mode: 0o755},
			{Path: "etc/hostname", Mode: 0o644, Data: []byte("x\n")},
		},
		Annotations: map[string]string{AnnotationTitle: "busybox", AnnotationVersion: "1.35.0"},
	}
	b, _ := write(t, img)
	l := parse(t, b)
	if h := l.layer["bin/sh"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "busybox" {
		t.Errorf("bin/sh = %+v, want a symlink to busybox", h)
	}
	if h := l.layer["var/empty/"]; h == nil || h.Typeflag != tar.TypeDir || h.Mode != 0o700 {
		t.Errorf("var/empty/ = %+v, want a directory with mode 0700", h)
	}
	if h := l.layer["tmp/"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("tmp/ = %+v, want mode 01777", h)
	}
	if h := l.layer["etc/"]; h == nil || h.Typeflag != tar.TypeDir {
		t.Errorf("etc/ = %+v, want one directory entry", h)
	}
	if got := l.man.Annotations; got[AnnotationTitle] != "busybox" || got[AnnotationVersion] != "1.35.0" {
		t.Errorf("manifest annotations = %v", got)
	}
}

func TestWriteRejectsBadEntries(t *testing.T) {
	for name, img := range map[string]Image{
		"dir with data":     {Name: "x", Files: []File{{Path: "a", Dir: true, Data: []byte("x")}}},
		"symlink with data": {Name: "x", Files: []File{{Path: "a", Symlink: "b", Data: []byte("x")}}},
		"link as parent":    {Name: "x", Files: []File{{Path: "a", Symlink: "b"}, {Path: "a/b"}}},
		"empty annotation":  {Name: "x", Files: []File{{Path: "a"}}, Annotations: map[string]string{AnnotationTitle: ""}},
	} {
		if _, err := Write(io.Discard, img); err == nil {
			t.Errorf("%s: Write accepted %+v", name, img)
		}
	}
}
