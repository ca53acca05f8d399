package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-node/berth/bootlog"
	"github.com/berth-node/berth/manifest"
	"github.com/berth-node/berth/mounts/localstorage"
	"github.com/berth-node/berth/nodeconfig"
	"github.com/berth-node/berth/runtime/reaper"
	"github.com/berth-node/berth/runtime/supervise"
	"github.com/berth-node/berth/runtime/supervise/cgroup"
	"golang.org/x/sys/unix"
)

const (
	// kubeletReadyTimeout bounds how long boot waits for kubelet's healthz
	// before printing the report; kubelet goes on being supervised after.
	kubeletReadyTimeout = 3 * time.Minute
	// podGrace is how long pods get between SIGTERM and SIGKILL at
	// shutdown unless the config says otherwise (podGracePeriod), as
	// kubelet's default terminationGracePeriodSeconds.
	podGrace = 30 * time.Second
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
}

type imageImportResult struct {
	Name       string `json:"name"`
	Imported   bool   `json:"imported"`
	DurationMs int64  `json:"durationMs"`
	Error      string `json:"error,omitempty"`
}

// phaseSupervise starts the plan's services (containerd, then kubelet once
// containerd is ready and the image's OCI tarballs are imported) and waits,
// bounded, for kubelet to be healthy. A service that fails keeps being
// restarted by the supervisor; the report and the console say why.
func phaseSupervise(ctx context.Context, b *boot, log *slog.Logger) error {
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

	jw := &joinWatcher{log: b.log.With("phase", "join"), registered: make(chan struct{})}
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
		AfterReady: map[string]func(context.Context) error{
			"containerd": func(ctx context.Context) error {
				res, err := importImages(ctx, log, b.reaper, b.node.manifest)
				b.repMu.Lock()
				rep.Images = res
				b.repMu.Unlock()
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
			grace := podGracePeriod(b.node.config, log)
			// The shutdown sequence bounds each step; leave room for the
			// grace period and the SIGKILL after it.
			b.downMu.Lock()
			if need := grace + 5*time.Second; b.timeouts.Service < need {
				b.timeouts.Service = need
			}
			b.downMu.Unlock()
			b.addService(podStopper{root: filepath.Join(cgroup.DefaultRoot, podsCgroup), grace: grace, log: b.log.With("phase", "shutdown")})
		}
		b.addService(s)
	}
	sup.Start(ctx)
	safeGo(jw.log, "join-watcher", func() { jw.run(ctx, sup) })

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
	b.repMu.Lock()
	defer b.repMu.Unlock()
	rep.Services = st
	for _, s := range st {
		if s.Name == "kubelet" && !s.StartedAt.IsZero() && rep.KernelToKubeletMs == 0 {
			rep.KernelToKubeletMs = kernelMs(s.StartedAt)
		}
	}
	if b.reported {
		if err := b.rep.Write(b.reportPath); err != nil {
			b.log.Warn("updating the boot report", "phase", "services", "file", b.reportPath, "err", err)
		}
	}
}

