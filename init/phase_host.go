package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"

	"github.com/berth-node/berth/mounts"
	"github.com/berth-node/berth/mounts/hostfs"
	"github.com/berth-node/berth/mounts/localstorage"
)

// phaseHost shapes the filesystem as EKS add-ons expect of an Amazon Linux
// or Bottlerocket host (mounts/hostfs): writable /opt/cni/bin and /opt/csi,
// /etc/cni/net.d, /var/run → /run, bpffs, shared propagation, kubelet's
// plugin directories. It runs after storage, whose binds over
// /var/lib/kubelet the plugin directories must be made in and whose mounts
// must be shared, and before apply and services, which start what uses
// them. Not fatal: a node without bpffs or a writable /opt/cni/bin still
// runs the pods that need neither, and the report says what is missing.
//
// The bpffs mount and the propagation check that follows it run beside
// apply and containerd's start (a side step): the mount costs about a
// second under TCG (the kernel runs /sbin/modprobe for bpf_preload) and
// only kubelet and what it runs use bpffs, so kubelet's start waits for
// it instead of the pipeline. Its failure is the host phase's in the
// report, as before.
func phaseHost(ctx context.Context, b *boot, log *slog.Logger) error {
	opts := hostfs.Options{Root: "/", Shared: hostSharedMounts(b), SaveSuffix: bootIDPrefix()}
	st := hostfs.Start(ctx, log, opts)
	// Until the side step ends the report holds the quick steps' result;
	// a copy, as Finish goes on appending to the original.
	quick := *st.Result()
	b.rep.Host = &quick
	quickErr := st.Err()
	var final *hostfs.Result
	side := b.goSide(log, sideBPF, "host", "mounting bpffs and checking propagation", func() error {
		res, _ := st.Finish(ctx)
		final = res
		logHostLayout(log, res)
		// Only this half's failures: the phase's own error has the rest.
		var errs []error
		for _, e := range res.Errors[len(quick.Errors):] {
			errs = append(errs, errors.New(e))
		}
		if len(errs) == 0 {
			return nil
		}
		err := errors.Join(errs...)
		log.Error("host layout incomplete", "err", err)
		return err
	})
	side.apply = func() { b.rep.Host = final }
	b.hostSide = side
	return quickErr
}

// logHostLayout is the host phase's summary line.
func logHostLayout(log *slog.Logger, res *hostfs.Result) {
	var overlays []string
	for _, o := range res.Overlays {
		overlays = append(overlays, o.Target+"="+o.Status)
	}
	var fs []string
	for _, m := range res.Mounts {
		fs = append(fs, m.FSType+"="+m.Status)
	}
	log.Info("host layout", "overlays", strings.Join(overlays, ","), "mounts", strings.Join(fs, ","), "var_run", res.VarRun.Action,
		"made_shared", strings.Join(res.MadeShared, ","), "errors", len(res.Errors), "ms", res.DurationMs)
}

// hostSharedMounts are the mounts the root and storage phases made, which
// must be shared too: the data partition and its binds on a disk boot, the
// instance-store filesystems and their binds.
func hostSharedMounts(b *boot) []string {
	var out []string
	if sr, ok := b.rep.Root.(*mounts.SwitchResult); ok && sr.Data != nil && sr.Data.Mount != "" {
		out = append(out, sr.Data.Mount)
		out = append(out, sr.Data.Binds...)
	}
	if s := b.node.storage; s != nil && s.Status == localstorage.StatusReady {
		for _, f := range s.Filesystems {
			out = append(out, f.Mount)
		}
		for _, bd := range s.Binds {
			out = append(out, bd.Target)
		}
	}
	return out
}

// bootIDPrefix names what is moved aside this boot; empty when the boot ID
// cannot be read (hostfs then uses a fixed name).
func bootIDPrefix() string {
	id, err := os.ReadFile(bootIDPath)
	if err != nil {
		return ""
	}
	s := strings.TrimSpace(string(id))
	if len(s) > 8 {
		s = s[:8]
	}
	return s
}
