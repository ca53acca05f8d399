// Command cluster is `make cluster`: a Kubernetes cluster of N berth nodes
// on this machine. It starts a control plane on the host's loopback
// (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) with
// the cluster's add-ons (flannel, kube-proxy, CoreDNS) and the registry
// stand-in serving their images, puts N QEMU nodes on one virtual network
// (package vcluster: each its own address by DHCP, instance ID, hostname,
// IMDS at 169.254.169.254 serving its user data, and an instance-store
// NVMe disk), waits until every node is Ready, writes the admin
// kubeconfig to OUT/kubeconfig and says how to use it. It then keeps the
// cluster up until Ctrl-C or `make cluster-down` (SIGTERM to the pid in
// OUT/cluster.pid), and powers every node off in order through the ACPI
// power button before it stops the control plane.
//
// Per node, OUT/<node>/ holds the console log, the user data served and
// the instance-store disk (made empty at each start, as an instance
// store is after a stop). -node-config NODE=FILE adds a NodeConfig part
// to one node's user data (labels, taints, kubelet settings), merged
// after the join config as any multi-part user data is. -seed nocloud
// makes the nodes machines off EC2: no IMDS, QEMU's own DMI, and the user
// data on a NoCloud seed volume beside the node.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berth-node/berth/internal/fsutil"
	"github.com/berth-node/berth/internal/safe"
	"github.com/berth-node/berth/qemu-tests/clusterimages"
	"github.com/berth-node/berth/qemu-tests/controlplane"
	"github.com/berth-node/berth/qemu-tests/kubectl"
	"github.com/berth-node/berth/qemu-tests/qemu"
	"github.com/berth-node/berth/qemu-tests/rigflags"
	"github.com/berth-node/berth/qemu-tests/seedimage"
	"github.com/berth-node/berth/qemu-tests/vcluster"
)

// Budgets under TCG on a shared 2-core host.
const (
	bootTimeout   = 10 * time.Minute // QEMU start to every boot report
	readyTimeout  = 10 * time.Minute // boot reports to every node Ready
	powerOffBound = 2 * time.Minute
	pollInterval  = 2 * time.Second
	// instanceStoreSize is each node's instance-store disk (sparse).
	instanceStoreSize = 4 << 30
)

type options struct {
	n          int
	components string
	image      string
	out        string
	cni        string
	nodeConfig nodeConfigs
	ready      bool // power off once every node is Ready
	e2eImages  string
	seed       string
}

// nodeConfigs are -node-config NODE=FILE flags.
type nodeConfigs map[string]string

func (c nodeConfigs) String() string { return fmt.Sprint(map[string]string(c)) }

func (c nodeConfigs) Set(v string) error {
	node, file, ok := strings.Cut(v, "=")
	if !ok || node == "" || file == "" {
		return fmt.Errorf("%q: want NODE=FILE (node-a=labels.yaml)", v)
	}
	c[node] = file
	return nil
}

