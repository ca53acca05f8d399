package qemutests

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/qemu-tests/qemu"
)

// hostLimits (TestJoin): on a joined node, the sysctls of the plan are in
// /proc/sys (nf_conntrack's and br_netfilter's included, their modules
// loaded by the apply phase) and none was left out of the report;
// containerd and kubelet run with their units' rlimits; a pod's processes
// get the base runtime spec's RLIMIT_NOFILE 65536/1048576; and a
// privileged pod sees /sys and /proc/sys writable (kube-proxy writes the
// conntrack hashsize and sysctls there).
func hostLimits(t *testing.T, cluster *testCluster, vm *qemu.VM, rep map[string]any) {

	out, err := vm.Shell("cd /proc/sys && for k in fs/inotify/max_user_watches fs/inotify/max_user_instances vm/max_map_count kernel/pid_max "+
		"net/netfilter/nf_conntrack_max net/bridge/bridge-nf-call-iptables net/ipv4/conf/lo/rp_filter net/ipv4/ip_local_reserved_ports vm/overcommit_memory; "+
		"do echo \"$k=$(cat $k)\"; done", shellTimeout)
	if err != nil {
		t.Fatalf("reading sysctls: %v %s", err, out)
	}
	for _, want := range []string{
		"fs/inotify/max_user_watches=524288", "fs/inotify/max_user_instances=8192", "vm/max_map_count=524288",
		"kernel/pid_max=4194304", "net/netfilter/nf_conntrack_max=1048576", "net/bridge/bridge-nf-call-iptables=1",
		"net/ipv4/conf/lo/rp_filter=2", "net/ipv4/ip_local_reserved_ports=2703,9808-9809,10249-10250,10256,61678-61679",
		"vm/overcommit_memory=1",
	} {
		if !strings.Contains(out, want+"\n") && !strings.HasSuffix(strings.TrimSpace(out), want) {
			t.Errorf("sysctl: want %s in:\n%s", want, out)
		}
	}
	var ap report.Apply
	section(t, rep, "apply", &ap)
	if len(ap.SysctlErrors) != 0 {
		t.Errorf("sysctls not set: %q", ap.SysctlErrors)
	}

	// The PIDs as boot.json has them now, not at the report: in
	// TestJoin other checks ran first, and a service that restarted
	// by itself since then has a new PID.
	svc := servicePIDs(t, faultBootJSON(t, vm))
	for name, want := range map[string][]string{
		"containerd": {"Max open files 1048576 1048576", "Max processes unlimited unlimited", "Max core file size unlimited unlimited"},
		// kubelet raises its own NOFILE to its maxOpenFiles (1000000) at
		// start, over the unit's 1024:524288, as on AL2023.
		"kubelet": {"Max open files 1000000 1000000"},
	} {
		limits := procLimits(t, vm, svc[name].PID)
		for _, w := range want {
			if !strings.Contains(limits, w) {
				t.Errorf("%s (pid %d): want %q in:\n%s", name, svc[name].PID, w, limits)
			}
		}
	}

	a := api{c: cluster.Client(), base: cluster.Info().HostEndpoint}
	node := "ip-10-0-2-15.us-west-2.compute.internal"
	waitNodeReady(t, vm, a, node)
	for _, priv := range []bool{false, true} {
		name := "limits"
		if priv {
			name = "limits-privileged"
		}
		pod := map[string]any{
			"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": name, "namespace": "default"},
			"spec": map[string]any{
				"nodeName":                      node,
				"terminationGracePeriodSeconds": 5,
				"containers": []any{map[string]any{
					"name": "demo", "image": "localhost/berth-demo:v1", "imagePullPolicy": "Never",
					"securityContext": map[string]any{"privileged": priv},
				}},
			},
		}
		if err := a.do("POST", "/api/v1/namespaces/default/pods", pod, nil); err != nil {
			t.Fatal(err)
		}
		waitPodRunning(t, vm, a, name)
		var p struct {
			Metadata struct {
				UID string `json:"uid"`
			} `json:"metadata"`
			Status struct {
				ContainerStatuses []struct {
					ContainerID string `json:"containerID"`
				} `json:"containerStatuses"`
			} `json:"status"`
		}
		if err := a.do("GET", "/api/v1/namespaces/default/pods/"+name, nil, &p); err != nil {
			t.Fatal(err)
		}
		if len(p.Status.ContainerStatuses) != 1 {
			t.Fatalf("pod %s: container statuses %+v", name, p.Status.ContainerStatuses)
		}
		// The pod's processes but its pause container, by the pod's cgroup.
		out, err := vm.Shell(fmt.Sprintf(`for p in /proc/[0-9]*; do grep -q 'pod%s' $p/cgroup 2>/dev/null && [ "$(cat $p/comm)" != pause ] && echo ${p#/proc/}; done; true`, p.Metadata.UID), shellTimeout)
		if err != nil {
			t.Fatalf("finding pod %s's processes: %v %s", name, err, out)
		}
		pids := strings.Fields(out)
		if len(pids) == 0 {
			t.Fatalf("no process of pod %s (uid %s) found", name, p.Metadata.UID)
		}
		var pid int
		fmt.Sscan(pids[0], &pid)
		limits := procLimits(t, vm, pid)
		// The demo is a Go program, and the Go runtime raises its own soft
		// NOFILE to the hard limit less one at start: the hard limit shows
		// in /proc, the soft one in the spec runc applied.
		if !strings.Contains(limits, "Max open files 1048575 1048576") {
			t.Errorf("pod %s (pid %d): want Max open files (Go-raised) 1048575 1048576 in:\n%s", name, pid, limits)
		}
		id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
		raw, err := vm.Shell("cat /run/containerd/io.containerd.runtime.v2.task/k8s.io/"+id+"/config.json", shellTimeout)
		if err != nil || !strings.Contains(raw, "{") {
			t.Fatalf("pod %s's OCI spec: %v %s", name, err, raw)
		}
		var spec struct {
			Process struct {
				Rlimits []struct {
					Type       string
					Soft, Hard uint64
				} `json:"rlimits"`
			} `json:"process"`
		}
		if err := json.Unmarshal([]byte(raw[strings.Index(raw, "{"):]), &spec); err != nil {
			t.Fatalf("pod %s's OCI spec: %v\n%s", name, err, raw)
		}
		if r := spec.Process.Rlimits; len(r) != 1 || r[0].Type != "RLIMIT_NOFILE" || r[0].Soft != 65536 || r[0].Hard != 1048576 {
			t.Errorf("pod %s's OCI spec rlimits: %+v, want RLIMIT_NOFILE 65536/1048576", name, r)
		}
		mounts, err := vm.Shell(fmt.Sprintf("grep -E ' /sys | /proc/sys ' /proc/%d/mounts; true", pid), shellTimeout)
		if err != nil {
			t.Fatalf("pod %s mounts: %v %s", name, err, mounts)
		}
		t.Logf("pod %s /sys and /proc/sys mounts:\n%s", name, mounts)
		sysRW := strings.Contains(mounts, " /sys sysfs rw,")
		procSysRO := strings.Contains(mounts, " /proc/sys ")
		if priv && (!sysRW || procSysRO) {
			t.Errorf("privileged pod: /sys must be rw and /proc/sys not remounted read-only:\n%s", mounts)
		}
		if !priv && (sysRW || !procSysRO) {
			t.Errorf("unprivileged pod: want /sys ro and /proc/sys read-only:\n%s", mounts)
		}
	}
	// Gone before TestJoin's graceful shutdown, as ECRPull's pods are:
	// kubelet waits out each pod's volume unmounts in its priority group,
	// and two more pods there cost the power-off seconds it checks
	// nothing with.
	deletePods(t, vm, a, "limits", "limits-privileged")
}

// procLimits is /proc/PID/limits in the guest, runs of spaces squeezed.
func procLimits(t *testing.T, vm *qemu.VM, pid int) string {
	t.Helper()
	if pid == 0 {
		t.Fatal("no pid")
	}
	out, err := vm.Shell(fmt.Sprintf("tr -s ' ' < /proc/%d/limits", pid), shellTimeout)
	if err != nil {
		t.Fatalf("reading /proc/%d/limits: %v %s", pid, err, out)
	}
	return out
}
