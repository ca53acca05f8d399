package qemutests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/qemu-tests/qemu"
)

// clusterTimeout bounds each add-on's start under TCG: an image pull from
// the stand-in, an unpack and a container start on 2 shared cores.
const clusterTimeout = 6 * time.Minute

// TestCluster is a real cluster on a berth node, as EKS runs one: the node
// joins with no CNI and stays NotReady ("cni plugin not initialized") until
// the install-cni DaemonSet (as aws-node) copies its plugins into
// /opt/cni/bin and writes a conflist for the node's spec.podCIDR; then
// kube-proxy (iptables mode, Debian's iptables in its image) and CoreDNS
// (EKS's Corefile) run from images containerd pulls from the registry
// stand-in. A ClusterIP Service in front of the demo pod is resolved and
// fetched from a busybox pod and from the host's network; kubectl logs,
// exec and debug node reach the kubelet through the control plane.
func TestCluster(t *testing.T) {
	c := startClusterWith(t, clusterOptions{noCNI: true})
	if err := c.images.Require("kube-proxy.tar", "coredns.tar", "busybox.tar"); err != nil {
		t.Fatal(err)
	}
	info := c.Info()
	nc := c.nodeConfig()
	srv, imdsURL := startIMDS(t, mimeUserData(nc))
	_ = srv
	cfg := qemu.ImageConfig(qemu.ImageDir(t), "berth.imds="+imdsURL)
	cfg.MemoryMB = 2048
	cfg.Timeout = 25 * time.Minute
	cfg.NICs = []qemu.NIC{{HostFwd: []string{qemu.FwdKubelet}}}
	cfg.Shell = true
	vm := qemu.Start(t, cfg)
	qemuStart := time.Now()
	since := func() float64 { return time.Since(qemuStart).Seconds() }
	if rep, err := vm.Report(bootTimeout); err != nil {
		t.Fatal(err)
	} else if !reportOK(rep) {
		t.Fatalf("boot failed: %v", rep["error"])
	}
	a := api{c: c.Client(), base: info.HostEndpoint}
	node := "ip-10-0-2-15.us-west-2.compute.internal"
	routeKubelet(t, c.Cluster, vm, node)

	// 1. No CNI yet: registered, NotReady, and kubelet says why.
	var podCIDR string
	waitFor(t, vm, "node registered, NotReady for want of a CNI", joinTimeout, func() (bool, string) {
		n, err := getNode(a, node)
		if err != nil {
			return false, err.Error()
		}
		podCIDR = n.Spec.PodCIDR
		for _, cd := range n.Status.Conditions {
			if cd.Type == "Ready" {
				return cd.Status == "False" && strings.Contains(cd.Message, "cni plugin not initialized"), fmt.Sprintf("%+v", cd)
			}
		}
		return false, "no Ready condition yet"
	})
	if out, err := vm.Shell("ls -A /etc/cni/net.d | wc -l", shellTimeout); err != nil || strings.TrimSpace(lastLine(out)) != "0" {
		t.Fatalf("/etc/cni/net.d is not empty before the CNI DaemonSet (the image must not bake a CNI config): %v %q", err, out)
	}
	figure(t, "QEMU start to node registered and NotReady (no CNI): %.1f s", since())

	// 2. The add-ons, as a new EKS cluster has them.
	c.applyAddons(t, true, true)
	waitNodeReady(t, vm, a, node)
	readyAt := since()
	figure(t, "QEMU start to node Ready (CNI installed by its DaemonSet): %.1f s", readyAt)
	if podCIDR == "" {
		n, err := getNode(a, node)
		if err != nil {
			t.Fatal(err)
		}
		podCIDR = n.Spec.PodCIDR
	}
	conf, err := vm.Shell("cat /etc/cni/net.d/10-berth.conflist; ls -l /opt/cni/bin", shellTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if podCIDR == "" || !strings.Contains(conf, `"`+podCIDR+`"`) || !strings.Contains(conf, `"bridge"`) {
		t.Errorf("the conflist install-cni wrote does not use the node's podCIDR %q:\n%s", podCIDR, conf)
	}
	if logs, err := kubectl(t, c.Cluster, kubectlTimeout, "logs", "-n", "kube-system", "daemonset/install-cni"); err != nil {
		t.Errorf("kubectl logs install-cni: %v", err)
	} else {
		t.Logf("install-cni says:\n%s", logs)
	}

	// 3. kube-proxy programs Services in the host's iptables; CoreDNS
	// becomes Ready behind kube-dns.
	if out, err := kubectl(t, c.Cluster, clusterTimeout, "-n", "kube-system", "rollout", "status", "daemonset/kube-proxy", "--timeout="+clusterTimeout.String()); err != nil {
		t.Fatalf("kube-proxy: %v\n%s", err, vm.ConsoleTail(40))
	} else {
		t.Log(strings.TrimSpace(out))
	}
	figure(t, "QEMU start to kube-proxy Running: %.1f s", since())
	if out, err := kubectl(t, c.Cluster, clusterTimeout, "-n", "kube-system", "rollout", "status", "deployment/coredns", "--timeout="+clusterTimeout.String()); err != nil {
		desc, _ := kubectl(t, c.Cluster, kubectlTimeout, "-n", "kube-system", "describe", "pods", "-l", "k8s-app=kube-dns")
		t.Fatalf("CoreDNS: %v\n%s", err, desc)
	} else {
		t.Log(strings.TrimSpace(out))
	}
	figure(t, "QEMU start to CoreDNS Ready: %.1f s", since())
	var rules string
	waitFor(t, vm, "kube-proxy's KUBE-SERVICES rules for kube-dns in the host's iptables", time.Minute, func() (bool, string) {
		rules, err = vm.Shell("iptables -t nat -S KUBE-SERVICES", shellTimeout)
		return err == nil && strings.Contains(rules, "kube-system/kube-dns:dns"), rules
	})

	// 4. A Service in front of the demo pod, pulled from the registry.
	demo := demoPod("default", "demo", node)
	spec := demo["spec"].(map[string]any)
	ctr := spec["containers"].([]any)[0].(map[string]any)
	ctr["image"], ctr["imagePullPolicy"] = c.images.Demo, "IfNotPresent"
	demo["metadata"].(map[string]any)["labels"] = map[string]any{"app": "demo"}
	if err := a.do("POST", "/api/v1/namespaces/default/pods", demo, nil); err != nil {
		t.Fatal(err)
	}
	svc := map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "demo", "namespace": "default"},
		"spec": map[string]any{
			"selector": map[string]any{"app": "demo"},
			"ports":    []any{map[string]any{"name": "http", "port": 80, "targetPort": 8080}},
		},
	}
	var created struct {
		Spec struct {
			ClusterIP string `json:"clusterIP"`
		} `json:"spec"`
	}
	if err := a.do("POST", "/api/v1/namespaces/default/services", svc, &created); err != nil {
		t.Fatal(err)
	}
	clusterIP := created.Spec.ClusterIP
	waitPodRunning(t, vm, a, "demo")

	// 5. From a pod: cluster DNS names, then the Service over HTTP. The
	// answer is the demo pod's hostname.
	// The fetch is HTTP/1.0 through nc: Debian's busybox-static 1.35 wget
	// segfaults (seen on the host too), while nc and nslookup work.
	script := `set -e
nslookup kubernetes.default.svc.cluster.local
for i in $(seq 30); do nslookup demo.default.svc.cluster.local > /tmp/ns && break; sleep 1; done
cat /tmp/ns
ip=$(awk '/^Address: /{a=$2} END{print a}' /tmp/ns)
for i in $(seq 60); do printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 "$ip" 80 > /tmp/answer && grep -q ' 200 ' /tmp/answer && break; sleep 1; done
echo "answer: $(tail -n 1 /tmp/answer)"
`
	out := runPod(t, c, a, "dns-client", false, script)
	svcAt := since()
	for _, want := range []string{"answer: hello from berth demo pod demo", "10.96.0.1", clusterIP} {
		if !strings.Contains(out, want) {
			t.Errorf("the busybox pod's DNS and Service answers lack %q:\n%s", want, out)
		}
	}
	figure(t, "QEMU start to the first Service request answered from a pod: %.1f s", svcAt)

	// 6. From the node's own network namespace (hostNetwork), by ClusterIP.
	// nc, not wget: Debian's busybox-static 1.35 wget segfaults on a URL
	// with an IP address (seen on the host too), while a name works.
	out = runPod(t, c, a, "host-client", true, fmt.Sprintf(`printf 'GET / HTTP/1.0\r\nHost: demo\r\n\r\n' | nc -w 10 %s 80`, clusterIP))
	if !strings.Contains(out, "200 OK") || !strings.Contains(out, "demo") {
		t.Errorf("the node (hostNetwork) fetching http://%s/ got %q, want a 200 naming the demo pod", clusterIP, out)
	}

	// 7. kubectl logs, exec, and a shell on the node by kubectl debug.
	expectKubeletReach(t, c, vm, node, "demo")

	for _, f := range []string{"install-cni", "kube-proxy", "coredns", "busybox"} {
		if st, err := os.Stat(filepath.Join(componentsDir(t), "images", f+".tar")); err == nil {
			figure(t, "image %s: %.1f MB (OCI tarball)", f, float64(st.Size())/1e6)
		}
	}
}