func main() {
	o := options{nodeConfig: nodeConfigs{}}
	flag.IntVar(&o.n, "n", 2, fmt.Sprintf("number of nodes, 1 to %d", vcluster.MaxNodes))
	rigflags.Components(flag.CommandLine, &o.components)
	rigflags.Image(flag.CommandLine, &o.image)
	flag.StringVar(&o.out, "out", filepath.Join("build", "cluster"), "where the kubeconfig, the nodes' consoles and disks and the control plane's state go")
	flag.StringVar(&o.cni, "cni", "flannel", "the CNI: flannel (pods reach each other across nodes) or install-cni (each node's pods on its own bridge)")
	flag.Var(o.nodeConfig, "node-config", "NODE=FILE: a NodeConfig part added to NODE's user data (repeatable)")
	flag.BoolVar(&o.ready, "exit-when-ready", false, "power the nodes off and exit once all are Ready (for timing)")
	flag.StringVar(&o.e2eImages, "e2e-images", "", "also serve the e2e suite's images from this folder (make e2e-images: build/components/e2e-images), under registry.berth.test/<upstream name> as the suite's KUBE_TEST_REPO_LIST asks for them")
	flag.StringVar(&o.seed, "seed", "imds", "where the nodes find their user data: imds (each an EC2 instance by its DMI, with its own IMDS), nocloud (machines off EC2 with a vfat NoCloud seed labelled cidata, no IMDS on the network) or nocloud-iso (an iso9660 seed on a CD drive)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c := &cluster{opts: o, out: os.Stdout, log: log}
	err := c.run(ctx)
	if err != nil && stoppedByRequest(ctx, err) {
		// Ctrl-C or `make cluster-down` (or a runner giving up on the
		// bring-up) during the bring-up: what was asked for, not a
		// failure, and the consoles say nothing about it.
		fmt.Fprintf(c.out, "cluster: stopped before it was up, as asked (%v)\n", err)
		err = nil
	}
	if err != nil {
		fmt.Fprintf(c.out, "cluster: FAILED: %v\n", err)
		for _, nd := range c.nodes {
			if nd.vm != nil {
				fmt.Fprintf(c.out, "%s's console (last 20 lines; all of it in %s):\n%s", nd.Name, nd.consoleAt, nd.vm.ConsoleTail(20))
			}
		}
	}
	if cerr := c.down(); cerr != nil {
		fmt.Fprintf(c.out, "cluster: shutting down: %v\n", cerr)
		err = errors.Join(err, cerr)
	}
	if err != nil {
		os.Exit(1)
	}
}

// stoppedByRequest says whether run's error is only the stop that was
// asked for: a signal ended ctx, and the error is that cancellation
// (wrapped as the step it cut short says). A failure that is not (a node
// that never booted, say) is still one, signal or not.
func stoppedByRequest(ctx context.Context, err error) bool {
	return ctx.Err() != nil && errors.Is(err, context.Canceled)
}

// cluster is one run: what it started, to stop it in order.
type cluster struct {
	opts  options
	out   io.Writer
	log   *slog.Logger
	start time.Time

	cp           *controlplane.Cluster
	stopCP       context.CancelFunc
	stopRegistry func()
	rig          *vcluster.Rig
	stopRoutes   func() // ends the route controller and waits for it
	nodes        []*node
	pidFile      string
}

type node struct {
	*vcluster.Node
	vm        *qemu.VM
	console   *os.File
	consoleAt string
}

func (c *cluster) say(format string, args ...any) {
	fmt.Fprintf(c.out, "[%6.1fs] %s\n", time.Since(c.start).Seconds(), fmt.Sprintf(format, args...))
}

func (c *cluster) run(ctx context.Context) error {
	o := c.opts
	c.start = time.Now()
	if o.n < 1 || o.n > vcluster.MaxNodes {
		return fmt.Errorf("-n %d: want 1 to %d nodes", o.n, vcluster.MaxNodes)
	}
	if o.cni != "flannel" && o.cni != "install-cni" {
		return fmt.Errorf("-cni %q: want flannel or install-cni", o.cni)
	}
	extra := map[string]string{}
	for name, file := range o.nodeConfig {
		if !validNode(name, o.n) {
			return fmt.Errorf("-node-config %s=%s: no node %s in a cluster of %d (node-a to %s)", name, file, name, o.n, vcluster.NodeAt(o.n-1).Name)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("-node-config %s: %w", name, err)
		}
		extra[name] = string(b)
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", o.out, err)
	}
	c.pidFile = filepath.Join(o.out, "cluster.pid")
	if b, err := os.ReadFile(c.pidFile); err == nil {
		if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pid > 0 && syscall.Kill(pid, 0) == nil {
			c.pidFile = ""
			return fmt.Errorf("a cluster already runs from %s (pid %d): make cluster-down first", o.out, pid)
		}
	}
	if err := fsutil.WriteFileAtomic(c.pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", c.pidFile, err)
	}
	mem0, cpu0 := readMem(), readCPU()

	// 1. Registry and control plane, advertised where the nodes reach the
	// host's services.
	dirs, err := controlplane.BinDirsUnder(o.components)
	if err != nil {
		return fmt.Errorf("finding the control plane binaries (make kube etcd): %w", err)
	}
	images, err := clusterimages.Find(o.components)
	if err == nil {
		need := []string{"kube-proxy.tar", "coredns.tar"}
		if o.cni == "flannel" {
			need = append(need, "flannel.tar", "flannel-cni-plugin.tar")
		}
		err = images.Require(need...)
	}
	if err != nil {
		return fmt.Errorf("finding the cluster's images (make cluster-images): %w", err)
	}
	if o.e2eImages != "" {
		if images, err = images.WithUpstream(o.e2eImages); err != nil {
			return fmt.Errorf("-e2e-images: %w", err)
		}
	}
	_, mirror, stopRegistry, err := images.Serve(c.log)
	if err != nil {
		return err
	}
	c.stopRegistry = stopRegistry
	cpDir := filepath.Join(o.out, "controlplane")
	if err := os.RemoveAll(cpDir); err != nil {
		return fmt.Errorf("removing the previous control plane's state %s: %w", cpDir, err)
	}
	// Start stops the control plane when its context ends: ctx may end
	// its start (Ctrl-C), but once it is up only down stops it, after the
	// nodes are off, so that kubelet can reach it while they shut down.
	cpCtx, cpCancel := context.WithCancel(context.WithoutCancel(ctx))
	c.stopCP = cpCancel
	detach := context.AfterFunc(ctx, cpCancel)
	c.cp, err = controlplane.Start(cpCtx, c.log, controlplane.Options{BinDirs: dirs, StateDir: cpDir, KeepState: true,
		AdvertiseAddress: vcluster.ServiceAddr.String(), KubeletAddressType: "InternalIP"})
	detach()
	if err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}
	info := c.cp.Info()
	c.say("control plane up: %s (the nodes dial %s); logs in %s", info.HostEndpoint, info.APIServerEndpoint, info.LogDir)
	a := c.cp.Addons(images.InstallCNI, images.KubeProxy, images.CoreDNS)
	if o.cni == "flannel" {
		a.InstallCNIImage, a.FlannelImage, a.FlannelCNIPluginImage = "", images.Flannel, images.FlannelCNIPlugin
	}
	if err := c.cp.ApplyAddons(ctx, a); err != nil {
		return err
	}
	c.say("add-ons applied: %s, kube-proxy, CoreDNS", o.cni)

	// 2. The network and the nodes.
	reg, err := url.Parse(mirror)
	if err != nil {
		return fmt.Errorf("the registry stand-in's URL %q: %w", mirror, err)
	}
	registry, err := netip.ParseAddrPort("127.0.0.1:" + reg.Port())
	if err != nil {
		return fmt.Errorf("the registry stand-in's port in %q: %w", mirror, err)
	}
	apiServer := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(c.cp.Ports().APIServer))
	join := info.JoinNodeConfigMirrored("berth-cluster", clusterimages.MirrorAnnotation(reg.Scheme+"://"+vcluster.Virtual(registry).String()))
	specs := make([]vcluster.NodeSpec, o.n)
	for i := range specs {
		specs[i].UserData = userData(join, extra[vcluster.NodeAt(i).Name])
		switch o.seed {
		case "imds":
		case "nocloud":
			specs[i].Source, specs[i].SeedFS = vcluster.SourceSeed, seedimage.VFAT
		case "nocloud-iso":
			specs[i].Source, specs[i].SeedFS = vcluster.SourceSeed, seedimage.ISO9660
		default:
			return fmt.Errorf("-seed %q: want imds, nocloud or nocloud-iso", o.seed)
		}
	}
	sockDir, err := os.MkdirTemp("", "berth-cluster-")
	if err != nil {
		return fmt.Errorf("a directory for the network's socket: %w", err)
	}
	defer os.RemoveAll(sockDir)
	if c.rig, err = vcluster.New(vcluster.Config{Nodes: specs, APIServer: apiServer, Registry: registry, Socket: vcluster.SocketIn(sockDir), Log: c.log}); err != nil {
		return err
	}
	if err := c.routePods(ctx); err != nil {
		return err
	}
	for i, vn := range c.rig.Nodes {
		nd := &node{Node: vn}
		c.nodes = append(c.nodes, nd)
		if err := c.boot(ctx, i, nd, specs[i].UserData); err != nil {
			return err
		}
		if err := c.cp.RouteKubeletVia(vn.IP.String(), net.JoinHostPort(vn.IP.String(), strconv.Itoa(controlplane.KubeletPort)), c.rig.Net.DialContext); err != nil {
			return err
		}
		c.say("%s booting: %s, %s, %s; console %s", vn.Name, vn.IP, vn.InstanceID, vn.Hostname, nd.consoleAt)
	}

	// 3. Every node Ready.
	if err := c.waitReady(ctx); err != nil {
		return err
	}
	readyAt := time.Since(c.start)
	c.say("all %d nodes Ready %.1f s after start", o.n, readyAt.Seconds())
	if err := c.waitAddons(ctx); err != nil {
		return err
	}
	addonsAt := time.Since(c.start)
	mem1, cpu1 := readMem(), readCPU()
	kubeconfig := filepath.Join(o.out, "kubeconfig")
	b, err := os.ReadFile(info.Kubeconfig)
	if err == nil {
		err = fsutil.WriteFileAtomic(kubeconfig, b, 0o600)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", kubeconfig, err)
	}
	f := figures{Nodes: o.n, CNI: o.cni, ReadySeconds: readyAt.Seconds(), AddonsSeconds: addonsAt.Seconds(),
		HostMemUsedMiB: (mem1 - mem0) >> 20, QEMURSSMiB: c.qemuRSS() >> 20, BootBusyCores: cpu1.busySince(cpu0),
		QEMUBootCores: c.qemuCPU() / addonsAt.Seconds()}
	c.say("host: %d MiB more memory in use than before the start (QEMU resident: %d MiB); %.2f of %d cores busy on average until now, %.2f of them QEMU's",
		f.HostMemUsedMiB, f.QEMURSSMiB, f.BootBusyCores, cpu1.cores, f.QEMUBootCores)
	kc, err := kubectl.Find(dirs, kubeconfig)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.out, "\nThe cluster is up. Use it with:\n  %s --kubeconfig %s get nodes -o wide\n", kc.Path, kubeconfig)
	fmt.Fprintf(c.out, "Nodes' consoles and disks: %s/<node>/; control plane logs: %s\n", o.out, info.LogDir)
	if o.ready {
		// An idle minute: what N Ready nodes cost the host at rest.
		idle0, q0, t0 := readCPU(), c.qemuCPU(), time.Now()
		select {
		case <-time.After(time.Minute):
		case <-ctx.Done():
		}
		f.IdleBusyCores = readCPU().busySince(idle0)
		f.QEMUIdleCores = (c.qemuCPU() - q0) / time.Since(t0).Seconds()
		c.say("idle minute after Ready: %.2f cores busy, %.2f of them QEMU's", f.IdleBusyCores, f.QEMUIdleCores)
		return writeFigures(filepath.Join(o.out, "figures.json"), f)
	}
	fmt.Fprintln(c.out, "Ctrl-C or `make cluster-down` powers the nodes off and stops it.")
	if err := writeFigures(filepath.Join(o.out, "figures.json"), f); err != nil {
		return err
	}
	<-ctx.Done()
	c.say("stopping: %v", context.Cause(ctx))
	return nil
}

