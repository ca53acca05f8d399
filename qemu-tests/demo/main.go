// Command demo is `make demo`: it starts a throwaway Kubernetes control plane
// on the host's loopback with EKS's default add-ons (the install-cni
// DaemonSet as aws-node, kube-proxy, CoreDNS) and the registry stand-in
// serving their images, serves a NodeConfig pointing at it through an
// IMDSv2 stand-in, boots the berth test image in QEMU, and shows the node
// join and the cluster work: kernel → berth → network → config →
// containerd → kubelet → node registered → CNI installed → Ready →
// kube-proxy → CoreDNS → a pod pulled and Running behind a Service that a
// busybox pod resolves and fetches → kubectl logs and debug node. It then
// powers the node off through
// the ACPI power button, prints the boot timeline and where the logs are,
// and exits 0. On any failure, or on Ctrl-C, it says why, prints the
// console's tail, cleans up, and exits non-zero.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/qemu-tests/clusterimages"
	"github.com/berth-node/berth/qemu-tests/controlplane"
	"github.com/berth-node/berth/qemu-tests/imdsserver"
	"github.com/berth-node/berth/qemu-tests/kubectl"
	"github.com/berth-node/berth/qemu-tests/qemu"
	"github.com/berth-node/berth/qemu-tests/rigflags"
)

// Budgets under TCG on a shared 2-core host; a KVM host needs a tenth.
const (
	bootTimeout     = 8 * time.Minute // QEMU start to the boot report (kubelet healthy)
	registerTimeout = 5 * time.Minute
	readyTimeout    = 5 * time.Minute
	podTimeout      = 6 * time.Minute
	// powerOffBound covers kubelet, the pod's grace period, containerd,
	// sync and unmount.
	powerOffBound = 2 * time.Minute
	pollInterval  = time.Second
	consoleTail   = 40
)

type options struct {
	components string
	image      string
	outDir     string
	readme     string
	timeout    time.Duration
}

func main() {
	var o options
	rigflags.Components(flag.CommandLine, &o.components)
	rigflags.Image(flag.CommandLine, &o.image)
	flag.StringVar(&o.outDir, "out", filepath.Join("build", "demo"), "where the console log and the control plane's state and logs go")
	flag.StringVar(&o.readme, "readme", "", "on success, write the join timeline into this Markdown file's demo-timeline section (README.md)")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Minute, "hard limit on the whole demo; QEMU is killed at this deadline")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeoutCause(ctx, o.timeout, fmt.Errorf("the demo's -timeout of %s passed", o.timeout))
	defer cancel()

	d := &demo{opts: o, out: os.Stdout, watch: newConsoleWatch(),
		log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	err := d.run(ctx)
	if err != nil {
		d.fail(err)
	}
	d.chart()
	if cerr := d.cleanup(); cerr != nil {
		fmt.Fprintf(d.out, "demo: cleaning up: %v\n", cerr)
		if err == nil {
			err = cerr
		}
	}
	if err == nil && o.readme != "" {
		if err = writeReadme(o.readme, d.timeline()); err != nil {
			fmt.Fprintf(d.out, "demo: %v\n", err)
		}
	}
	if err != nil {
		os.Exit(1)
	}
}

// demo is one run: what it started (to clean up) and what it saw.
type demo struct {
	opts  options
	out   io.Writer
	log   *slog.Logger
	watch *consoleWatch
	host  hostTimes
	rep   *report.Report

	cluster      *controlplane.Cluster
	images       clusterimages.Set
	kc           kubectl.Runner
	stopRegistry func()
	stopIMDS     func()
	vm           *qemu.VM
	consoleLog   *os.File
	consoleAt    string
	cpLogs       string
}

func (d *demo) progress(at time.Duration, format string, args ...any) {
	fmt.Fprintf(d.out, "[%6.1fs] %s\n", at.Seconds(), fmt.Sprintf(format, args...))
}

// note is a line outside the node's timeline (before QEMU starts).
func (d *demo) note(format string, args ...any) {
	fmt.Fprintf(d.out, "demo: %s\n", fmt.Sprintf(format, args...))
}

