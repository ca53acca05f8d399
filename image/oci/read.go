package oci

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Layout is an OCI image-layout tarball read back: its index and every
// blob, each verified against its digest.
type Layout struct {
	Index Index
	// Blobs maps a digest ("sha256:...") to its content.
	Blobs map[string][]byte
}

// ReadLayout reads an image-layout tarball (as Write writes it), refusing
// a blob larger than maxBlob bytes, a blob whose content does not match its
// name's digest, and a tarball with no index.json or an index that lists no
// manifests.
func ReadLayout(r io.Reader, maxBlob int64) (*Layout, error) {
	idxJSON, blobs, err := readEntries(r, maxBlob, false)
	if err != nil {
		return nil, err
	}
	l := &Layout{Blobs: blobs}
	if idxJSON == nil {
		return nil, errors.New("image tarball has no index.json")
	}
	if err := json.Unmarshal(idxJSON, &l.Index); err != nil {
		return nil, fmt.Errorf("image tarball index.json: %w", err)
	}
	if len(l.Index.Manifests) == 0 {
		return nil, errors.New("image tarball index.json lists no manifests")
	}
	return l, nil
}

// readEntries reads an image-layout tarball's index.json (nil when it has
// none) and its blobs, each checked against its digest. A blob larger
// than maxBlob is an error, or skipped unread when skipLarger is set.
func readEntries(r io.Reader, maxBlob int64, skipLarger bool) ([]byte, map[string][]byte, error) {
	var idxJSON []byte
	blobs := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("reading image tarball: %w", err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		name := strings.TrimPrefix(h.Name, "./")
		hexd, isBlob := strings.CutPrefix(name, "blobs/sha256/")
		if name != "index.json" && !isBlob {
			continue
		}
		if h.Size > maxBlob {
			if skipLarger {
				continue
			}
			return nil, nil, fmt.Errorf("image tarball entry %s: %d bytes is more than %d", h.Name, h.Size, maxBlob)
		}
		b, err := io.ReadAll(io.LimitReader(tr, maxBlob))
		if err != nil {
			return nil, nil, fmt.Errorf("reading image tarball entry %s: %w", h.Name, err)
		}
		if !isBlob {
			idxJSON = b
			continue
		}
		d := "sha256:" + hexd
		if got := digest(b); got != d {
			return nil, nil, fmt.Errorf("image tarball blob %s has digest %s", name, got)
		}
		blobs[d] = b
	}
	return idxJSON, blobs, nil
}

// Image returns the manifest, its bytes and its config of the index's
// manifests[i], with every blob the manifest names present and of the size
// it says.
func (l *Layout) Image(i int) (Manifest, []byte, Config, error) {
	desc := l.Index.Manifests[i]
	mb, ok := l.Blobs[desc.Digest]
	if !ok {
		return Manifest{}, nil, Config{}, fmt.Errorf("image tarball manifests[%d]: manifest %s missing", i, desc.Digest)
	}
	var m Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		return Manifest{}, nil, Config{}, fmt.Errorf("image tarball manifest %s: %w", desc.Digest, err)
	}
	for _, d := range append([]Descriptor{m.Config}, m.Layers...) {
		b, ok := l.Blobs[d.Digest]
		if !ok {
			return Manifest{}, nil, Config{}, fmt.Errorf("image tarball manifest %s: blob %s missing", desc.Digest, d.Digest)
		}
		if int64(len(b)) != d.Size {
			return Manifest{}, nil, Config{}, fmt.Errorf("image tarball manifest %s: blob %s is %d bytes, manifest says %d", desc.Digest, d.Digest, len(b), d.Size)
		}
	}
	var cfg Config
	if err := json.Unmarshal(l.Blobs[m.Config.Digest], &cfg); err != nil {
		return Manifest{}, nil, Config{}, fmt.Errorf("image tarball config %s: %w", m.Config.Digest, err)
	}
	return m, mb, cfg, nil
}