// routePods lets the control plane reach pods by their pod IPs, as the
// control plane of a cluster in a VPC does (pods and services proxy,
// webhooks and aggregated APIs dialled by endpoint): the apiserver's
// egress proxy dials the cluster CIDR, and the subnet for host-network
// pods, through the network's gateway, and a route controller puts each
// node's pod CIDR into the gateway's route table via that node's IP once
// the controller-manager has given it one. The node forwards to its pods
// (berth sets net.ipv4.ip_forward=1 and the FORWARD policy ACCEPT), and a
// pod's answer goes back through the node's default route.
func (c *cluster) routePods(ctx context.Context) error {
	info := c.cp.Info()
	podNet, err := netip.ParsePrefix(info.ClusterCIDR)
	if err != nil {
		return fmt.Errorf("the cluster CIDR %q: %w", info.ClusterCIDR, err)
	}
	for _, p := range []netip.Prefix{podNet, c.rig.Net.Subnet()} {
		if err := c.cp.RoutePodsVia(p, c.rig.Net.DialContext); err != nil {
			return fmt.Errorf("routing the apiserver's connections to %s: %w", p, err)
		}
	}
	// Not ctx: the routes are wanted until down, which stops the
	// controller before the network.
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	safe.Go(c.log, "route controller", func() {
		defer close(done)
		c.cp.RouteNodePods(rctx, gatewayRoutes{c})
	}, nil)
	c.stopRoutes = func() {
		cancel()
		<-done
	}
	return nil
}

