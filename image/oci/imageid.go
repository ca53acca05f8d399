package oci

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Media types of the Docker image format, which an image layout may hold
// beside (or instead of) the OCI ones; containerd reads both.
const (
	mediaTypeDockerManifest     = "application/vnd.docker.distribution.manifest.v2+json"
	mediaTypeDockerManifestList = "application/vnd.docker.distribution.manifest.list.v2+json"
)

// maxMetadataBlob bounds the blobs ImageID keeps: index, manifests and
// configs are a few KiB; layers, skipped, are what is large.
const maxMetadataBlob = 4 << 20

// ImageID returns the image ID of the image-layout tarball read from r for
// linux/arch: its config's digest, which is what the CRI (containerd's
// image store) calls the image's id and kubelet its imageRef. The tarball
// must name exactly one manifest for that platform, through index.json and
// at most one nested index, and hold that manifest and its config; layers
// are skipped unread. Every blob it uses is checked against its digest.
func ImageID(r io.Reader, arch string) (string, error) {
	idxJSON, blobs, err := readEntries(r, maxMetadataBlob, true)
	if err != nil {
		return "", err
	}
	if idxJSON == nil {
		return "", errors.New("image tarball has no index.json: not an OCI image layout (a docker save tarball?)")
	}
	var idx Index
	if err := json.Unmarshal(idxJSON, &idx); err != nil {
		return "", fmt.Errorf("image tarball index.json: %w", err)
	}
	man, where, err := pickManifest(idx.Manifests, blobs, arch, "index.json", 0)
	if err != nil {
		return "", err
	}
	mb, ok := blobs[man.Digest]
	if !ok {
		return "", fmt.Errorf("image tarball %s: manifest %s missing", where, man.Digest)
	}
	var m Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		return "", fmt.Errorf("image tarball manifest %s: %w", man.Digest, err)
	}
	if !strings.HasPrefix(m.Config.Digest, "sha256:") {
		return "", fmt.Errorf("image tarball manifest %s: config digest %q is not sha256", man.Digest, m.Config.Digest)
	}
	cfg, ok := blobs[m.Config.Digest]
	if !ok {
		return "", fmt.Errorf("image tarball manifest %s: config %s missing", man.Digest, m.Config.Digest)
	}
	if int64(len(cfg)) != m.Config.Size {
		return "", fmt.Errorf("image tarball manifest %s: config %s is %d bytes, manifest says %d", man.Digest, m.Config.Digest, len(cfg), m.Config.Size)
	}
	return m.Config.Digest, nil
}

// pickManifest finds the one manifest for linux/arch among descs, going
// into a nested index (a multi-platform image) once. where names descs'
// place, for errors.
func pickManifest(descs []Descriptor, blobs map[string][]byte, arch, where string, depth int) (Descriptor, string, error) {
	var found []Descriptor
	var wheres []string
	for i, d := range descs {
		if d.Platform != nil && (d.Platform.Architecture != arch || d.Platform.OS != "linux") {
			continue
		}
		at := fmt.Sprintf("%s manifests[%d]", where, i)
		switch d.MediaType {
		case MediaTypeManifest, mediaTypeDockerManifest:
			found = append(found, d)
			wheres = append(wheres, at)
		case MediaTypeIndex, mediaTypeDockerManifestList:
			if depth > 0 {
				return Descriptor{}, "", fmt.Errorf("image tarball %s: an index inside an index inside index.json", at)
			}
			b, ok := blobs[d.Digest]
			if !ok {
				return Descriptor{}, "", fmt.Errorf("image tarball %s: index %s missing", at, d.Digest)
			}
			var inner Index
			if err := json.Unmarshal(b, &inner); err != nil {
				return Descriptor{}, "", fmt.Errorf("image tarball %s: index %s: %w", at, d.Digest, err)
			}
			m, w, err := pickManifest(inner.Manifests, blobs, arch, at+" (index "+d.Digest+")", depth+1)
			if err != nil {
				return Descriptor{}, "", err
			}
			found = append(found, m)
			wheres = append(wheres, w)
		}
	}
	switch len(found) {
	case 1:
		return found[0], wheres[0], nil
	case 0:
		return Descriptor{}, "", fmt.Errorf("image tarball %s: no image manifest for linux/%s", where, arch)
	}
	return Descriptor{}, "", fmt.Errorf("image tarball %s: %d image manifests for linux/%s (%s); want one", where, len(found), arch, strings.Join(wheres, ", "))
}
