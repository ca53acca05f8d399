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
	"github.com/berth-node/berth/init/plan"
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
	// The update agent first: a trial's deadline runs from the boot's
	// start, and a kubelet that never gets healthy must not hold the
	// verdict back until the wait below is over.
	b.startUpdates(ctx, b.updateOptions(b.log.With("phase", "update")))
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

	g := b.startPrereqs(ctx, log, rep)
	// Before containerd starts: it creates the database.
	_, err := os.Stat(containerdMetaDB)
	fresh := errors.Is(err, fs.ErrNotExist)
	jw := &joinWatcher{log: b.log.With("phase", "join"), registered: make(chan struct{}), onRegistered: b.noteRegistered}
	sup, err := b.newSupervisor(p.Services, rep, g, jw)
	if err != nil {
		return fmt.Errorf("services from the plan: %w", err)
	}
	imports := b.startImports(ctx, log, rep, sup, g, fresh)
	b.addServiceStoppers(p.Shutdown, sup)
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
	if !imports.wait(ctx) {
		return ctx.Err()
	}
	return nil
}

// event happens once: fired once, waited for by any number.
type event struct {
	ch   chan struct{}
	once sync.Once
}

func newEvent() *event { return &event{ch: make(chan struct{})} }

// fire marks the event; later calls do nothing (containerd's AfterReady
// hook runs again after each restart).
func (s *event) fire() { s.once.Do(func() { close(s.ch) }) }

// wait blocks until the event or ctx's end, and says which came.
func (s *event) wait(ctx context.Context) bool {
	select {
	case <-s.ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// servicesGates are what the services' starts wait for, besides each
// other.
type servicesGates struct {
	// forward is FORWARD's policy set; time the first NTP sync, or its
	// bound. kubelet's start waits for both (containerd's AfterReady).
	forward, time *event
	// containerd is containerd's first ready.
	containerd *event
}

// startPrereqs starts what kubelet needs and containerd does not, beside
// containerd's start:
//   - FORWARD's policy ACCEPT: setting it loads nf_tables, over a second
//     under TCG;
//   - the first NTP sync: containerd makes no TLS connection and signs
//     nothing, but kubelet's TLS bootstrap does, and the imports' leases
//     carry wall-clock expiry times. Amazon Time Sync answers in well under
//     a millisecond; a slow or absent server does not hold containerd back.
func (b *boot) startPrereqs(ctx context.Context, log *slog.Logger, rep *report.Services) servicesGates {
	g := servicesGates{forward: newEvent(), time: newEvent(), containerd: newEvent()}
	b.goSafe(log, "forward-policy", func() {
		defer g.forward.fire()
		b.setForwardPolicy(ctx, log, rep)
	})
	b.goSafe(log, "time-wait", func() {
		defer g.time.fire()
		tw := b.waitTime(ctx)
		b.repMu.Lock()
		rep.TimeWait = tw
		b.repMu.Unlock()
	})
	return g
}

// newSupervisor makes the supervisor of the plan's services: kubelet's
// start waits, through containerd's AfterReady hook, for the prerequisites
// (g), and its lines feed the join watcher.
func (b *boot) newSupervisor(specs []supervise.Spec, rep *report.Services, g servicesGates, jw *joinWatcher) (*supervise.Supervisor, error) {
	// OnChange needs the supervisor New returns.
	var sup *supervise.Supervisor
	sup, err := supervise.New(specs, supervise.Options{
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
				g.containerd.fire()
				// A canceled wait is no hook failure: the supervisor is
				// stopping.
				_ = g.forward.wait(ctx) && g.time.wait(ctx)
				return nil
			},
		},
		OnLine: map[string]func(string){"kubelet": jw.line},
		// Restarts after boot show in /run/berth/boot.json too.
		OnChange: func(string, supervise.State) { b.refreshServices(sup, rep) },
	})
	if err != nil {
		return nil, err
	}
	b.repMu.Lock()
	b.serviceLogBytes = sup.LogBytes
	b.repMu.Unlock()
	return sup, nil
}

// startImports imports the image's OCI tarballs once kubelet is healthy,
// not beside its start, and returns the imports' end.
//
// Unpacking a layer makes containerd bind-mount the snapshot, which is on
// /var, under /var/lib/containerd/tmpmounts for a moment. kubelet's
// cAdvisor reads the mount table once, when kubelet starts, and keeps a
// tmpfs bind mount as a filesystem of its own with /var's device number;
// when containerd has removed it, that entry's capacity reads 0, and
// kubelet picks it for its root dir about half the time (a map walk).
// kubelet then refuses to start: "ephemeral-storage has a reservation of
// 1Gi but capacity of 0" (docs/design.md). Healthy means kubelet read the
// mount table (its healthz server starts after cAdvisor), so mounts made
// from then on are never seen. Kubelet does not need the images before it
// registers: the first sandbox it asks containerd for comes only once it
// has registered the node and been given a pod (berth plans no static
// pods), and the sandbox image is imported first, alone. Under TCG kubelet
// was healthy about 1 s after its exec, the sandbox image's import takes
// about 2 s, and the registration came 7.8 s after the exec.
//
// With no kubelet in the plan the imports wait for containerd and the
// clock alone (kubelet's readiness implies both).
func (b *boot) startImports(ctx context.Context, log *slog.Logger, rep *report.Services, sup *supervise.Supervisor, g servicesGates, fresh bool) *event {
	done := newEvent()
	var kubeletUp <-chan struct{}
	for _, s := range sup.Services() {
		if s.Name() == "kubelet" {
			kubeletUp = s.Ready()
		}
	}
	b.goSafe(log, "image-imports", func() {
		defer done.fire()
		if !g.containerd.wait(ctx) || !g.time.wait(ctx) {
			return
		}
		if kubeletUp != nil {
			select {
			case <-kubeletUp:
			case <-ctx.Done():
				return
			}
		}
		b.importImages(ctx, log, rep, fresh)
	})
	return done
}

// addServiceStoppers registers the services for the way down, which runs
// the stoppers in reverse: kubelet, then the pods (their cgroups, given
// the plan's grace), then containerd, then what earlier phases registered
// (the storage phase's instance-store mounts).
func (b *boot) addServiceStoppers(sd plan.Shutdown, sup *supervise.Supervisor) {
	for i, s := range sup.Services() {
		if s.Name() == "kubelet" && i > 0 {
			b.downMu.Lock()
			b.timeouts.Service = max(b.timeouts.Service, sd.StepTimeout)
			b.downMu.Unlock()
			b.addStopper(shutdown.PodStopper{Root: filepath.Join(cgroup.DefaultRoot, podsCgroup), Grace: sd.PodGrace, Log: b.log.With("phase", "shutdown")})
		}
		b.addStopper(s)
	}
}

// waitTime waits, bounded, for the time client's first clock update; the
// services phase runs it beside containerd's start, and kubelet's start
// waits for it. Without a time client (berth.ntp=off) there is no wait and
// no record of one.
func (b *boot) waitTime(ctx context.Context) *report.TimeWait {
	c := b.node.time
	if c == nil {
		return nil
	}
	start, t0 := b.clock(), time.Now()
	synced := c.WaitFirst(ctx, firstSyncWait)
	waited := time.Since(t0)
	b.log.Info("first NTP sync before kubelet", "phase", "time", "synced", synced,
		"waited", waited.Round(time.Millisecond))
	return &report.TimeWait{StartMs: start.Milliseconds(), DurationMs: waited.Milliseconds(), Synced: synced}
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