func (d *demo) run(ctx context.Context) error {
	o := d.opts
	for _, f := range []string{"vmlinuz", "initramfs.img"} {
		if _, err := os.Stat(filepath.Join(o.image, f)); err != nil {
			return fmt.Errorf("node image incomplete: %w (run make image-test)", err)
		}
	}
	if err := os.MkdirAll(o.outDir, 0o755); err != nil {
		return fmt.Errorf("creating the demo's output directory: %w", err)
	}
	cpDir := filepath.Join(o.outDir, "controlplane")
	// A previous run's certificates and etcd data would only confuse.
	if err := os.RemoveAll(cpDir); err != nil {
		return fmt.Errorf("removing the previous control plane state %s: %w", cpDir, err)
	}

	// 1. The control plane and the IMDS stand-in.
	dirs, err := controlplane.BinDirsUnder(o.components)
	if err != nil {
		return fmt.Errorf("finding the control plane binaries (run make node-components): %w", err)
	}
	d.images, err = clusterimages.Find(o.components)
	if err == nil {
		err = d.images.Require("kube-proxy.tar", "coredns.tar", "busybox.tar")
	}
	if err != nil {
		return fmt.Errorf("finding the cluster's images (make cluster-images): %w", err)
	}
	_, mirror, stopRegistry, err := d.images.Serve(d.log)
	if err != nil {
		return err
	}
	d.stopRegistry = stopRegistry
	d.note("registry stand-in serving %s, %s, %s, %s, %s (the node dials %s)",
		d.images.InstallCNI, d.images.KubeProxy, d.images.CoreDNS, d.images.Busybox, d.images.Demo, mirror)
	d.note("starting the control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) from %s", o.components)
	t0 := time.Now()
	d.cluster, err = controlplane.Start(ctx, d.log, controlplane.Options{BinDirs: dirs, StateDir: cpDir, KeepState: true})
	if err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}
	info := d.cluster.Info()
	d.cpLogs = info.LogDir
	d.note("control plane ready in %.1f s: %s (the node dials %s); admin kubeconfig %s",
		time.Since(t0).Seconds(), info.HostEndpoint, info.APIServerEndpoint, info.Kubeconfig)

	if d.kc, err = kubectl.Find(dirs, info.Kubeconfig); err != nil {
		return err
	}
	// The add-ons go in before the node boots, as a new EKS cluster has
	// them: the node joins NotReady and the CNI DaemonSet makes it Ready.
	if err := d.cluster.ApplyAddons(ctx, d.cluster.Addons(d.images.InstallCNI, d.images.KubeProxy, d.images.CoreDNS)); err != nil {
		return err
	}
	d.note("add-ons applied: install-cni DaemonSet, kube-proxy DaemonSet, CoreDNS Deployment and kube-dns Service")

	srv, err := imdsserver.New(imdsserver.Config{Instance: imdsInstance(), UserData: mimeUserData(nodeConfigYAML(info, mirror))})
	if err != nil {
		return fmt.Errorf("setting up the IMDS stand-in: %w", err)
	}
	hostURL, stopIMDS, err := srv.Start("127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("starting the IMDS stand-in: %w", err)
	}
	d.stopIMDS = stopIMDS
	u, err := url.Parse(hostURL)
	if err != nil {
		return fmt.Errorf("IMDS stand-in URL %q: %w", hostURL, err)
	}
	imdsURL := "http://10.0.2.2:" + u.Port()
	d.note("IMDS stand-in at %s (the node dials %s), serving the NodeConfig as MIME user data", hostURL, imdsURL)

	// 2. The node.
	d.consoleAt = filepath.Join(o.outDir, "console.log")
	if d.consoleLog, err = os.Create(d.consoleAt); err != nil {
		return fmt.Errorf("creating the console log: %w", err)
	}
	cfg := qemu.ImageConfig(o.image, "berth.imds="+imdsURL)
	cfg.MemoryMB = 2048
	cfg.CPUs = 2
	// The kubelet's port forwarded to the host, for kubectl logs, exec
	// and debug through the control plane's egress proxy.
	cfg.NICs = []qemu.NIC{{HostFwd: []string{qemu.FwdKubelet}}}
	cfg.Timeout = o.timeout
	d.vm, err = qemu.Boot(ctx, cfg, qemu.BootOptions{ConsoleLog: d.consoleLog})
	if err != nil {
		return fmt.Errorf("booting the node: %w", err)
	}
	d.note("QEMU started (TCG, 2 GiB, 2 vCPUs, virtio NIC); console log: %s", d.consoleAt)
	port, err := d.vm.HostFwdPort(controlplane.KubeletPort)
	if err != nil {
		return fmt.Errorf("the node's kubelet forward: %w", err)
	}
	if err := d.cluster.RouteKubelet(nodeName, port); err != nil {
		return fmt.Errorf("routing the API server to the node's kubelet: %w", err)
	}

	// 3. Boot, as the console tells it.
	if err := d.wait(ctx, "the boot report", bootTimeout, func() (bool, string) {
		_, ok := d.watch.get(bootReport)
		return ok, "no BERTH-REPORT line yet"
	}); err != nil {
		return err
	}
	if !d.rep.OK {
		return fmt.Errorf("the node's boot failed: %s", d.rep.Error)
	}

	// 4. The join, as the API server tells it.
	a := api{c: d.cluster.Client(), base: info.HostEndpoint}
	if err := d.wait(ctx, "node registered", registerTimeout, func() (bool, string) {
		reg, _, seen, _ := a.nodeReady(ctx)
		return reg, seen
	}); err != nil {
		return err
	}
	d.host.Registered = d.vm.Uptime()
	d.progress(d.host.Registered, "node registered: %s (NotReady until the CNI DaemonSet runs)", nodeName)
	if err := d.wait(ctx, "node initialized (taint "+controlplane.UninitializedTaint+" removed by the control plane)", registerTimeout, func() (bool, string) {
		return a.nodeInitialized(ctx)
	}); err != nil {
		return err
	}
	d.progress(d.vm.Uptime(), "node initialized: the control plane removed taint %s, as EKS's cloud-controller-manager does", controlplane.UninitializedTaint)
	if err := d.clusterSteps(ctx, a); err != nil {
		return err
	}

	// 5. An orderly power-off through the ACPI power button.
	if err := d.vm.PowerDown(); err != nil {
		return fmt.Errorf("pressing the power button (QMP system_powerdown): %w", err)
	}
	d.host.PowerDown = d.vm.Uptime()
	d.progress(d.host.PowerDown, "power button pressed (QMP system_powerdown)")
	if err := d.wait(ctx, "QEMU exit after system_powerdown", powerOffBound, func() (bool, string) {
		return d.vm.Exited(), "the guest is still shutting down"
	}); err != nil {
		return err
	}
	d.host.QEMUExited = d.vm.Uptime()
	if err := d.vm.WaitExit(time.Second); err != nil {
		return fmt.Errorf("after power-off: %w", err)
	}
	d.progress(d.host.QEMUExited, "node powered off; QEMU exited after %.1f s", (d.host.QEMUExited - d.host.PowerDown).Seconds())

	fmt.Fprintln(d.out)
	return formatTimeline(d.out, d.timeline())
}