// podGracePeriod is how long pods get between SIGTERM and SIGKILL at
// shutdown: the NodeConfig's kubelet.config.shutdownGracePeriod (kubelet's
// own graceful node shutdown needs systemd's inhibitor locks, so berth does
// that job), else podGrace.
func podGracePeriod(res *nodeconfig.Result, log *slog.Logger) time.Duration {
	if res == nil || res.Config == nil {
		return podGrace
	}
	raw, ok := res.Config.Spec.Kubelet.Config["shutdownGracePeriod"]
	if !ok {
		return podGrace
	}
	var v string
	d, err := time.Duration(0), json.Unmarshal(raw, &v)
	if err == nil {
		d, err = time.ParseDuration(v)
	}
	if err != nil || d <= 0 || d > 10*time.Minute {
		log.Warn("spec.kubelet.config.shutdownGracePeriod is not a duration between 0 and 10m; using the default", "value", string(raw), "default", podGrace.String())
		return podGrace
	}
	return d
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

// joinWatcher follows kubelet's log for the node's registration, and until
// it happens repeats on the console the last reason kubelet gave, so a node
// that cannot join says why instead of looping silently.
type joinWatcher struct {
	log        *slog.Logger
	registered chan struct{}
	once       sync.Once
	mu         sync.Mutex
	lastErr    string
}

// kubeletRegistered matches kubelet's "Successfully registered node" line.
var kubeletRegistered = regexp.MustCompile(`Successfully registered node`)

// joinErrors are the kubelet lines that say why a node cannot join; other
// errors kubelet logs while it waits (CSINode, checkpoints) say nothing
// about the join and would mislead.
var joinErrors = regexp.MustCompile(`x509: |connection refused|no route to host|i/o timeout|Unauthorized|forbidden|certificate|Unable to register node|failed to run Kubelet|bootstrap|getting credentials|no such host`)

func (w *joinWatcher) line(l string) {
	if kubeletRegistered.MatchString(l) {
		w.once.Do(func() { close(w.registered) })
		return
	}
	if joinErrors.MatchString(l) {
		w.mu.Lock()
		w.lastErr = l
		w.mu.Unlock()
	}
}

func (w *joinWatcher) run(ctx context.Context, sup *supervise.Supervisor) {
	tick := time.NewTicker(joinNagInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.registered:
			w.log.Info("node registered with the API server")
			return
		case <-tick.C:
			w.mu.Lock()
			last := w.lastErr
			w.mu.Unlock()
			if last == "" {
				if k := sup.Service("kubelet"); k != nil {
					last = k.Status().LastError
				}
			}
			if last == "" {
				last = "kubelet has not said why yet"
			}
			w.log.Error("node not registered yet", "cause", joinCause(last))
		}
	}
}

// joinCause shortens a kubelet log line to the part that says why: the
// err="..." value when the line has one (klog's structured form).
func joinCause(l string) string {
	if i := strings.Index(l, `err="`); i >= 0 {
		if q, err := strconv.QuotedPrefix(l[i+len(`err=`):]); err == nil {
			if s, err := strconv.Unquote(q); err == nil {
				return s
			}
		}
	}
	return l
}

// podStopper is shutdown's second step: after kubelet stops, every pod's
// processes get SIGTERM, pods.grace to exit, then SIGKILL; containerd stops
// after it.
type podStopper struct {
	root  string
	grace time.Duration
	log   *slog.Logger
}

func (podStopper) Name() string { return "pods" }

func (s podStopper) Stop(ctx context.Context) error {
	pids := cgroupPIDs(s.root)
	if len(pids) == 0 {
		s.log.Info("no pod processes to stop")
		return nil
	}
	s.log.Info("stopping pods", "processes", len(pids), "grace", s.grace.String())
	signalAll(pids, unix.SIGTERM)
	deadline := time.Now().Add(s.grace)
	if d, ok := ctx.Deadline(); ok && d.Add(-2*time.Second).Before(deadline) {
		deadline = d.Add(-2 * time.Second)
	}
	for time.Now().Before(deadline) {
		if len(cgroupPIDs(s.root)) == 0 {
			s.log.Info("pods stopped")
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	left := cgroupPIDs(s.root)
	s.log.Warn("pods still running after the grace period; killing", "processes", len(left))
	signalAll(left, unix.SIGKILL)
	return nil
}

// cgroupPIDs lists every process in the cgroup subtree at root.
func cgroupPIDs(root string) []int {
	var pids []int
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

func signalAll(pids []int, sig unix.Signal) {
	for _, pid := range pids {
		_ = unix.Kill(pid, sig)
	}
}

// storageStopper unmounts the instance-store binds and array after
// containerd has stopped, before the final sync and power-off.
type storageStopper struct {
	res *localstorage.Result
	log *slog.Logger
}

func (storageStopper) Name() string { return "instance-store" }

func (s storageStopper) Stop(ctx context.Context) error {
	return localstorage.Teardown(ctx, s.log, s.res, localstorage.DefaultEnv(nil))
}
