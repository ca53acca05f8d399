package main

import (
	"context"
	"log/slog"

	"github.com/berth-node/berth/plan"
	"github.com/berth-node/berth/runtime/kubelet"
	"github.com/berth-node/berth/runtime/prefetch"
)

// The image's executables that run on the way to kubelet (image/spec.yaml
// puts them there), in the order they first run: berth itself as
// /sbin/modprobe (the host phase's bpffs mount) and `berth rlimit-exec`,
// containerd, the shim and runc (containerd's CRI plugin runs both once
// at start to learn runc's features), kubelet, then ctr for the image
// imports.
const (
	shimBinary = "/usr/bin/containerd-shim-runc-v2"
	runcBinary = "/usr/bin/runc"
	ctrBinary  = "/usr/bin/ctr"
)

// phasePrefetch starts reading those executables into the page cache, in
// the background and at the lowest priority, as soon as the root image is
// mounted: on the compressed root every page an exec touches is otherwise
// a fault and a decompression on the service's critical path. Nothing
// waits for it; a file it has not reached yet is read by its exec, as
// without it.
func phasePrefetch(ctx context.Context, b *boot, log *slog.Logger) error {
	paths := prefetchPaths(b)
	b.goSafe(log, "prefetch", func() {
		res, err := prefetch.Files(ctx, log, paths)
		if err != nil {
			log.Warn("reading executables ahead", "err", err)
		}
		log.Info("executables read ahead", "files", len(res.Files), "mib", res.Bytes>>20, "ms", res.DurationMs)
	})
	return nil
}

// prefetchPaths lists the executables in the order they first run.
func prefetchPaths(b *boot) []string {
	ctr := ctrBinary
	if m := b.node.manifest; m != nil && m.Tools["ctr"] != "" {
		ctr = m.Tools["ctr"]
	}
	return []string{kubelet.BerthPath, plan.ContainerdBinary, shimBinary, runcBinary, plan.KubeletBinary, ctr}
}