// validNode says whether name is one of the first n nodes' names.
func validNode(name string, n int) bool {
	for i := range n {
		if vcluster.NodeAt(i).Name == name {
			return true
		}
	}
	return false
}

// boot starts node i's QEMU with a fresh instance-store disk and its
// console copied to OUT/<node>/console.log.
func (c *cluster) boot(ctx context.Context, i int, nd *node, ud []byte) error {
	dir := filepath.Join(c.opts.out, nd.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%s: %w", nd.Name, err)
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(dir, "user-data"), ud, 0o600); err != nil {
		return fmt.Errorf("%s: writing its user data: %w", nd.Name, err)
	}
	disk := filepath.Join(dir, "instance-store.img")
	if err := os.Remove(disk); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s: %w", nd.Name, err)
	}
	f, err := os.OpenFile(disk, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err == nil {
		err = errors.Join(f.Truncate(instanceStoreSize), f.Close())
	}
	if err != nil {
		return fmt.Errorf("%s: its instance-store disk: %w", nd.Name, err)
	}
	cfg, err := c.rig.QEMUConfig(c.opts.image, i, vcluster.Boot{
		Disks: []qemu.Disk{{Path: disk, Interface: "nvme", Serial: "berth-is-" + nd.Name}},
		// QEMU is killed at this deadline: a cluster runs until it is
		// told to stop.
		Timeout: 24 * time.Hour,
	})
	if err != nil {
		return err
	}
	nd.consoleAt = filepath.Join(dir, "console.log")
	if nd.console, err = os.Create(nd.consoleAt); err != nil {
		return fmt.Errorf("%s: %w", nd.Name, err)
	}
	// Not ctx: Boot kills QEMU when its context ends, and ctx ends at the
	// SIGTERM of make cluster-down, before down presses the power button.
	if nd.vm, err = qemu.Boot(context.WithoutCancel(ctx), cfg, qemu.BootOptions{ConsoleLog: nd.console}); err != nil {
		return fmt.Errorf("booting %s: %w", nd.Name, err)
	}
	return nil
}

