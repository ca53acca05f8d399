package imagespec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"

	"github.com/berth-node/berth/image/oci"
)

// Registry lays out images in an image as the files agnhost's
// fake-registry-server serves (test/images/agnhost/fakeregistryserver:
// DIR/NAME/manifests/TAG holds the digest of the image index, and
// DIR/NAME/manifests/DIGEST and DIR/NAME/blobs/DIGEST the content), which
// upstream's Dockerfile fills at build time by fetching images.txt's
// images with crane (prepare_registry.sh). Here each comes from an image
// tarball the builder made, served as the one platform it is for.
type Registry struct {
	// Dir is the server's root in the image (/var/registry).
	Dir    string          `json:"dir"`
	Images []RegistryImage `json:"images"`
}

// RegistryImage is one image the registry serves as Name:Tag.
type RegistryImage struct {
	// Name is the server's repository: one path element, as the server
	// splits its URLs.
	Name string `json:"name"`
	Tag  string `json:"tag"`
	// Tarball is an OCI image-layout tarball of one image (mkoci's
	// output); a relative path is under the repository root.
	Tarball string `json:"tarball"`
}

// registryNameRE is one repository path element of the distribution
// spec, which is all the fake server reads from a URL.
var registryNameRE = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*$`)

// registryTagRE is the distribution spec's tag grammar.
var registryTagRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)

func (r *Registry) validate() error {
	if !path.IsAbs(r.Dir) || path.Clean(r.Dir) != r.Dir || r.Dir == "/" {
		return fmt.Errorf("registry.dir %q: want a clean absolute path below /", r.Dir)
	}
	if len(r.Images) == 0 {
		return fmt.Errorf("registry.images is empty")
	}
	seen := map[string]bool{}
	for i, im := range r.Images {
		switch {
		case !registryNameRE.MatchString(im.Name):
			return fmt.Errorf("registry.images[%d].name %q: want one repository path element (lower-case letters, digits, separators)", i, im.Name)
		case !registryTagRE.MatchString(im.Tag):
			return fmt.Errorf("registry.images[%d].tag %q: want a tag (letters, digits, . _ -; at most 128)", i, im.Tag)
		case im.Tarball == "":
			return fmt.Errorf("registry.images[%d].tarball is empty", i)
		case seen[im.Name+":"+im.Tag]:
			return fmt.Errorf("registry.images[%d]: %s:%s is listed twice", i, im.Name, im.Tag)
		}
		seen[im.Name+":"+im.Tag] = true
	}
	return nil
}

// maxRegistryBlob bounds one blob of a served image: they are test images.
const maxRegistryBlob = 256 << 20

// files returns the registry's files for an image of architecture arch:
// each served image must be for it too, since the server hands its one
// platform to whoever pulls (a node of the image's architecture).
func (r *Registry) files(repoRoot, arch string) ([]oci.File, error) {
	var out []oci.File
	dirs, written := map[string]bool{}, map[string]bool{}
	dir := func(p string) {
		for ; p != "/" && !dirs[p]; p = path.Dir(p) {
			dirs[p] = true
			out = append(out, oci.File{Path: p, Mode: 0o755, Dir: true})
		}
	}
	// A blob or manifest two served images share is written once.
	file := func(p string, data []byte) {
		if written[p] {
			return
		}
		written[p] = true
		dir(path.Dir(p))
		out = append(out, oci.File{Path: p, Mode: 0o644, Data: data})
	}
	for i, im := range r.Images {
		name := im.Tarball
		if !filepath.IsAbs(name) {
			name = filepath.Join(repoRoot, name)
		}
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("registry.images[%d] (%s:%s): %w", i, im.Name, im.Tag, err)
		}
		l, err := oci.ReadLayout(f, maxRegistryBlob)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("registry.images[%d] (%s:%s): %s: %w", i, im.Name, im.Tag, name, err)
		}
		if n := len(l.Index.Manifests); n != 1 {
			return nil, fmt.Errorf("registry.images[%d] (%s:%s): %s holds %d images, want one", i, im.Name, im.Tag, name, n)
		}
		m, mb, cfg, err := l.Image(0)
		if err != nil {
			return nil, fmt.Errorf("registry.images[%d] (%s:%s): %s: %w", i, im.Name, im.Tag, name, err)
		}
		if cfg.Architecture != arch || cfg.OS != "linux" {
			return nil, fmt.Errorf("registry.images[%d] (%s:%s): %s is for %s/%s, the image for linux/%s", i, im.Name, im.Tag, name, cfg.OS, cfg.Architecture, arch)
		}
		desc := l.Index.Manifests[0]
		idx, err := json.Marshal(oci.Index{
			SchemaVersion: 2,
			MediaType:     oci.MediaTypeIndex,
			Manifests: []oci.Descriptor{{
				MediaType: desc.MediaType,
				Digest:    desc.Digest,
				Size:      int64(len(mb)),
				Platform:  &oci.Platform{Architecture: cfg.Architecture, OS: cfg.OS},
			}},
		})
		if err != nil {
			return nil, fmt.Errorf("registry.images[%d] (%s:%s): encoding its index: %w", i, im.Name, im.Tag, err)
		}
		sum := sha256.Sum256(idx)
		idxDigest := "sha256:" + hex.EncodeToString(sum[:])
		base := path.Join(r.Dir, im.Name)
		file(path.Join(base, "manifests", im.Tag), []byte(idxDigest+"\n"))
		file(path.Join(base, "manifests", idxDigest), idx)
		file(path.Join(base, "manifests", desc.Digest), mb)
		for _, d := range append([]oci.Descriptor{m.Config}, m.Layers...) {
			file(path.Join(base, "blobs", d.Digest), l.Blobs[d.Digest])
		}
	}
	return out, nil
}
