package assemble

import (
	"context"
	"fmt"
	"sort"

	"github.com/berth-node/berth/config/manifest"
	"github.com/berth-node/berth/image/fstree"
	"github.com/berth-node/berth/image/spec"
)

// LayerTree builds one spec layer alone into a fresh tree, with the node
// image's rules (binaries with the libraries they need, dlopened plugins,
// links, busybox applets, goBuild): the container images of the cluster are
// packed from the same kind of layer. Tools and images have no meaning
// outside a node image, so a layer naming images is refused. arch is what
// goBuild packages are built for (amd64 when empty).
func LayerTree(ctx context.Context, l spec.Layer, repoRoot, arch string) (*fstree.Tree, error) {
	return LayerTreeFrom(ctx, l, Inputs{RepoRoot: repoRoot, Arch: arch})
}

// LayerTreeFrom is LayerTree with the inputs' RepoRoot, Arch and Sysroot
// (an arm64 layer's host programs come from an arm64 sysroot).
func LayerTreeFrom(ctx context.Context, l spec.Layer, in Inputs) (*fstree.Tree, error) {
	if len(l.Images) > 0 {
		return nil, fmt.Errorf("layer names image %s: a container image holds no images", l.Images[0].Name)
	}
	t := fstree.New()
	m := &manifest.Manifest{Tools: map[string]string{}}
	in = Inputs{RepoRoot: in.RepoRoot, Arch: in.Arch, Sysroot: in.Sysroot}
	if err := addLayer(ctx, t, l, in, m); err != nil {
		return nil, err
	}
	return t, nil
}

// HostFiles lists, sorted, the absolute host paths (in the target's terms,
// read under in.Sysroot) that the root and initramfs layers of in.Spec
// copy: programs, the libraries and interpreters they need, plugins,
// files, busybox. The repository's build outputs are not among them.
// `make sysroot` maps them to the Debian packages to unpack for another
// architecture; only the layers are built, so no kernel or berth is read.
func HostFiles(ctx context.Context, in Inputs) ([]string, error) {
	seen := map[string]bool{}
	in.record = func(p string) { seen[p] = true }
	m := &manifest.Manifest{Tools: map[string]string{}}
	for _, l := range []spec.Layer{in.Spec.Root, in.Spec.Initramfs} {
		if err := addLayer(ctx, fstree.New(), hostOnly(l, hostFiles{repo: in.RepoRoot}), in, m); err != nil {
			return nil, err
		}
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out, nil
}

// hostOnly is l without what the repository provides (its files, Go
// builds, images), which need not exist when the host files are listed.
func hostOnly(l spec.Layer, h hostFiles) spec.Layer {
	out := spec.Layer{Dirs: l.Dirs, Symlinks: l.Symlinks, Plugins: l.Plugins}
	for _, f := range l.Files {
		if f.Src == "" || !h.inRepo(f.Src) {
			out.Files = append(out.Files, f)
		}
	}
	for _, b := range l.Binaries {
		if b.Src == "" || !h.inRepo(b.Src) {
			out.Binaries = append(out.Binaries, b)
		}
	}
	if l.Busybox != nil && !h.inRepo(l.Busybox.Src) {
		out.Busybox = l.Busybox
	}
	return out
}