// waitReady polls the API server until every node is Ready, saying when
// each registers and goes Ready.
func (c *cluster) waitReady(ctx context.Context) error {
	registered, ready := map[string]bool{}, map[string]bool{}
	deadline := time.Now().Add(bootTimeout + readyTimeout)
	for {
		for _, nd := range c.nodes {
			if nd.vm.Exited() {
				return fmt.Errorf("%s: QEMU exited", nd.Name)
			}
			st, err := c.nodeReady(ctx, nd.Hostname)
			switch {
			case err != nil:
				continue
			case !registered[nd.Name]:
				registered[nd.Name] = true
				c.say("%s registered as %s", nd.Name, nd.Hostname)
			}
			if st == "True" && !ready[nd.Name] {
				ready[nd.Name] = true
				c.say("%s Ready", nd.Name)
			}
		}
		if len(ready) == len(c.nodes) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d nodes Ready within %s", len(ready), len(c.nodes), bootTimeout+readyTimeout)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(pollInterval):
		}
	}
}

// getJSON GETs path from the API server into out.
func (c *cluster) getJSON(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.cp.Info().HostEndpoint+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.cp.Client().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return nil
}

// nodeReady is the Node's Ready condition's status; an error when it is
// not registered.
func (c *cluster) nodeReady(ctx context.Context, name string) (string, error) {
	var n struct {
		Status struct {
			Conditions []struct{ Type, Status string } `json:"conditions"`
		} `json:"status"`
	}
	if err := c.getJSON(ctx, "/api/v1/nodes/"+name, &n); err != nil {
		return "", err
	}
	for _, cd := range n.Status.Conditions {
		if cd.Type == "Ready" {
			return cd.Status, nil
		}
	}
	return "", nil
}

