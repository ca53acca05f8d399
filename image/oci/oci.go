// Package oci writes single-platform OCI image-layout tarballs from a handful
// of files, with no registry and nothing outside the standard library. The
// node image carries such tarballs (the pause image, test images) and berth
// imports them into containerd at boot, so a node can run pods before, or
// without, reaching any registry.
//
// Output is reproducible: the same files give byte-identical tarballs (fixed
// timestamps and owners, sorted entries, deterministic gzip and JSON), so the
// image digest is stable across builds and machines using the same Go
// toolchain.
package oci

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"
)

// Media types and annotation keys from the OCI image spec and containerd.
const (
	MediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	MediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	MediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"

	// AnnotationImageName is what `ctr images import` names the image by.
	AnnotationImageName = "io.containerd.image.name"
	// AnnotationRefName is the OCI spec's reference; containerd's own
	// exporter puts only the tag there, and so do we.
	AnnotationRefName = "org.opencontainers.image.ref.name"
	// AnnotationTitle and AnnotationVersion are the OCI spec's pre-defined
	// keys, put on the manifest: what the image is and which release of it.
	AnnotationTitle   = "org.opencontainers.image.title"
	AnnotationVersion = "org.opencontainers.image.version"

	layoutVersion = "1.0.0"
)

// epoch is every timestamp in the output: the Unix epoch, as
// SOURCE_DATE_EPOCH=0 builds do, so nothing depends on when it was built.
var epoch = time.Unix(0, 0).UTC()

// File is one entry of the image's single layer: a regular file, or a
// symbolic link when Symlink is set, or a directory when Dir is.
type File struct {
	// Path inside the image, relative to / (e.g. "pause" or "bin/demo").
	Path string
	// Mode holds the permission bits; 0 means 0o755 (these are mostly
	// executables and directories).
	Mode fs.FileMode
	Data []byte
	// Symlink is a link's target (a multi-call program's names: busybox's
	// applets, iptables' xtables-nft-multi).
	Symlink string
	// Dir makes an empty directory; parents of other entries need none.
	Dir bool
}

// Image describes the image to write.
type Image struct {
	// Name is the full reference the image is imported as, e.g.
	// "registry.k8s.io/pause:3.10". It must equal what kubelet and
	// containerd ask for (the sandbox image, a pod's image).
	Name       string
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string
	// User is the config's User field; empty runs as root.
	User string
	// OS and Architecture default to linux and amd64.
	OS           string
	Architecture string
	Files        []File
	// Annotations go on the manifest (AnnotationTitle, AnnotationVersion).
	Annotations map[string]string
}

// Descriptor is an OCI content descriptor.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	// Platform is set in an image index served by a registry (a
	// multi-platform image's manifest list), never in index.json of
	// what Write writes.
	Platform *Platform `json:"platform,omitempty"`
}

// Platform is the platform of one manifest of an image index.
type Platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// Index is index.json of an image layout.
type Index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []Descriptor `json:"manifests"`
}

