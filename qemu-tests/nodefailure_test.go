package qemutests

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-node/berth/mounts/localstorage"
	"github.com/berth-node/berth/qemu-tests/qemu"
	"github.com/berth-node/berth/qemu-tests/vcluster"
)

// nodeLostToleration is how long the test's Deployment tolerates an
// unreachable or not-ready node before its pod is evicted (the default is
// 300 s, which would make the test wait five minutes for nothing).
const nodeLostToleration = 5

// nodeBFailureConfig is what TestCluster's node-b adds to the rig's
// NodeConfig for nodeFailure: its instance-store NVMe disk mounted
// (nodeadm's Mount strategy: a filesystem of its own at /mnt/k8s-disks/0;
// containerd and kubelet stay on /var, so the node is no slower to boot
// than the other), and a shorter shutdown grace than nodeadm's 2m30s for
// its graceful stop: on a loaded host kubelet spent it all waiting for a
// projected volume's unmount (86 to 163 s from the power button).
const nodeBFailureConfig = "  instance:\n    localStorage:\n      strategy: Mount\n" +
	"  kubelet:\n    config:\n      shutdownGracePeriod: 30s\n      shutdownGracePeriodCriticalPods: 10s\n"

// nodeBStore is node-b's instance-store disk.
func nodeBStore(t *testing.T) qemu.Disk {
	t.Helper()
	return qemu.Disk{Path: sparseDisk(t, t.TempDir(), "node-b-is0", 1<<30), Interface: "nvme", Serial: "berth-is-node-b"}
}

// nodeFailure pulls the plug on one of TestCluster's two nodes, as an
// instance that fails its hardware does; it runs last there, on the
// nodes the cluster checks used (a cluster of its own cost a control
// plane and two boots to Ready, about 1.5 minutes of make test). node-b
// has an instance-store NVMe disk (nodeBStore) that its user data mounts
// (nodeBFailureConfig). A Deployment's pod runs on node-b (preferred
// there, tolerating an unreachable node nodeLostToleration seconds), a
// file is written to the instance store, and QEMU quits: no signal to the
// guest, its disks as they were. The node goes NotReady by the
// controller-manager's node-monitor grace period and the pod runs again
// on node-a. node-b then boots again from the same disks: berth finds its
// instance-store filesystem (not made again) with the file in it, the
// node rejoins and goes Ready, and the old pod, left Terminating on the
// dead node, is finished by node-b's kubelet.
//
// Last, node-b stops gracefully (the ACPI power button) with a pod whose
// preStop hook calls the test (hooks, a vnet service of the rig): the
// hook runs, then the node powers off, and node-a's pod runs on,
// untouched.
func nodeFailure(t *testing.T, tc *testCluster, a api, na, nb *rigNode, hooks *hookServer) {
	var st localstorage.Result
	section(t, nb.rep, "storage", &st)
	if st.Status != localstorage.StatusReady || len(st.Filesystems) != 1 || !st.Filesystems[0].Created || st.Filesystems[0].Mount != "/mnt/k8s-disks/0" {
		t.Fatalf("node-b's first boot: storage %+v: want one filesystem made and mounted at /mnt/k8s-disks/0", st)
	}

	createSurvivor(t, a, nb.nodeName)
	waitFor(t, nb.vm, "the survivor Deployment's pod Running on "+nb.nodeName, podTimeout, func() (bool, string) {
		return survivorOn(a, nb.nodeName)
	})
	if out, err := nb.vm.Shell("echo kept > /mnt/k8s-disks/0/berth-node-lost && sync && cat /mnt/k8s-disks/0/berth-node-lost", shellTimeout); err != nil || !strings.Contains(out, "kept") {
		t.Fatalf("writing to node-b's instance store: %v %q", err, out)
	}

	// quit is QEMU's own plug: the guest gets no signal. The reply may
	// not come before QEMU is gone.
	quit := time.Now()
	if _, err := nb.vm.QMP("quit", nil); err != nil {
		t.Logf("QMP quit: %v (QEMU may exit before it answers)", err)
	}
	if err := nb.vm.WaitExit(30 * time.Second); err != nil {
		t.Fatalf("node-b after QMP quit: %v", err)
	}
	waitFor(t, na.vm, nb.nodeName+" NotReady after its power was cut", 3*time.Minute, func() (bool, string) {
		o, err := getNode(a, nb.nodeName)
		if err != nil {
			return false, err.Error()
		}
		for _, cd := range o.Status.Conditions {
			if cd.Type == "Ready" {
				return cd.Status != "True", fmt.Sprintf("%+v", cd)
			}
		}
		return false, "no Ready condition"
	})
	figure(t, "node failure: power cut to node NotReady: %.1f s (the controller-manager's node-monitor grace period)", time.Since(quit).Seconds())
	// On failure, the pods' events say why the replacement did not run.
	moved := time.Now()
	for {
		ok, seen := survivorOn(a, na.nodeName)
		if ok {
			break
		}
		if time.Since(moved) > 4*time.Minute {
			desc, _ := kubectl(t, tc.Cluster, kubectlTimeout, "describe", "pods", "-l", "app=survivor")
			t.Fatalf("the survivor Deployment's pod not Running on %s within 4m0s; last seen: %s\n%s\nnode-a console:\n%s", na.nodeName, seen, desc, na.vm.ConsoleTail(40))
		}
		time.Sleep(time.Second)
	}
	figure(t, "node failure: power cut to the Deployment's pod Running on the other node: %.1f s (tolerationSeconds %d)", time.Since(quit).Seconds(), nodeLostToleration)

	// node-b again, from the same disks.
	again := time.Now()
	nb.vm = qemu.Start(t, nb.cfg)
	rep, err := nb.vm.Report(bootTimeout)
	if err != nil {
		t.Fatalf("node-b's second boot: %v\nconsole:\n%s", err, nb.vm.ConsoleTail(40))
	}
	st = localstorage.Result{}
	section(t, rep, "storage", &st)
	if st.Status != localstorage.StatusReady || len(st.Filesystems) != 1 || st.Filesystems[0].Created {
		t.Errorf("node-b's second boot: storage %+v: want its filesystem found, not made", st)
	}
	if out, err := nb.vm.Shell("cat /mnt/k8s-disks/0/berth-node-lost", shellTimeout); err != nil || !strings.Contains(out, "kept") {
		t.Errorf("node-b's instance store lost the file written before its power was cut: %q %v", out, err)
	}
	waitNodeReady(t, nb.vm, a, nb.nodeName)
	figure(t, "node failure: node-b booted again to Ready: %.1f s", time.Since(again).Seconds())
	// The graceful stop's pod starts while the old pod is finished.
	createStopper(t, a, nb.nodeName, hooks)
	waitFor(t, nb.vm, "the pod left on "+nb.nodeName+" finished by its kubelet", 3*time.Minute, func() (bool, string) {
		var l podList
		if err := a.do("GET", "/api/v1/namespaces/default/pods?labelSelector=app%3Dsurvivor", nil, &l); err != nil {
			return false, err.Error()
		}
		for _, p := range l.Items {
			if p.Spec.NodeName == nb.nodeName {
				return false, fmt.Sprintf("%+v", l.Items)
			}
		}
		return true, ""
	})
	gracefulStop(t, a, nb, na.nodeName, hooks)
}