func (d *demo) timeline() timeline {
	return timeline{Report: d.rep, Host: d.host, ConsoleLog: d.consoleAt, ControlPlaneLogs: d.cpLogs}
}

// errQEMUExited is a wait cut short because the node is gone.
var errQEMUExited = errors.New("QEMU exited")

// wait polls done until it says yes, the timeout passes, QEMU exits or ctx
// ends. Each round first reads the new console lines, so progress shows as
// it happens.
func (d *demo) wait(ctx context.Context, what string, timeout time.Duration, done func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	last := ""
	for {
		d.pump()
		ok, seen := done()
		if ok {
			return nil
		}
		last = seen
		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("waiting for %s: %w", what, context.Cause(ctx))
		case d.vm.Exited():
			d.pump()
			if ok, _ := done(); ok {
				return nil
			}
			return fmt.Errorf("waiting for %s: %w (last seen: %s)", what, errQEMUExited, last)
		case time.Now().After(deadline):
			return fmt.Errorf("%s not reached within %s; last seen: %s", what, timeout, last)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
}

// pump reads the console lines that came since the last call and prints
// their milestones.
func (d *demo) pump() {
	for _, ev := range d.watch.feed(d.vm.Lines()) {
		d.host.record(ev)
		if ev.Report != nil {
			d.rep = ev.Report
		}
		d.progress(ev.At, "%s", describe(ev))
	}
}

// fail says why the demo failed, with the console's tail and where the
// logs are.
func (d *demo) fail(err error) {
	fmt.Fprintf(d.out, "\ndemo: FAILED: %v\n", err)
	if d.vm != nil {
		d.pump()
		fmt.Fprintf(d.out, "\nconsole tail (last %d lines, s since QEMU start):\n%s", consoleTail, d.vm.ConsoleTail(consoleTail))
	}
	if d.consoleAt != "" {
		fmt.Fprintf(d.out, "full console log: %s\n", d.consoleAt)
	}
	if d.cpLogs != "" {
		fmt.Fprintf(d.out, "control plane logs: %s\n", d.cpLogs)
	}
}

// cleanup kills QEMU if it still runs and stops the IMDS stand-in and the
// control plane; each step is bounded by the step itself.
func (d *demo) cleanup() error {
	var errs []error
	if d.vm != nil {
		errs = append(errs, d.vm.Close())
	}
	if d.stopIMDS != nil {
		d.stopIMDS()
	}
	if d.stopRegistry != nil {
		d.stopRegistry()
	}
	if d.cluster != nil {
		if err := d.cluster.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping the control plane: %w", err))
		}
	}
	if d.consoleLog != nil {
		errs = append(errs, d.consoleLog.Close())
	}
	return errors.Join(errs...)
}