// Manifest is an OCI image manifest.
type Manifest struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Config        Descriptor        `json:"config"`
	Layers        []Descriptor      `json:"layers"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// Config is the subset of the OCI image config this package writes.
type Config struct {
	Architecture string       `json:"architecture"`
	OS           string       `json:"os"`
	Config       RunConfig    `json:"config"`
	RootFS       RootFS       `json:"rootfs"`
	History      []HistoryRow `json:"history,omitempty"`
}

// RunConfig is the execution part of an image config.
type RunConfig struct {
	User       string   `json:"User,omitempty"`
	Env        []string `json:"Env,omitempty"`
	Entrypoint []string `json:"Entrypoint,omitempty"`
	Cmd        []string `json:"Cmd,omitempty"`
	WorkingDir string   `json:"WorkingDir,omitempty"`
}

// RootFS lists the uncompressed layer digests.
type RootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

// HistoryRow is one entry of an image config's history.
type HistoryRow struct {
	CreatedBy string `json:"created_by,omitempty"`
}

// Result says what was written, for the image manifest and logs.
type Result struct {
	// ManifestDigest identifies the image (what `ctr images ls` shows).
	ManifestDigest string
	ConfigDigest   string
	LayerDigest    string
}

// Write writes img as an OCI image-layout tarball to w.
func Write(w io.Writer, img Image) (Result, error) {
	if err := validate(img); err != nil {
		return Result{}, err
	}
	layerTar, err := layerTar(img.Files)
	if err != nil {
		return Result{}, fmt.Errorf("building layer of %s: %w", img.Name, err)
	}
	layerGz, err := gzipBytes(layerTar)
	if err != nil {
		return Result{}, fmt.Errorf("compressing layer of %s: %w", img.Name, err)
	}
	osName, arch := img.OS, img.Architecture
	if osName == "" {
		osName = "linux"
	}
	if arch == "" {
		arch = "amd64"
	}
	cfg := Config{
		Architecture: arch,
		OS:           osName,
		Config: RunConfig{
			User:       img.User,
			Env:        img.Env,
			Entrypoint: img.Entrypoint,
			Cmd:        img.Cmd,
			WorkingDir: img.WorkingDir,
		},
		RootFS:  RootFS{Type: "layers", DiffIDs: []string{digest(layerTar)}},
		History: []HistoryRow{{CreatedBy: "berth image/oci"}},
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return Result{}, fmt.Errorf("encoding config of %s: %w", img.Name, err)
	}
	man := Manifest{
		SchemaVersion: 2,
		MediaType:     MediaTypeManifest,
		Config:        Descriptor{MediaType: MediaTypeConfig, Digest: digest(cfgJSON), Size: int64(len(cfgJSON))},
		Layers:        []Descriptor{{MediaType: MediaTypeLayer, Digest: digest(layerGz), Size: int64(len(layerGz))}},
		Annotations:   img.Annotations,
	}
	manJSON, err := json.Marshal(man)
	if err != nil {
		return Result{}, fmt.Errorf("encoding manifest of %s: %w", img.Name, err)
	}
	idx := Index{
		SchemaVersion: 2,
		MediaType:     MediaTypeIndex,
		Manifests: []Descriptor{{
			MediaType: MediaTypeManifest,
			Digest:    digest(manJSON),
			Size:      int64(len(manJSON)),
			Annotations: map[string]string{
				AnnotationImageName: img.Name,
				AnnotationRefName:   refName(img.Name),
			},
		}},
	}
	idxJSON, err := json.Marshal(idx)
	if err != nil {
		return Result{}, fmt.Errorf("encoding index of %s: %w", img.Name, err)
	}

	blobs := map[string][]byte{
		digest(layerGz): layerGz,
		digest(cfgJSON): cfgJSON,
		digest(manJSON): manJSON,
	}
	names := make([]string, 0, len(blobs))
	for d := range blobs {
		names = append(names, d)
	}
	sort.Strings(names)

	tw := tar.NewWriter(w)
	entries := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"` + layoutVersion + `"}`)},
		{"index.json", idxJSON},
	}
	for _, e := range entries {
		if err := writeFile(tw, e.name, 0o644, e.data); err != nil {
			return Result{}, fmt.Errorf("writing %s of %s: %w", e.name, img.Name, err)
		}
	}
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := writeDir(tw, dir); err != nil {
			return Result{}, fmt.Errorf("writing %s of %s: %w", dir, img.Name, err)
		}
	}
	for _, d := range names {
		name := "blobs/sha256/" + strings.TrimPrefix(d, "sha256:")
		if err := writeFile(tw, name, 0o644, blobs[d]); err != nil {
			return Result{}, fmt.Errorf("writing %s of %s: %w", name, img.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return Result{}, fmt.Errorf("finishing tarball of %s: %w", img.Name, err)
	}
	return Result{ManifestDigest: digest(manJSON), ConfigDigest: digest(cfgJSON), LayerDigest: digest(layerGz)}, nil
}

func validate(img Image) error {
	if img.Name == "" {
		return fmt.Errorf("image name is empty")
	}
	if strings.ContainsAny(img.Name, " \t\n") {
		return fmt.Errorf("image name %q contains whitespace", img.Name)
	}
	if len(img.Files) == 0 {
		return fmt.Errorf("image %s: no files", img.Name)
	}
	seen := map[string]bool{}
	for i, f := range img.Files {
		p := cleanPath(f.Path)
		if p == "" || containsDotDot(f.Path) {
			return fmt.Errorf("image %s: files[%d]: path %q is not inside the image", img.Name, i, f.Path)
		}
		if _, dup := seen[p]; dup {
			return fmt.Errorf("image %s: files[%d]: path %q given twice", img.Name, i, f.Path)
		}
		if f.Dir && (f.Symlink != "" || len(f.Data) > 0) {
			return fmt.Errorf("image %s: files[%d] (%s): a directory has no data or link target", img.Name, i, f.Path)
		}
		if f.Symlink != "" && len(f.Data) > 0 {
			return fmt.Errorf("image %s: files[%d] (%s): a symlink has no data", img.Name, i, f.Path)
		}
		seen[p] = f.Dir
	}
	for p := range seen {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if isDir, ok := seen[d]; ok && !isDir {
				return fmt.Errorf("image %s: %q is a file and also the parent directory of %q", img.Name, d, p)
			}
		}
	}
	for k, v := range img.Annotations {
		if k == "" || v == "" {
			return fmt.Errorf("image %s: annotation %q=%q: key and value must be set", img.Name, k, v)
		}
	}
	return nil
}