// createStopper creates the pod on node whose preStop hook calls hooks.
func createStopper(t *testing.T, a api, node string, hooks *hookServer) {
	t.Helper()
	stopper := demoPod("default", "stopper", node)
	stopper["spec"].(map[string]any)["terminationGracePeriodSeconds"] = 30
	stopper["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["lifecycle"] = map[string]any{
		"preStop": map[string]any{"httpGet": map[string]any{
			"host": vcluster.ServiceAddr.String(), "port": hooks.addr.Port(), "path": "/prestop/stopper"}},
	}
	if err := a.do("POST", "/api/v1/namespaces/default/pods", stopper, nil); err != nil {
		t.Fatal(err)
	}
}

// gracefulStop presses b's power button once createStopper's pod runs
// there, and checks its preStop hook ran before b powered off and that
// the survivor pod on nodeA runs on, the same pod.
func gracefulStop(t *testing.T, a api, b *rigNode, nodeA string, hooks *hookServer) {
	t.Helper()
	waitPodRunning(t, b.vm, a, "stopper")
	before, _ := survivorOn(a, nodeA)
	if !before {
		t.Fatalf("the survivor pod is not Running on %s before %s stops", nodeA, b.nodeName)
	}
	survivor := survivorName(t, a)
	// Taken before the press: on a busy host the QMP reply can come after
	// the guest has already acted on the button.
	pressed := time.Now()
	if err := b.vm.PowerDown(); err != nil {
		t.Fatal(err)
	}
	if err := b.vm.WaitExit(powerOffBound); err != nil {
		t.Fatalf("%s after its power button: %v", b.name, err)
	}
	off := time.Since(pressed)
	calls := hooks.calls()
	if len(calls) != 1 || calls[0].path != "/prestop/stopper" {
		t.Fatalf("preStop hook calls %+v: want one to /prestop/stopper", calls)
	}
	if at := calls[0].at.Sub(pressed); at < 0 || at > off {
		t.Errorf("preStop hook at %s after the power button, the node off at %s: want it in between", at, off)
	} else {
		figure(t, "graceful stop: preStop hook ran %.1f s after the power button, node-b off at %.1f s", at.Seconds(), off.Seconds())
	}
	if ok, seen := survivorOn(a, nodeA); !ok || survivorName(t, a) != survivor {
		t.Errorf("node-b's graceful stop touched node-a's pod: want %s Running on %s; saw %s", survivor, nodeA, seen)
	}
}