// workload is an add-on a usable cluster needs running: a DaemonSet
// ready on every node, or a Deployment with every replica ready.
type workload struct{ kind, ns, name string }

// waitAddons waits until every add-on workload is ready.
func (c *cluster) waitAddons(ctx context.Context) error {
	ws := []workload{{"daemonsets", "kube-system", "kube-proxy"}, {"deployments", "kube-system", "coredns"}}
	if c.opts.cni == "flannel" {
		ws = append(ws, workload{"daemonsets", "kube-flannel", "kube-flannel-ds"})
	} else {
		ws = append(ws, workload{"daemonsets", "kube-system", "install-cni"})
	}
	deadline := time.Now().Add(readyTimeout)
	for _, w := range ws {
		for {
			var o struct {
				Status struct {
					NumberReady, DesiredNumberScheduled, ReadyReplicas, Replicas int
				} `json:"status"`
			}
			err := c.getJSON(ctx, "/apis/apps/v1/namespaces/"+w.ns+"/"+w.kind+"/"+w.name, &o)
			s := o.Status
			if err == nil && (s.NumberReady+s.ReadyReplicas) > 0 && s.NumberReady == s.DesiredNumberScheduled && s.ReadyReplicas == s.Replicas {
				c.say("%s/%s ready (%d)", w.ns, w.name, s.NumberReady+s.ReadyReplicas)
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s/%s not ready within %s: %+v %v", w.ns, w.name, readyTimeout, s, err)
			}
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-time.After(pollInterval):
			}
		}
	}
	return nil
}

// down powers every node off through its ACPI power button, at once, and
// waits for each; then stops the network, the registry and the control
// plane. A node that does not power off in time is killed.
func (c *cluster) down() error {
	var errs []error
	for _, nd := range c.nodes {
		if nd.vm != nil && !nd.vm.Exited() {
			if err := nd.vm.PowerDown(); err != nil {
				errs = append(errs, fmt.Errorf("%s: power button: %w", nd.Name, err))
			}
		}
	}
	for _, nd := range c.nodes {
		if nd.vm == nil {
			continue
		}
		if err := nd.vm.WaitExit(powerOffBound); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", nd.Name, err))
		} else {
			c.say("%s powered off", nd.Name)
		}
		errs = append(errs, nd.vm.Close())
		if nd.console != nil {
			errs = append(errs, nd.console.Close())
		}
	}
	if c.stopRoutes != nil {
		c.stopRoutes()
	}
	if c.rig != nil {
		errs = append(errs, c.rig.Close())
	}
	if c.stopRegistry != nil {
		c.stopRegistry()
	}
	if c.stopCP != nil {
		defer c.stopCP()
	}
	if c.cp != nil {
		if err := c.cp.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping the control plane: %w", err))
		}
	}
	if c.pidFile != "" {
		if err := os.Remove(c.pidFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// userData is MIME multi-part user data with the join NodeConfig and,
// when not empty, the operator's own NodeConfig part after it.
func userData(join, extra string) []byte {
	var b strings.Builder
	b.WriteString("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n")
	for _, part := range []string{join, extra} {
		if part != "" {
			b.WriteString("--BOUNDARY\nContent-Type: application/node.eks.aws\n\n" + strings.TrimRight(part, "\n") + "\n\n")
		}
	}
	b.WriteString("--BOUNDARY--\n")
	return []byte(b.String())
}

// gatewayRoutes is the network's gateway as the route controller's
// route table, each change said on the console.
type gatewayRoutes struct{ c *cluster }

func (g gatewayRoutes) AddRoute(r controlplane.NodeRoute) error {
	if err := g.c.rig.Net.AddRoute(r.PodCIDR, r.Via); err != nil {
		return err
	}
	g.c.say("%s: pod route %s via %s in the network's gateway", r.Node, r.PodCIDR, r.Via)
	return nil
}

func (g gatewayRoutes) RemoveRoute(r controlplane.NodeRoute) error {
	if err := g.c.rig.Net.RemoveRoute(r.PodCIDR, r.Via); err != nil {
		return err
	}
	g.c.say("%s: gone; pod route %s via %s removed from the network's gateway", r.Node, r.PodCIDR, r.Via)
	return nil
}
