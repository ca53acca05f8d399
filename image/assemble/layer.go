package assemble

import (
	"context"
	"fmt"

	"github.com/berth-node/berth/image/fstree"
	"github.com/berth-node/berth/image/spec"
	"github.com/berth-node/berth/manifest"
)

// LayerTree builds one spec layer alone into a fresh tree, with the node
// image's rules (binaries with the libraries they need, dlopened plugins,
// links, busybox applets, goBuild): the container images of the cluster are
// packed from the same kind of layer. Tools and images have no meaning
// outside a node image, so a layer naming images is refused. arch is what
// goBuild packages are built for (amd64 when empty).
func LayerTree(ctx context.Context, l spec.Layer, repoRoot, arch string) (*fstree.Tree, error) {
	if len(l.Images) > 0 {
		return nil, fmt.Errorf("layer names image %s: a container image holds no images", l.Images[0].Name)
	}
	t := fstree.New()
	m := &manifest.Manifest{Tools: map[string]string{}}
	if err := addLayer(ctx, t, l, Inputs{RepoRoot: repoRoot, Arch: arch}, m); err != nil {
		return nil, err
	}
	return t, nil
}
