// Package builtin is the image manifest berth assumes when it is given
// none (`berth check` and `berth render` without --manifest): the default
// image's kubelet and containerd versions (components.mk), its sandbox
// image and preload list (image/spec.yaml), and what that kubelet and
// containerd accept (`make accepts` for those versions, config/accepts),
// so that a user checking user data on a laptop or in CI gets the checks a
// node makes. The data are files committed here, gzipped where large (the
// berth binary's size is watched); `make builtin-manifest` regenerates
// them, and the tests hold them equal to their sources: the unit tests to
// components.mk and image/spec.yaml, the components tier (make
// test-components-node) to what `make accepts` generates.
package builtin

import (
	"bytes"
	"compress/gzip"
	_ "embed" // the data files
	"fmt"
	"io"
	"strings"

	"github.com/berth-node/berth/config/accepts"
	"github.com/berth-node/berth/config/manifest"
)

var (
	//go:embed manifest.json
	manifestJSON []byte
	//go:embed kubelet.json.gz
	kubeletGz []byte
	//go:embed containerd.json.gz
	containerdGz []byte
)

// Manifest decodes the built-in manifest, anew on each call (a caller may
// change what it gets). An error means the binary was built from a broken
// tree, which the tests catch first.
func Manifest() (*manifest.Manifest, error) {
	m, err := manifest.Parse(manifestJSON)
	if err != nil {
		return nil, fmt.Errorf("the built-in manifest: %w", err)
	}
	m.Accepts = &accepts.Accepts{}
	for _, f := range []struct {
		name string
		gz   []byte
	}{{"kubelet.json.gz", kubeletGz}, {"containerd.json.gz", containerdGz}} {
		b, err := gunzip(f.gz)
		if err != nil {
			return nil, fmt.Errorf("the built-in manifest's %s: %w", f.name, err)
		}
		a, err := accepts.Parse(b)
		if err != nil {
			return nil, fmt.Errorf("the built-in manifest's %s: %w", f.name, err)
		}
		if err := m.Accepts.Merge(a); err != nil {
			return nil, fmt.Errorf("the built-in manifest: %w", err)
		}
	}
	return m, nil
}

func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	return io.ReadAll(zr)
}

// Versions says whose checks a manifest's accepts data are, as
// "kubelet v1.35.4 and containerd v2.2.3", for the line `berth check`
// prints; "" when it has none.
func Versions(m *manifest.Manifest) string {
	var have []string
	if a := m.Accepts; a != nil && a.Kubelet != nil {
		have = append(have, "kubelet "+a.Kubelet.Version)
	}
	if a := m.Accepts; a != nil && a.Containerd != nil {
		have = append(have, "containerd "+a.Containerd.Version)
	}
	return strings.Join(have, " and ")
}