// containsDotDot reports a ".." element: such a path is refused rather than
// silently clamped to the root, as it is almost certainly a mistake.
func containsDotDot(p string) bool {
	for _, e := range strings.Split(p, "/") {
		if e == ".." {
			return true
		}
	}
	return false
}

// cleanPath makes p relative to the image root, or returns "" for the root.
func cleanPath(p string) string {
	c := path.Clean("/" + p)
	return strings.TrimPrefix(c, "/")
}

// refName is the tag (or digest) part of a reference, as containerd's
// exporter writes org.opencontainers.image.ref.name; the whole name when it
// has neither.
func refName(name string) string {
	if i := strings.LastIndex(name, "@"); i >= 0 {
		return name[i+1:]
	}
	slash := strings.LastIndex(name, "/")
	if i := strings.LastIndex(name, ":"); i > slash {
		return name[i+1:]
	}
	return name
}

// layerTar builds the uncompressed layer: parent directories first, every
// entry in lexical order, fixed owner and time.
func layerTar(files []File) ([]byte, error) {
	byPath := map[string]File{}
	// dirs maps each directory to its permission bits: a parent nobody
	// named gets 0o755.
	dirs := map[string]int64{}
	for _, f := range files {
		p := cleanPath(f.Path)
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if _, ok := dirs[d]; !ok {
				dirs[d] = 0o755
			}
		}
		if f.Dir {
			dirs[p] = modeOr755(f.Mode)
			continue
		}
		byPath[p] = f
	}
	type entry struct {
		name string
		dir  bool
	}
	var all []entry
	for d := range dirs {
		all = append(all, entry{d + "/", true})
	}
	for p := range byPath {
		all = append(all, entry{p, false})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].name < all[j].name })

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range all {
		if e.dir {
			if err := writeDirMode(tw, e.name, dirs[strings.TrimSuffix(e.name, "/")]); err != nil {
				return nil, fmt.Errorf("directory %s: %w", e.name, err)
			}
			continue
		}
		f := byPath[e.name]
		if f.Symlink != "" {
			if err := writeSymlink(tw, e.name, f.Symlink); err != nil {
				return nil, fmt.Errorf("symlink %s: %w", e.name, err)
			}
			continue
		}
		if err := writeFile(tw, e.name, modeOr755(f.Mode), f.Data); err != nil {
			return nil, fmt.Errorf("file %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// modeOr755 is m's permission bits as tar stores them, with setuid, setgid
// and sticky (a /tmp is 01777); 0o755 when it has none.
func modeOr755(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if mode == 0 {
		mode = 0o755
	}
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

func writeDir(tw *tar.Writer, name string) error {
	return writeDirMode(tw, name, 0o755)
}

func writeDirMode(tw *tar.Writer, name string, mode int64) error {
	return tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeDir,
		Name:     name,
		Mode:     mode,
		ModTime:  epoch,
		Format:   tar.FormatPAX,
	})
}

func writeSymlink(tw *tar.Writer, name, target string) error {
	return tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeSymlink,
		Name:     name,
		Linkname: target,
		Mode:     0o777,
		ModTime:  epoch,
		Format:   tar.FormatPAX,
	})
}

func writeFile(tw *tar.Writer, name string, mode int64, data []byte) error {
	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg,
		Name:     name,
		Mode:     mode,
		Size:     int64(len(data)),
		ModTime:  epoch,
		Format:   tar.FormatPAX,
	}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

// gzipBytes compresses with a zero header time and no file name, so the
// bytes depend only on the input.
func gzipBytes(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
