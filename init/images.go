package main

import (
	"context"
	"fmt"
	"github.com/berth-node/berth/init/report"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/berth-node/berth/config/manifest"
	"github.com/berth-node/berth/runtime/containerd"
)

// cmdRunner runs a command to completion and returns its combined output
// (the reaper's Output on the node; a fake in tests).
type cmdRunner func(ctx context.Context, cmd *exec.Cmd) ([]byte, error)

// importOrder is the order in which the image's OCI tarballs are
// imported: the sandbox image first, since a pod's sandbox is the first
// thing kubelet asks containerd for and, missing, containerd would try to
// pull it from a registry a node may not reach; then the others (images
// only tests or add-ons need) in the manifest's order.
func importOrder(images []manifest.Image, sandbox string) []manifest.Image {
	out := slices.Clone(images)
	slices.SortStableFunc(out, func(a, b manifest.Image) int {
		switch {
		case a.Name == sandbox && b.Name != sandbox:
			return -1
		case b.Name == sandbox && a.Name != sandbox:
			return 1
		}
		return 0
	})
	return out
}

// imageImporter imports the image's OCI tarballs into containerd's k8s.io
// namespace with ctr. ctr rather than the containerd client library: the
// library would double berth's size for one call.
type imageImporter struct {
	log *slog.Logger
	run cmdRunner
	ctr string
	// clock is the time since kernel start (bootlog.SinceBoot on the node).
	clock func() time.Duration
	// timeout bounds one ctr call.
	timeout time.Duration
	// done sees each result as it comes, in import order.
	done func(report.ImageImport)
	// fresh says containerd started with no metadata database, so it has
	// no images and listing them (a second of ctr under TCG, before the
	// sandbox image's import) can be skipped.
	fresh bool
}

// containerdMetaDB is containerd's metadata database under its root.
const containerdMetaDB = containerd.Root + "/io.containerd.metadata.v1.bolt/meta.db"

// importAll imports images in importOrder, one after the other, skipping
// those containerd already has (a reboot keeps /var/lib/containerd on
// instance store). One listing serves them all: each ctr call is a
// process start that costs a good part of a second under TCG.
// A failed import is logged and reported in its result.
func (im imageImporter) importAll(ctx context.Context, images []manifest.Image, sandbox string) {
	if len(images) == 0 {
		return
	}
	var have []string
	if !im.fresh {
		have = im.list(ctx)
	}
	for _, img := range importOrder(images, sandbox) {
		im.done(im.one(ctx, img, slices.Contains(have, img.Name)))
		if ctx.Err() != nil {
			return
		}
	}
}

// list names the images containerd has.
func (im imageImporter) list(ctx context.Context) []string {
	lctx, cancel := context.WithTimeout(ctx, im.timeout)
	out, err := im.run(lctx, exec.Command(im.ctr, "-n", "k8s.io", "images", "ls", "-q"))
	cancel()
	if err != nil {
		// Importing an image containerd has is only slower, never wrong.
		im.log.Warn("listing containerd's images; importing every image", "err", err, "output", strings.TrimSpace(string(out)))
		return nil
	}
	return strings.Fields(string(out))
}

func (im imageImporter) one(ctx context.Context, img manifest.Image, present bool) report.ImageImport {
	start := im.clock()
	res := report.ImageImport{Name: img.Name, StartMs: start.Milliseconds()}
	if present {
		im.log.Info("image already present", "image", img.Name)
		return res
	}
	ictx, cancel := context.WithTimeout(ctx, im.timeout)
	defer cancel()
	// The tarball's index annotations name the image.
	out, err := im.run(ictx, exec.Command(im.ctr, "-n", "k8s.io", "images", "import", img.Path))
	res.DurationMs = (im.clock() - start).Milliseconds()
	if err != nil {
		res.Error = fmt.Sprintf("ctr images import %s: %v: %s", img.Path, err, strings.TrimSpace(string(out)))
		im.log.Error("image import failed; pods using it will not start", "image", img.Name, "err", res.Error)
		return res
	}
	res.Imported = true
	im.log.Info("image imported", "image", img.Name, "duration_ms", res.DurationMs)
	return res
}
