package qemutests

import (
	"fmt"
	"testing"
	"time"

	"github.com/berth-node/berth/mounts/localstorage"
	"github.com/berth-node/berth/qemu-tests/qemu"
)

// nodeLostToleration is how long the test's Deployment tolerates an
// unreachable or not-ready node before its pod is evicted (the default is
// 300 s, which would make the test wait five minutes for nothing).
const nodeLostToleration = 5

// nodeBFailureConfig is what node-b of TestCluster and TestRollout adds
// to the rig's NodeConfig: its instance-store NVMe disk mounted (nodeadm's
// Mount strategy: a filesystem of its own at /mnt/k8s-disks/0; containerd
// and kubelet stay on /var, so the node is no slower to boot than the
// other).
const nodeBFailureConfig = "  instance:\n    localStorage:\n      strategy: Mount\n"

// nodeBStore is node-b's instance-store disk.
func nodeBStore(t *testing.T) qemu.Disk {
	t.Helper()
	return qemu.Disk{Path: sparseDisk(t, t.TempDir(), "node-b-is0", 1<<30), Interface: "nvme", Serial: "berth-is-node-b"}
}

// nodeFailure pulls the plug on one of the rig's two nodes (TestCluster's,
// TestRollout's), as an instance that fails its hardware does; it runs
// last there, on the nodes the other checks used (a cluster of its own
// cost a control plane and two boots to Ready). node-b has an
// instance-store NVMe disk (nodeBStore) that its user data mounts
// (nodeBFailureConfig). A
// Deployment's pod runs on node-b (preferred there, tolerating an
// unreachable node nodeLostToleration seconds), and QEMU quits: no signal
// to the guest. The node goes NotReady by the controller-manager's
// node-monitor grace period and the pod runs again on node-a.
//
// What a power cut leaves on the disks (the array found, not made again,
// a synced file kept) is TestStorageRAID0AndReboot's; the graceful stop
// with a preStop hook is TestJoin's (GracefulShutdown). Both once ran here,
// with node-b booted again to Ready, at about 5 minutes of make test.
func nodeFailure(t *testing.T, tc *testCluster, a api, na, nb *rigNode) {
	var st localstorage.Result
	section(t, nb.rep, "storage", &st)
	if st.Status != localstorage.StatusReady || len(st.Filesystems) != 1 || !st.Filesystems[0].Created || st.Filesystems[0].Mount != "/mnt/k8s-disks/0" {
		t.Fatalf("node-b's first boot: storage %+v: want one filesystem made and mounted at /mnt/k8s-disks/0", st)
	}

	createSurvivor(t, a, nb.nodeName)
	waitFor(t, nb.vm, "the survivor Deployment's pod Running on "+nb.nodeName, podTimeout, func() (bool, string) {
		return survivorOn(a, nb.nodeName)
	})

	quit := time.Now()
	cutPower(t, nb.vm)
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

// cutPower quits QEMU under the guest, as an instance whose hardware
// fails: no signal, no unmount, the disks as the guest left them. QMP's
// reply may not come before QEMU is gone.
func cutPower(t *testing.T, vm *qemu.VM) {
	t.Helper()
	if _, err := vm.QMP("quit", nil); err != nil {
		t.Logf("QMP quit: %v (QEMU may exit before it answers)", err)
	}
	if err := vm.WaitExit(30 * time.Second); err != nil {
		t.Fatalf("QEMU after QMP quit: %v", err)
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