// nodeObject is the part of a Node the cluster test reads.
type nodeObject struct {
	Spec struct {
		PodCIDR string `json:"podCIDR"`
	} `json:"spec"`
	Status struct {
		Conditions []struct {
			Type    string `json:"type"`
			Status  string `json:"status"`
			Message string `json:"message"`
		} `json:"conditions"`
	} `json:"status"`
}

func getNode(a api, name string) (nodeObject, error) {
	var n nodeObject
	err := a.do("GET", "/api/v1/nodes/"+name, nil, &n)
	return n, err
}

// runPod runs script in a busybox pod (on the host's network when
// hostNet) to completion and returns its log.
func runPod(t *testing.T, c *testCluster, a api, name string, hostNet bool, script string) string {
	t.Helper()
	pod := map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec": map[string]any{
			"restartPolicy":                 "Never",
			"hostNetwork":                   hostNet,
			"terminationGracePeriodSeconds": 1,
			"containers": []any{map[string]any{
				"name": "busybox", "image": c.images.Busybox, "imagePullPolicy": "IfNotPresent",
				"command": []any{"/bin/sh", "-c", script},
			}},
		},
	}
	if err := a.do("POST", "/api/v1/namespaces/default/pods", pod, nil); err != nil {
		t.Fatal(err)
	}
	_, werr := kubectl(t, c.Cluster, clusterTimeout, "wait", "--for=jsonpath={.status.phase}=Succeeded", "--timeout="+clusterTimeout.String(), "pod/"+name)
	logs, lerr := kubectlLogs(t, c.Cluster, "default", name)
	if werr != nil {
		st, _ := kubectl(t, c.Cluster, kubectlTimeout, "get", "pod", name, "-o", "jsonpath={.status}")
		t.Fatalf("pod %s did not succeed: %v\nstatus: %s\nlogs (%v):\n%s", name, werr, st, lerr, logs)
	}
	if lerr != nil {
		t.Fatal(lerr)
	}
	return logs
}

