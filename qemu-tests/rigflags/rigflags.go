// Package rigflags holds the flags that the rigs' commands (make demo,
// bench, soak and cluster) share: where the node image and the built
// components are, from the environment the Makefile sets, as the QEMU
// tests read it, or from the repository's build/ when run by hand.
package rigflags

import (
	"flag"
	"os"
	"path/filepath"
)

// Image adds -image to fs: the node image directory (vmlinuz,
// initramfs.img, root.erofs), $BERTH_IMAGE or build/image-test.
func Image(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "image", envOr("BERTH_IMAGE", filepath.Join("build", "image-test")),
		"node image directory (vmlinuz, initramfs.img) [$BERTH_IMAGE]")
}

// Components adds -components to fs: the built components (etcd-*/,
// kube-*/, images/), $BERTH_COMPONENTS_DIR or build/components.
func Components(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "components", envOr("BERTH_COMPONENTS_DIR", filepath.Join("build", "components")),
		"directory of built components (etcd-*/, kube-*/, images/) [$BERTH_COMPONENTS_DIR]")
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
