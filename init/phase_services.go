package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/berth-node/berth/init/bootlog"
	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/init/shutdown"
	"github.com/berth-node/berth/runtime/supervise"
	"github.com/berth-node/berth/runtime/supervise/cgroup"
)

const (
	// kubeletReadyTimeout bounds how long boot waits for kubelet's healthz
	// before printing the report; kubelet goes on being supervised after.
	kubeletReadyTimeout = 3 * time.Minute
	// joinNagInterval is how often the console repeats why the node has
	// not registered yet.
	joinNagInterval = 20 * time.Second
	// importTimeout bounds one image import.
	importTimeout = 2 * time.Minute
	// podsCgroup is where kubelet (cgroupfs driver, cgroupRoot /) puts pods.
	podsCgroup = "kubepods"
	// selfExe is PID 1's own executable, which runs `berth rlimit-exec`
	// before each service: the same berth as the root image's /sbin/berth
	// (the image build puts one binary at both), but the initramfs's copy,
	// whose pages PID 1 has in memory already. /sbin/berth sits on the
	// compressed root, and its first exec cost about a second under TCG,
	// on containerd's way to ready.
	selfExe = "/proc/self/exe"
)

// phaseServices starts the plan's services (containerd, then kubelet once
// containerd is ready) and waits, bounded, for kubelet to be healthy and
// then for the image's OCI tarballs, imported once kubelet is healthy, so
// that the report has them. A service that fails keeps being restarted by
// the supervisor; the report and the console say why.
func phaseServices(ctx context.Context, b *boot, log *slog.Logger) error {
	p := b.node.plan
	if p == nil || len(p.Services) == 0 {
		log.Info("skipped: no services planned")
		return nil
	}
	// kubelet's systemReservedCgroup must exist even though berth puts
	// nothing there itself.
	if err := os.MkdirAll(filepath.Join(cgroup.DefaultRoot, "system.slice"), 0o755); err != nil {
		log.Warn("creating the system.slice cgroup", "err", err)
	}
	rep := &report.Services{}
	b.repMu.Lock()
	b.rep.Services = rep
	b.repMu.Unlock()

	// FORWARD's policy must be ACCEPT before kubelet starts, not before
	// containerd: setting it loads nf_tables (over a second under TCG), so
	// it runs beside containerd's start and kubelet waits for it below.
	fwdDone := make(chan struct{})
	b.goSafe(log, "forward-policy", func() {
		defer close(fwdDone)
		b.setForwardPolicy(ctx, log, rep)
	})

	// The first NTP sync is waited for beside containerd's start, not
	// before it: containerd makes no TLS connection and signs nothing, but
	// kubelet's TLS bootstrap does, and the imports' leases carry wall-clock
	// expiry times. Amazon Time Sync answers in well under a millisecond;
	// a slow or absent server no longer holds containerd back.
	timeDone := make(chan struct{})
	b.goSafe(log, "time-wait", func() {
		defer close(timeDone)
		tw := b.waitTime(ctx)
		b.repMu.Lock()
		rep.TimeWait = tw
		b.repMu.Unlock()
	})

	containerdReady := make(chan struct{})
	var readyOnce sync.Once
	// Before containerd starts: it creates the database.
	_, err := os.Stat(containerdMetaDB)
	fresh := errors.Is(err, fs.ErrNotExist)

	jw := &joinWatcher{log: b.log.With("phase", "join"), registered: make(chan struct{}), onRegistered: b.noteRegistered}
	// OnChange needs the supervisor New returns.
	var sup *supervise.Supervisor
	sup, err = supervise.New(p.Services, supervise.Options{
		Reaper: b.reaper,
		Log:    b.log.With("phase", "services"),
		// berth.loglevel=debug shows every service line on the console;
		// otherwise only those that look like errors.
		Verbose:    b.cfg.LogLevel <= slog.LevelDebug,
		LogDir:     supervise.DefaultLogDir,
		CgroupRoot: cgroup.DefaultRoot,
		RlimitExec: selfExe,
		AfterReady: map[string]func(context.Context) error{
			"containerd": func(ctx context.Context) error {
				// The supervisor runs the hook again if containerd dies
				// during it; the imports start once.
				readyOnce.Do(func() { close(containerdReady) })
				for _, c := range []chan struct{}{fwdDone, timeDone} {
					select {
					case <-c:
					case <-ctx.Done():
						return nil
					}
				}
				return nil
			},
		},
		OnLine: map[string]func(string){"kubelet": jw.line},
		// Restarts after boot show in /run/berth/boot.json too.
		OnChange: func(string, supervise.State) { b.refreshServices(sup, rep) },
	})
	if err != nil {
		return fmt.Errorf("services from the plan: %w", err)
	}
	b.repMu.Lock()
	b.serviceLogBytes = sup.LogBytes
	b.repMu.Unlock()

	// The imports start once kubelet is healthy, not beside its start.
	// Unpacking a layer makes containerd bind-mount the snapshot, which is
	// on /var, under /var/lib/containerd/tmpmounts for a moment. kubelet's
	// cAdvisor reads the mount table once, when kubelet starts, and keeps
	// a tmpfs bind mount as a filesystem of its own with /var's device
	// number; when containerd has removed it, that entry's capacity reads
	// 0, and kubelet picks it for its root dir about half the time (a map
	// walk). kubelet then refuses to start: "ephemeral-storage has a
	// reservation of 1Gi but capacity of 0" (docs/design.md). Healthy
	// means kubelet read the mount table (its healthz server starts after
	// cAdvisor), so mounts made from then on are never seen. Kubelet does
	// not need the images before it registers: the first sandbox it asks
	// containerd for comes only once it has registered the node and been
	// given a pod (berth plans no static pods), and the sandbox image is
	// imported first, alone. Under TCG kubelet was healthy about 1 s after
	// its exec, the sandbox image's import takes about 2 s, and the
	// registration came 7.8 s after the exec.
	importsDone := make(chan struct{})
	var kubeletUp <-chan struct{}
	for _, s := range sup.Services() {
		if s.Name() == "kubelet" {
			kubeletUp = s.Ready()
		}
	}
	b.goSafe(log, "image-imports", func() {
		defer close(importsDone)
		for _, c := range []<-chan struct{}{containerdReady, timeDone, kubeletUp} {
			if c == nil {
				continue
			}
			select {
			case <-c:
			case <-ctx.Done():
				return
			}
		}
		b.importImages(ctx, log, rep, fresh)
	})
	// Shutdown stops in reverse: kubelet, then the pods, then containerd,
	// then what earlier phases registered (the storage phase's
	// instance-store mounts).
	var stoppers []*supervise.Service
	for _, s := range sup.Services() {
		stoppers = append(stoppers, s)
	}
	for i, s := range stoppers {
		if s.Name() == "kubelet" && i > 0 {
			sd := p.Shutdown
			b.downMu.Lock()
			b.timeouts.Service = max(b.timeouts.Service, sd.StepTimeout)
			b.downMu.Unlock()
			b.addService(shutdown.PodStopper{Root: filepath.Join(cgroup.DefaultRoot, podsCgroup), Grace: sd.PodGrace, Log: b.log.With("phase", "shutdown")})
		}
		b.addService(s)
	}
	b.startLogind(ctx, log, p)
	sup.Start(ctx)
	b.goSafe(jw.log, "join-watcher", func() { jw.run(ctx, sup) })

	wctx, cancel := context.WithTimeout(ctx, kubeletReadyTimeout)
	defer cancel()
	werr := sup.WaitReady(wctx, "kubelet")
	b.refreshServices(sup, rep)
	if werr != nil {
		// Not fatal: the supervisor keeps trying, and the join watcher
		// keeps saying why on the console.
		return fmt.Errorf("kubelet not healthy within %s: %w", kubeletReadyTimeout, werr)
	}
	log.Info("kubelet healthy", "kernel_to_kubelet_ms", rep.KernelToKubeletMs)
	// Each import is bounded (importTimeout), so this wait is too.
	select {
	case <-importsDone:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// importImages imports the manifest's images (imageImporter), each result
// into the report as it comes, so boot.json shows them if the report is
// out before they end.
func (b *boot) importImages(ctx context.Context, log *slog.Logger, rep *report.Services, fresh bool) {
	m := b.node.manifest
	if m == nil || len(m.Images) == 0 {
		return
	}
	ctr := m.Tools["ctr"]
	if ctr == "" {
		ctr = "/usr/bin/ctr"
	}
	im := imageImporter{
		log: log, run: b.reaper.Output, ctr: ctr, clock: b.clock, timeout: importTimeout, fresh: fresh,
		done: func(res report.ImageImport) {
			b.updateReport("services", func(*report.Report) { rep.Images = append(rep.Images, res) })
		},
	}
	im.importAll(ctx, m.Images, m.SandboxImage)
}

// refreshServices takes the supervisor's view into the report and, once
// the boot report is out, rewrites /run/berth/boot.json with it.
func (b *boot) refreshServices(sup *supervise.Supervisor, rep *report.Services) {
	if sup == nil {
		return
	}
	st := sup.Status()
	b.updateReport("services", func(*report.Report) {
		rep.Services = st
		for _, s := range st {
			if s.Name == "kubelet" && !s.StartedAt.IsZero() && rep.KernelToKubeletMs == 0 {
				rep.KernelToKubeletMs = kernelMs(s.StartedAt)
			}
		}
	})
}

// kernelMs converts a wall-clock time to milliseconds since kernel start.
func kernelMs(t time.Time) int64 {
	return (bootlog.SinceBoot() - time.Since(t)).Milliseconds()
}