// debugNodeShell is kubectl.Runner.DebugNodeShell with the cluster's
// busybox image: the shell's output, from its log.
func debugNodeShell(t *testing.T, c *testCluster, node, commands string) (string, error) {
	t.Helper()
	if err := c.images.Require("busybox.tar"); err != nil {
		t.Fatal(err)
	}
	logs, attached, err := kubectlRunner(t, c.Cluster).DebugNodeShell(context.Background(), kubectlTimeout, node, c.images.Busybox, commands)
	if err == nil && !strings.Contains(attached, strings.TrimSpace(logs)) {
		t.Logf("kubectl debug's attach showed %d bytes of the shell's %d; the shell's log has them all", len(attached), len(logs))
	}
	return logs, err
}

// expectKubeletReach checks the API server reaches node's kubelet through
// the control plane's egress proxy: kubectl logs and exec of the running
// demo pod, and a shell from kubectl debug node reading the host's
// boot.json under /host. The node's kubelet must be routed (routeKubelet).
func expectKubeletReach(t *testing.T, c *testCluster, vm *qemu.VM, node, pod string) {
	t.Helper()
	// The first call may come before kubelet has its serving certificate
	// (its CSR approved by the control plane): retry for a while.
	logs, took, tries, err := untilOK(2*time.Minute, func() (string, error) { return kubectlLogs(t, c.Cluster, "default", pod) })
	if err != nil {
		t.Fatalf("kubectl logs %s: %v\nconsole tail:\n%s", pod, err, vm.ConsoleTail(30))
	}
	if want := "berth demo pod " + pod + " running"; !strings.Contains(logs, want) {
		t.Errorf("kubectl logs %s lacks %q:\n%s", pod, want, logs)
	}
	figure(t, "kubectl logs: %.1f s until it first worked (%d tries)", took.Seconds(), tries)

	start := time.Now()
	out, err := kubectlExec(t, c.Cluster, "default", pod, "/demo", "cat", "/etc/hostname")
	if err != nil {
		t.Errorf("kubectl exec: %v", err)
	} else if strings.TrimSpace(out) != pod {
		t.Errorf("kubectl exec %s -- /demo cat /etc/hostname = %q, want %q", pod, out, pod)
	}
	figure(t, "kubectl exec: %.2f s (wall, TCG)", time.Since(start).Seconds())

	start = time.Now()
	out, err = debugNodeShell(t, c, node, "cat /host/run/berth/boot.json; exit 0\n")
	if err != nil {
		t.Fatalf("kubectl debug node/%s: %v", node, err)
	}
	figure(t, "kubectl debug node -i with a busybox shell, boot.json read: %.1f s (wall, TCG)", time.Since(start).Seconds())
	i := strings.Index(out, "{")
	var rep map[string]any
	if i < 0 || json.Unmarshal([]byte(strings.TrimSpace(out[i:])), &rep) != nil || !reportOK(rep) {
		t.Errorf("the debug shell did not read the host's /run/berth/boot.json:\n%s", out)
	}
}

// lastLine is the last non-empty line of a shell answer.
func lastLine(s string) string {
	lines := regexp.MustCompile(`\r?\n`).Split(strings.TrimSpace(s), -1)
	return lines[len(lines)-1]
}