// survivorName is the survivor Deployment's one pod's name.
func survivorName(t *testing.T, a api) string {
	t.Helper()
	var l podList
	if err := a.do("GET", "/api/v1/namespaces/default/pods?labelSelector=app%3Dsurvivor", nil, &l); err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 1 {
		t.Fatalf("survivor pods: %+v: want one", l.Items)
	}
	return l.Items[0].Metadata.Name
}

// hookServer answers the lifecycle hooks kubelet calls (httpGet) on the
// host's loopback, and records each call and when it came.
type hookServer struct {
	addr netip.AddrPort
	mu   sync.Mutex
	seen []hookCall
}

type hookCall struct {
	path string
	at   time.Time
}

func newHookServer(t *testing.T) *hookServer {
	t.Helper()
	h := &hookServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.seen = append(h.seen, hookCall{path: r.URL.Path, at: time.Now()})
		h.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	addr, err := netip.ParseAddrPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	h.addr = addr
	return h
}

func (h *hookServer) calls() []hookCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.seen)
}

// podList is the part of a pod list nodeFailure reads.
type podList struct {
	Items []struct {
		Metadata struct {
			Name              string  `json:"name"`
			DeletionTimestamp *string `json:"deletionTimestamp"`
		} `json:"metadata"`
		Spec struct {
			NodeName string `json:"nodeName"`
		} `json:"spec"`
		Status struct {
			Phase string `json:"phase"`
		} `json:"status"`
	} `json:"items"`
}

// createSurvivor creates the Deployment whose one pod prefers node and
// moves when node is lost: it tolerates an unreachable or not-ready node
// for nodeLostToleration seconds only.
func createSurvivor(t *testing.T, a api, node string) {
	t.Helper()
	tolerate := func(key string) map[string]any {
		return map[string]any{"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": nodeLostToleration}
	}
	dep := map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "survivor", "namespace": "default"},
		"spec": map[string]any{
			"replicas": 1,
			"selector": map[string]any{"matchLabels": map[string]any{"app": "survivor"}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": "survivor"}},
				"spec": map[string]any{
					"terminationGracePeriodSeconds": 1,
					"affinity": map[string]any{"nodeAffinity": map[string]any{"preferredDuringSchedulingIgnoredDuringExecution": []any{
						map[string]any{"weight": 100, "preference": map[string]any{"matchExpressions": []any{
							map[string]any{"key": "kubernetes.io/hostname", "operator": "In", "values": []any{node}}}}}}}},
					"tolerations": []any{tolerate("node.kubernetes.io/unreachable"), tolerate("node.kubernetes.io/not-ready")},
					"containers":  []any{map[string]any{"name": "demo", "image": "localhost/berth-demo:v1", "imagePullPolicy": "Never"}},
				},
			},
		},
	}
	if err := a.do("POST", "/apis/apps/v1/namespaces/default/deployments", dep, nil); err != nil {
		t.Fatal(err)
	}
}

// survivorOn says whether the survivor Deployment has a pod Running on
// node that is not being deleted, and what it saw.
func survivorOn(a api, node string) (bool, string) {
	var l podList
	if err := a.do("GET", "/api/v1/namespaces/default/pods?labelSelector=app%3Dsurvivor", nil, &l); err != nil {
		return false, err.Error()
	}
	for _, p := range l.Items {
		if p.Spec.NodeName == node && p.Status.Phase == "Running" && p.Metadata.DeletionTimestamp == nil {
			return true, ""
		}
	}
	return false, fmt.Sprintf("%+v", l.Items)
}
