package qemutests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/qemu-tests/clusterimages"
	"github.com/berth-node/berth/qemu-tests/controlplane"
	"github.com/berth-node/berth/qemu-tests/imdsserver"
	"github.com/berth-node/berth/qemu-tests/qemu"
	"github.com/berth-node/berth/runtime/supervise"
)

// Budgets for the join under TCG: kubelet registers a few seconds after it
// starts on an idle host; CI's 2 shared cores are far slower.
const (
	joinTimeout = 5 * time.Minute
	podTimeout  = 5 * time.Minute
	// powerOffBound is how long the whole orderly shutdown may take: kubelet,
	// the pods' grace period, containerd, sync, unmount. berth holds the
	// power-off for kubelet's inhibitor up to nodeadm's shutdownGracePeriod
	// (2m30s) plus 10 s, as configured; unloaded it takes under 40 s, but
	// under make test-qemu-busy's hog kubelet still held it 2 min in (its
	// pods' tasks timing out in containerd), so the bound is what the node
	// is configured to allow, with a minute for containerd and the disks.
	powerOffBound = 4 * time.Minute
)

// componentsDir finds the components `make node-components` built.
func componentsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("BERTH_COMPONENTS_DIR")
	if dir == "" {
		dir = filepath.Join("..", "build", "components")
	}
	if _, err := os.Stat(filepath.Join(dir, "node", "kubelet")); err != nil {
		t.Fatalf("no built components under %s (%v): run make node-components, or set BERTH_COMPONENTS_DIR", dir, err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// testCluster is a control plane with the cluster's images behind the
// registry stand-in, as a guest pulls them (registry.berth.test through
// the node's berth.dev/registry-mirrors annotation).
type testCluster struct {
	*controlplane.Cluster
	images clusterimages.Set
	// mirror is the registry stand-in's URL as a guest dials it.
	mirror string
}

// clusterOptions: cp are the control plane's options (a token webhook);
// noCNI leaves the CNI DaemonSet out, for a test that watches the node go
// Ready because of it.
type clusterOptions struct {
	cp    controlplane.Options
	noCNI bool
}

// startControlPlane runs etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler on the host's loopback (the guest sees the apiserver at
// 10.0.2.2), the registry stand-in with the cluster's images, and the CNI
// DaemonSet (install-cni, as aws-node on EKS): without a CNI no node goes
// Ready. kube-proxy, CoreDNS and flannel are TestCluster's (applyAddons).
func startControlPlane(t *testing.T) *testCluster {
	t.Helper()
	return startClusterWith(t, clusterOptions{})
}

// startControlPlaneWith is startControlPlane with control plane options.
func startControlPlaneWith(t *testing.T, opts controlplane.Options) *testCluster {
	t.Helper()
	return startClusterWith(t, clusterOptions{cp: opts})
}

func startClusterWith(t *testing.T, o clusterOptions) *testCluster {
	t.Helper()
	comp := componentsDir(t)
	dirs, err := controlplane.BinDirsUnder(comp)
	if err != nil {
		t.Fatal(err)
	}
	opts := o.cp
	opts.BinDirs = dirs
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	images, err := clusterimages.Find(comp)
	if err != nil {
		t.Fatal(err)
	}
	_, mirror, stopRegistry, err := images.Serve(log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopRegistry)
	cp, err := controlplane.Start(context.Background(), log, opts)
	if err != nil {
		t.Fatalf("starting the control plane: %v", err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	c := &testCluster{Cluster: cp, images: images, mirror: mirror}
	if !o.noCNI {
		c.applyAddons(t, addonChoice{})
	}
	return c
}

// addonChoice picks the add-ons applyAddons applies: the CNI is
// install-cni, or flannel when flannel is set; kube-proxy and CoreDNS
// only when asked.
type addonChoice struct {
	flannel, kubeProxy, coreDNS bool
}

// applyAddons applies the chosen add-ons with the cluster's images.
func (c *testCluster) applyAddons(t *testing.T, o addonChoice) {
	t.Helper()
	a := c.Addons(c.images.InstallCNI, "", "")
	var need []string
	if o.flannel {
		need = append(need, "flannel.tar", "flannel-cni-plugin.tar")
	}
	if o.kubeProxy {
		need = append(need, "kube-proxy.tar")
	}
	if o.coreDNS {
		need = append(need, "coredns.tar")
	}
	if err := c.images.Require(need...); err != nil {
		t.Fatal(err)
	}
	if o.flannel {
		a.InstallCNIImage, a.FlannelImage, a.FlannelCNIPluginImage = "", c.images.Flannel, c.images.FlannelCNIPlugin
	}
	if o.kubeProxy {
		a.KubeProxyImage = c.images.KubeProxy
	}
	if o.coreDNS {
		a.CoreDNSImage = c.images.CoreDNS
	}
	if err := c.ApplyAddons(context.Background(), a); err != nil {
		t.Fatal(err)
	}
}

// nodeConfig is the user data of a node joining this cluster.
func (c *testCluster) nodeConfig() string { return joinNodeConfig(c.Info(), c.mirror) }

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// api is a tiny client for the test cluster's admin endpoint.
type api struct {
	c    *http.Client
	base string
}

func (a api) do(method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, a.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// waitNodeReady waits for the node's Ready condition to be True.
func waitNodeReady(t *testing.T, vm *qemu.VM, a api, node string) {
	t.Helper()
	waitFor(t, vm, "node Ready", joinTimeout, func() (bool, string) {
		var n struct {
			Status struct{ Conditions []condition } `json:"status"`
		}
		if err := a.do("GET", "/api/v1/nodes/"+node, nil, &n); err != nil {
			return false, err.Error()
		}
		for _, c := range n.Status.Conditions {
			if c.Type == "Ready" {
				return c.Status == "True", fmt.Sprintf("%+v", n.Status.Conditions)
			}
		}
		return false, "no Ready condition"
	})
}

// waitPodRunning waits for pod default/name to reach phase Running.
func waitPodRunning(t *testing.T, vm *qemu.VM, a api, name string) {
	t.Helper()
	waitFor(t, vm, "pod "+name+" Running", podTimeout, func() (bool, string) {
		var p struct {
			Status struct {
				Phase             string `json:"phase"`
				ContainerStatuses []any  `json:"containerStatuses"`
			} `json:"status"`
		}
		if err := a.do("GET", "/api/v1/namespaces/default/pods/"+name, nil, &p); err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == "Running", fmt.Sprintf("%s %v", p.Status.Phase, p.Status.ContainerStatuses)
	})
}

// deletePods deletes pods default/names and waits until the API no
// longer has them. A grace period of 1 s, not 0: with 0 the API forgets a
// pod at once and kubelet stops it after, maybe during a power-off that
// follows.
func deletePods(t *testing.T, vm *qemu.VM, a api, names ...string) {
	t.Helper()
	for _, name := range names {
		if err := a.do("DELETE", "/api/v1/namespaces/default/pods/"+name+"?gracePeriodSeconds=1", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range names {
		waitFor(t, vm, "the "+name+" pod deleted", 2*time.Minute, func() (bool, string) {
			err := a.do("GET", "/api/v1/namespaces/default/pods/"+name, nil, nil)
			return err != nil && strings.Contains(err.Error(), "404"), fmt.Sprint(err)
		})
	}
}

type condition struct {
	Type   string `json:"type"`
	Status string `json:"status"`
}

// waitFor polls check until it is done or the deadline passes, and says
// what it last saw.
func waitFor(t *testing.T, vm *qemu.VM, what string, timeout time.Duration, check func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	last := ""
	for time.Since(start) < timeout {
		ok, seen := check()
		if ok {
			return time.Since(start)
		}
		last = seen
		time.Sleep(time.Second)
	}
	t.Fatalf("%s not reached within %s; last seen: %s\nconsole tail:\n%s", what, timeout, last, vm.ConsoleTail(60))
	return 0
}

// joinNodeConfig is a NodeConfig joining the cluster of info by bootstrap
// token; with a mirror, the node pulls registry.berth.test's images from
// the registry stand-in there.
func joinNodeConfig(info controlplane.Info, mirror string) string {
	if mirror == "" {
		return info.JoinNodeConfig("berth-qemu")
	}
	return info.JoinNodeConfigMirrored("berth-qemu", clusterimages.MirrorAnnotation(mirror))
}

// A node boots from nothing but its user data and its instance role, joins
// a real control plane (etcd, kube-apiserver, controller-manager,
// scheduler) the EKS way (eksNode: user data of the EKS CloudFormation
// template's AL2 node group, the cluster read from a DescribeCluster
// stand-in, `berth eks-token`, an authenticator and STS stand-in; the
// other joined tests use NodeConfig user data, a bootstrap token and TLS
// bootstrap), goes Ready, runs a pod from an image imported from the node
// image (and, in the ECRPull subtest, one pulled from an ECR-style registry
// with `berth ecr-credential-provider`'s credentials), and then powers off
// in order: kubelet, pods, containerd. (The EKS join was a test of its own,
// TestJoinEKSAuth, with a node and a control plane of its own.)
//
// Between the pod and the power-off, the subtests check on the same node
// what needs a joined node and nothing else of its own (each was once a
// test with a node and a control plane of its own, a minute of TCG
// apiece): netfilter on demand, the host's limits, services killed and
// restarted (after those two, as the kills change the PIDs they read), and
// the ECR pull (see there). The last, GracefulShutdown, is the power-off
// itself with kubelet's graceful node shutdown watched (gracefulNodeShutdown:
// a preStop hook, pods marked in priority order, the node NotReady, with
// the user data's shorter grace periods); TestJoin presses the power button
// itself when that subtest does not run. The arm64 suite runs TestJoin
// without them (its -run pattern selects no subtest of TestJoin): they test
// berth's logic, the same on both arches.
func TestJoin(t *testing.T) {
	dir := qemu.ImageDir(t)
	eks := startEKSNode(t)
	cluster := eks.cluster
	info := cluster.Info()

	cfg := qemu.ImageConfig(dir, "berth.imds="+eks.imdsURL)
	cfg.MemoryMB = 2048
	cfg.Timeout = 20 * time.Minute
	cfg.NICs = []qemu.NIC{{HostFwd: []string{qemu.FwdKubelet}}}
	cfg.Shell = true
	vm := qemu.Start(t, cfg)
	qemuStart := time.Now()

	rep, err := vm.Report(bootTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if !reportOK(rep) {
		t.Fatalf("boot failed: %v", rep["error"])
	}
	var svc report.Services
	section(t, rep, "services", &svc)
	if len(svc.Services) != 2 || svc.Services[0].Name != "containerd" || svc.Services[1].Name != "kubelet" {
		t.Fatalf("services in the report: %+v", svc.Services)
	}
	for _, s := range svc.Services {
		if s.State != "ready" || s.PID == 0 {
			t.Errorf("service %s: %+v", s.Name, s)
		}
	}
	if len(svc.Images) == 0 || !svc.Images[0].Imported {
		t.Errorf("images not imported: %+v", svc.Images)
	}
	// The imports wait for kubelet's health, so that containerd's
	// unpack mounts are not in the mount table kubelet's cAdvisor reads at
	// its start (docs/design.md): the first starts after kubelet's first
	// exec plus its time to first ready (a few ms of rounding allowed).
	if k := svc.Services[1]; len(svc.Images) > 0 {
		healthyAt := svc.KernelToKubeletMs + k.ReadyMs
		if first := svc.Images[0]; first.StartMs < healthyAt-20 {
			t.Errorf("image %s imported from %d ms, before kubelet was healthy at %d ms (exec %d + ready %d)",
				first.Name, first.StartMs, healthyAt, svc.KernelToKubeletMs, k.ReadyMs)
		}
		figure(t, "kubelet healthy %d ms, first import from %d ms (guest clock)", healthyAt, svc.Images[0].StartMs)
	}
	figure(t, "kernel start to kubelet exec: %d ms (guest clock)", svc.KernelToKubeletMs)
	eks.checkDescribed(t, rep)
	eks.checkFiles(t, vm)

	a := api{c: cluster.Client(), base: info.HostEndpoint}
	node := "ip-10-0-2-15.us-west-2.compute.internal"
	var registeredAfter time.Duration
	waitFor(t, vm, "node registered", joinTimeout, func() (bool, string) {
		err := a.do("GET", "/api/v1/nodes/"+node, nil, nil)
		if err == nil && registeredAfter == 0 {
			registeredAfter = time.Since(qemuStart)
		}
		return err == nil, fmt.Sprint(err)
	})
	waitNodeReady(t, vm, a, node)
	readyAfter := time.Since(qemuStart)
	eks.checkAuthenticated(t)
	if _, err := vm.Expect(regexp.MustCompile(`join: node registered with the API server`), time.Minute); err != nil {
		t.Errorf("berth did not see the registration in kubelet's log: %v", err)
	}

	if err := a.do("POST", "/api/v1/namespaces/default/pods", demoPod("default", "demo", node), nil); err != nil {
		t.Fatal(err)
	}
	waitPodRunning(t, vm, a, "demo")
	runningAfter := time.Since(qemuStart)
	figure(t, "QEMU start to node registered %.1f s, Ready %.1f s, pod Running %.1f s (wall)",
		registeredAfter.Seconds(), readyAfter.Seconds(), runningAfter.Seconds())

	t.Run("NetfilterOnDemand", func(t *testing.T) { netfilterOnDemand(t, cluster, vm, rep) })
	t.Run("HostLimits", func(t *testing.T) { hostLimits(t, cluster, vm, rep) })
	t.Run("ServiceRestarts", func(t *testing.T) { serviceRestarts(t, vm, rep) })
	// The ECR pull is the demo image's own bytes, and kubelet 1.35
	// (KubeletEnsureSecretPulledImages, beta and on) records that image
	// ID as pulled under the ECR name; the subtest then runs a pod naming
	// the imported localhost/berth-demo:v1 with pull policy Never, which
	// kubelet refuses ("not present") unless berth's pull record of the
	// imported name is there. A subtest, so that arm64 skips it as it
	// skips the others (2.5 min of aarch64 TCG; the credential provider
	// is berth's Go, the same on both arches).
	t.Run("ECRPull", func(t *testing.T) { eks.checkECRPull(t, vm, a, node) })

	// The kubelet the kills left takes its shutdown inhibitor a few seconds
	// after it is ready, as the first one did; a power button pressed
	// before then finds no inhibitor (on AL2023 too), and the order checked
	// below is graceful shutdown's.
	waitFor(t, vm, "the running kubelet's shutdown inhibitor", 2*time.Minute, func() (bool, string) {
		ready, taken := -1, -1
		for i, l := range vm.Lines() {
			switch {
			case kubeletReadyLine.MatchString(l.Text):
				ready = i
			case inhibitorTakenLine.MatchString(l.Text):
				taken = i
			}
		}
		return taken > ready, fmt.Sprintf("last kubelet ready line %d, last inhibitor taken line %d", ready, taken)
	})

	// Orderly power-off: kubelet first, then the pods, then containerd.
	// GracefulShutdown presses the power button itself, with pods of its
	// own to watch go; where it does not run (the arm64 suite's -run
	// pattern selects no subtest) or failed before pressing it, TestJoin
	// presses it here. A filtered-out t.Run returns true, as a passed one
	// does: ran tells them apart.
	var off powerOff
	ran := false
	t.Run("GracefulShutdown", func(t *testing.T) {
		ran = true
		gracefulNodeShutdown(t, vm, a, node, &off)
	})
	if off.pressed.IsZero() {
		if ran {
			t.Log("GracefulShutdown failed before the power button: pressing it here")
		}
		if err := vm.PowerDown(); err != nil {
			t.Fatal(err)
		}
		off.pressed = time.Now()
	}
	if off.exited.IsZero() {
		if err := vm.WaitExit(powerOffBound); err != nil {
			t.Fatalf("guest did not power off within %s: %v", powerOffBound, err)
		}
		off.exited = time.Now()
	}
	figure(t, "system_powerdown to QEMU exit: %.1f s", off.exited.Sub(off.pressed).Seconds())
	expectShutdownInOrder(t, vm)
}

var (
	kubeletReadyLine   = regexp.MustCompile(`services: service ready service=kubelet `)
	inhibitorTakenLine = regexp.MustCompile(`logind: inhibitor taken who=kubelet `)
)

// bootJoined boots a node with the given user data, to join a running
// control plane, and returns it once the boot report is out and OK, with
// the IMDS stand-in, for tests that change its answers.
func bootJoined(t *testing.T, userData []byte) (*qemu.VM, map[string]any, *imdsserver.Server) {
	t.Helper()
	srv, imdsURL := startIMDS(t, userData)
	cfg := qemu.ImageConfig(qemu.ImageDir(t), "berth.imds="+imdsURL)
	cfg.MemoryMB = 2048
	cfg.Timeout = 15 * time.Minute
	cfg.NICs = []qemu.NIC{{HostFwd: []string{qemu.FwdKubelet}}}
	vm := qemu.Start(t, cfg)
	rep, err := vm.Report(bootTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if !reportOK(rep) {
		t.Fatalf("boot failed: %v", rep["error"])
	}
	return vm, rep, srv
}

// demoPod is a pod of the demo image on node, with a 10 s grace period.
func demoPod(ns, name, node string) map[string]any {
	return map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"nodeName":                      node,
			"terminationGracePeriodSeconds": 10,
			"containers": []any{map[string]any{
				"name": "demo", "image": "localhost/berth-demo:v1", "imagePullPolicy": "Never",
			}},
		},
	}
}

func servicePIDs(t *testing.T, rep map[string]any) map[string]supervise.Status {
	t.Helper()
	var svc report.Services
	section(t, rep, "services", &svc)
	out := map[string]supervise.Status{}
	for _, s := range svc.Services {
		out[s.Name] = s
	}
	return out
}

// serviceRestarts (TestJoin): kill -9 of containerd, then of
// kubelet, inside the guest: each is restarted, /run/berth/boot.json counts
// the restarts, and no zombie is left behind.
func serviceRestarts(t *testing.T, vm *qemu.VM, rep map[string]any) {
	before := servicePIDs(t, rep)
	// The process to kill is read at the kill (killService): a kubelet
	// that restarted by itself since the report is followed, not failed.
	killed := map[string]svcEvent{}
	killedPID := map[string]int{}
	for _, name := range []string{"containerd", "kubelet"} {
		ev, pid := killService(t, vm, name, 0)
		killed[name], killedPID[name] = ev, pid
		exitRe := regexp.MustCompile(berthPrefix + `services: service exited (?:level=WARN )?service=` + name + ` `)
		n := 0
		for _, l := range vm.Lines()[:ev.idx+1] {
			if exitRe.MatchString(l.Text) {
				n++
			}
		}
		if ev.restarts != n {
			t.Errorf("%s's exit line after the kill says restarts=%d; the console shows %d exits: %q", name, ev.restarts, n, ev.line.Text)
		}
		ready := regexp.MustCompile(`services: service ready service=` + name + ` pid=(\d+)`)
		waitFor(t, vm, name+" restarted and ready", 3*time.Minute, func() (bool, string) {
			for _, l := range vm.Lines()[ev.idx:] {
				if m := ready.FindStringSubmatch(l.Text); m != nil && m[1] != fmt.Sprint(pid) {
					return true, l.Text
				}
			}
			return false, "no ready line after the kill"
		})
	}
	out, err := vm.Shell("cat /run/berth/boot.json", shellTimeout)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(out, "{")
	if i < 0 {
		t.Fatalf("boot.json: %q", out)
	}
	var now map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(out[i:])), &now); err != nil {
		t.Fatalf("boot.json does not parse: %v\n%s", err, out)
	}
	after := servicePIDs(t, now)
	for _, name := range []string{"containerd", "kubelet"} {
		// The kill's exit line counts from the restarts before it; boot.json
		// counts at least that many (more if the service failed by itself
		// on its way back, which the log shows).
		if after[name].Restarts < killed[name].restarts || after[name].PID == killedPID[name] || after[name].State != "ready" {
			t.Errorf("%s in boot.json after kill -9 of pid %d (exit line %q): %+v (at the report %+v)", name, killedPID[name], killed[name].line.Text, after[name], before[name])
		}
		if after[name].Restarts != before[name].Restarts+1 {
			t.Logf("%s restarted %d times in all, the kill and %d by itself", name, after[name].Restarts-before[name].Restarts, after[name].Restarts-before[name].Restarts-1)
		}
	}
	// A zombie is one that stays: a process that has just exited is one
	// until its parent reaps it, and one that is gone by the read is no
	// zombie (grep -s: no complaint about it).
	var zombies string
	for try := 0; try < 3; try++ {
		if try > 0 {
			time.Sleep(2 * time.Second)
		}
		zombies, err = vm.Shell("grep -ls '^State:.*Z' /proc/[0-9]*/status; echo end", shellTimeout)
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(zombies) == "end" {
			break
		}
	}
	if strings.TrimSpace(zombies) != "end" {
		t.Errorf("zombies left in the guest:\n%s", zombies)
	}
}

// A node that cannot join says why on the console, from kubelet's own
// error, instead of looping silently: a CA that did not sign the API
// server's certificate, and an API server nobody listens on.
func TestJoinFailureSaysWhy(t *testing.T) {
	cluster := startControlPlane(t)
	info := cluster.Info()
	for _, tc := range []struct {
		name  string
		edit  func(controlplane.Info) controlplane.Info
		cause *regexp.Regexp
	}{
		{"wrong CA", func(i controlplane.Info) controlplane.Info {
			i.CertificateAuthority = testCA(t)
			return i
		}, regexp.MustCompile(`join: node not registered yet .*cause=.*x509: certificate signed by unknown authority`)},
		{"unreachable API server", func(i controlplane.Info) controlplane.Info {
			i.APIServerEndpoint = "https://10.0.2.2:1"
			return i
		}, regexp.MustCompile(`join: node not registered yet .*cause=.*connection refused`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, imdsURL := startIMDS(t, mimeUserData(joinNodeConfig(tc.edit(info), cluster.mirror)))
			cfg := qemu.ImageConfig(qemu.ImageDir(t), "berth.imds="+imdsURL)
			cfg.MemoryMB = 2048
			cfg.Timeout = 10 * time.Minute
			cfg.NICs = []qemu.NIC{{}}
			vm := qemu.Start(t, cfg)
			if _, err := vm.Expect(tc.cause, 3*time.Minute); err != nil {
				t.Fatalf("the console does not say why the node cannot join: %v", err)
			}
		})
	}
}

// gracefulShutdownSteps are the console lines of an orderly power-off, in
// order: kubelet's graceful node shutdown (berth's logind) stops the pods
// first; berth's pod stopper is the fallback after kubelet's stop.
func gracefulShutdownSteps() []*regexp.Regexp {
	return []*regexp.Regexp{
		regexp.MustCompile(`logind: PrepareForShutdown sent clients=1 inhibitors=kubelet`),
		regexp.MustCompile(`logind: shutdown inhibitors released`),
		regexp.MustCompile(`shutdown: service stopped service=kubelet`),
		regexp.MustCompile(`shutdown: (no pod processes to stop|stopping pods processes=)`),
		regexp.MustCompile(`shutdown: service stopped service=pods`),
		regexp.MustCompile(`shutdown: service stopped service=containerd`),
		regexp.MustCompile(`reboot: Power down`),
	}
}

// expectShutdownInOrder fails unless the console shows first, then the
// graceful shutdown's steps, each after the one before.
func expectShutdownInOrder(t *testing.T, vm *qemu.VM, first ...*regexp.Regexp) {
	t.Helper()
	lines := vm.Lines()
	at := 0
	for _, re := range append(first, gracefulShutdownSteps()...) {
		for at < len(lines) && !re.MatchString(lines[at].Text) {
			at++
		}
		if at == len(lines) {
			t.Fatalf("shutdown step %q not found in order; console tail:\n%s", re, vm.ConsoleTail(40))
		}
	}
	// Nothing left for SIGKILL: the debug shell (these boots have one)
	// ends on the hangup after SIGTERM, and is not started again.
	down := false
	for _, l := range lines {
		down = down || strings.Contains(l.Text, "shutdown: shutting down")
		if down && shutdownKilled.MatchString(l.Text) {
			t.Errorf("the shutdown had to SIGKILL what was left: %s", l.Text)
		}
	}
}

// shutdownKilled is the shutdown's line when processes outlived SIGTERM,
// and the debug shell's when it was started again during one.
var shutdownKilled = regexp.MustCompile(`shutdown: processes still running after grace period|debugshell: debug shell exited; starting another`)
