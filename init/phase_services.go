package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/berth-node/berth/bootlog"
	"github.com/berth-node/berth/manifest"
	"github.com/berth-node/berth/report"
	"github.com/berth-node/berth/runtime/kubelet"
	"github.com/berth-node/berth/runtime/reaper"
	"github.com/berth-node/berth/runtime/supervise"
	"github.com/berth-node/berth/runtime/supervise/cgroup"
	"github.com/berth-node/berth/shutdown"
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
)

// serviceReport is the services part of the boot report.
type serviceReport struct {
	// KernelToKubeletMs is from kernel start to kubelet's first exec.
	KernelToKubeletMs int64               `json:"kernelToKubeletMs,omitempty"`
	Services          []supervise.Status  `json:"services"`
	Images            []imageImportResult `json:"images,omitempty"`
	// ForwardPolicy is init/firewall.go's, set before any service starts.
	ForwardPolicy []forwardPolicyResult `json:"forwardPolicy,omitempty"`
}

type imageImportResult struct {
	Name       string `json:"name"`
	Imported   bool   `json:"imported"`
	DurationMs int64  `json:"durationMs"`
	Error      string `json:"error,omitempty"`
}

// phaseServices starts the plan's services (containerd, then kubelet once
// containerd is ready and the image's OCI tarballs are imported) and waits,
// bounded, for kubelet to be healthy. A service that fails keeps being
// restarted by the supervisor; the report and the console say why.
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
	rep := &serviceReport{}
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

	jw := &joinWatcher{log: b.log.With("phase", "join"), registered: make(chan struct{}), onRegistered: b.noteRegistered}
	// OnChange needs the supervisor New returns.
	var sup *supervise.Supervisor
	sup, err := supervise.New(p.Services, supervise.Options{
		Reaper: b.reaper,
		Log:    b.log.With("phase", "services"),
		// berth.loglevel=debug shows every service line on the console;
		// otherwise only those that look like errors.
		Verbose:    b.cfg.LogLevel <= slog.LevelDebug,
		LogDir:     supervise.DefaultLogDir,
		CgroupRoot: cgroup.DefaultRoot,
		RlimitExec: kubelet.BerthPath,
		AfterReady: map[string]func(context.Context) error{
			"containerd": func(ctx context.Context) error {
				res, err := importImages(ctx, log, b.reaper, b.node.manifest)
				b.repMu.Lock()
				rep.Images = res
				b.repMu.Unlock()
				select {
				case <-fwdDone:
				case <-ctx.Done():
				}
				return err
			},
		},
		OnLine: map[string]func(string){"kubelet": jw.line},
		// Restarts after boot show in /run/berth/boot.json too.
		OnChange: func(string, supervise.State) { b.refreshServices(sup, rep) },
	})
	if err != nil {
		return fmt.Errorf("services from the plan: %w", err)
	}
	// Shutdown stops in reverse: kubelet, then the pods, then containerd,
	// then the instance-store mounts.
	if st := b.node.storage; st != nil {
		b.addService(storageStopper{res: st, log: b.log.With("phase", "shutdown")})
	}
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
	b.waitTime(ctx)
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
	return nil
}

// refreshServices takes the supervisor's view into the report and, once
// the boot report is out, rewrites /run/berth/boot.json with it.
func (b *boot) refreshServices(sup *supervise.Supervisor, rep *serviceReport) {
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

// importImages imports the image's OCI tarballs into containerd's k8s.io
// namespace with ctr, skipping those already present (a reboot keeps
// /var/lib/containerd on instance store). ctr rather than the containerd
// client library: the library would double berth's size for one call.
func importImages(ctx context.Context, log *slog.Logger, r *reaper.Reaper, m *manifest.Manifest) ([]imageImportResult, error) {
	if m == nil || len(m.Images) == 0 {
		return nil, nil
	}
	ctr := m.Tools["ctr"]
	if ctr == "" {
		ctr = "/usr/bin/ctr"
	}
	run := reaperRunner(r)
	var out []imageImportResult
	var errs []error
	for _, im := range m.Images {
		start := time.Now()
		res := imageImportResult{Name: im.Name}
		ictx, cancel := context.WithTimeout(ctx, importTimeout)
		have, err := run(ictx, exec.Command(ctr, "-n", "k8s.io", "images", "ls", "-q"))
		switch {
		case err != nil:
			res.Error = fmt.Sprintf("listing images: %v: %s", err, strings.TrimSpace(string(have)))
		case slices.Contains(strings.Fields(string(have)), im.Name):
			log.Info("image already present", "image", im.Name)
		default:
			// The tarball's index annotations name the image.
			o, err := run(ictx, exec.Command(ctr, "-n", "k8s.io", "images", "import", im.Path))
			if err != nil {
				res.Error = fmt.Sprintf("ctr images import %s: %v: %s", im.Path, err, strings.TrimSpace(string(o)))
			} else {
				res.Imported = true
			}
		}
		cancel()
		res.DurationMs = time.Since(start).Milliseconds()
		if res.Error != "" {
			errs = append(errs, errors.New(res.Error))
			log.Error("image import failed", "image", im.Name, "err", res.Error)
		} else if res.Imported {
			log.Info("image imported", "image", im.Name, "duration_ms", res.DurationMs)
		}
		out = append(out, res)
	}
	return out, errors.Join(errs...)
}
