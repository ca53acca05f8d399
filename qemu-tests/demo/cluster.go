package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/berth-node/berth/config/nodeconfig"
	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/qemu-tests/kubectl"
)

// Budgets for the cluster steps under TCG: each add-on is an image pull
// from the stand-in, an unpack and a container start on 2 shared cores.
const (
	addonTimeout   = 6 * time.Minute
	kubectlTimeout = 2 * time.Minute
	// logsRetry covers kubelet's serving certificate: the first kubectl
	// logs after the join may come before the control plane signed it.
	logsRetry     = 2 * time.Minute
	logsRetryWait = 3 * time.Second
)

// clusterSteps shows the add-ons that were applied before the node booted
// doing their work, then a Service, DNS and kubectl reaching the kubelet.
// The node is registered when it starts.
func (d *demo) clusterSteps(ctx context.Context, a api) error {
	// The CNI: the node stays NotReady until install-cni's pod runs.
	var cniPod string
	if err := d.wait(ctx, "install-cni pod Running (CNI installed)", addonTimeout, func() (bool, string) {
		name, ok, seen := a.runningPod(ctx, "kube-system", "k8s-app=install-cni")
		cniPod = name
		return ok, seen
	}); err != nil {
		return err
	}
	d.host.CNIInstalled = d.vm.Uptime()
	d.progress(d.host.CNIInstalled, "CNI installed: DaemonSet pod kube-system/%s Running (%s)", cniPod, d.images.InstallCNI)

	var ns nodeStatus
	if err := d.wait(ctx, "node Ready", readyTimeout, func() (bool, string) {
		_, ready, seen, n := a.nodeReady(ctx)
		ns = n
		return ready, seen
	}); err != nil {
		return err
	}
	d.host.Ready = d.vm.Uptime()
	ni := ns.Status.NodeInfo
	d.progress(d.host.Ready, "node Ready (kubelet %s, %s, kernel %s, %s)", ni.KubeletVersion, ni.ContainerRuntimeVersion, ni.KernelVersion, ni.OSImage)
	// What install-cni did, in its own words; a failure here is only a
	// note, as the node's Ready already proves the CNI.
	if out, _, _, err := d.kubectlRetry(ctx, "logs", "-n", "kube-system", cniPod); err != nil {
		d.note("kubectl logs install-cni: %v", err)
	} else {
		for _, l := range lastLines(out, 3) {
			d.progress(d.vm.Uptime(), "  install-cni says: %s", l)
		}
	}

	if err := d.wait(ctx, "kube-proxy Running", addonTimeout, func() (bool, string) {
		return a.workloadReady(ctx, "daemonsets", "kube-system", "kube-proxy")
	}); err != nil {
		return err
	}
	d.host.KubeProxyRunning = d.vm.Uptime()
	d.progress(d.host.KubeProxyRunning, "kube-proxy Running (iptables mode, %s)", d.images.KubeProxy)
	if err := d.wait(ctx, "CoreDNS Ready", addonTimeout, func() (bool, string) {
		return a.workloadReady(ctx, "deployments", "kube-system", "coredns")
	}); err != nil {
		return err
	}
	d.host.CoreDNSReady = d.vm.Uptime()
	dnsIP, err := nodeconfig.ClusterDNS(d.cluster.Info().ServiceCIDR)
	if err != nil {
		return fmt.Errorf("the cluster DNS address: %w", err)
	}
	d.progress(d.host.CoreDNSReady, "CoreDNS Ready behind Service kube-dns %s (%s)", dnsIP, d.images.CoreDNS)

	// The demo pod, pulled through the node's registry mirror, behind a
	// ClusterIP Service.
	if err := a.do(ctx, "POST", "/api/v1/namespaces/"+podNS+"/pods", demoPod(d.images.Demo), nil); err != nil {
		return fmt.Errorf("creating the demo pod: %w", err)
	}
	var svc struct {
		Spec struct {
			ClusterIP string `json:"clusterIP"`
		} `json:"spec"`
	}
	if err := a.do(ctx, "POST", "/api/v1/namespaces/"+podNS+"/services", demoService(), &svc); err != nil {
		return fmt.Errorf("creating the demo Service: %w", err)
	}
	d.progress(d.vm.Uptime(), "pod %s/%s (image %s) and Service %s (ClusterIP %s) created", podNS, podName, d.images.Demo, svcName, svc.Spec.ClusterIP)
	if err := d.wait(ctx, "demo pod Running", podTimeout, func() (bool, string) {
		ok, seen, _ := a.podPhase(ctx, podNS, podName, "Running")
		return ok, seen
	}); err != nil {
		return err
	}
	d.host.PodRunning = d.vm.Uptime()
	d.progress(d.host.PodRunning, "demo pod Running (pulled from %s via the node's mirror)", d.images.Demo)

	// The Service and cluster DNS from a busybox pod.
	if err := a.do(ctx, "POST", "/api/v1/namespaces/"+podNS+"/pods", dnsClientPod(d.images.Busybox), nil); err != nil {
		return fmt.Errorf("creating the busybox client pod: %w", err)
	}
	var phase podState
	if err := d.wait(ctx, "busybox client pod done (Service and DNS)", addonTimeout, func() (bool, string) {
		ok, seen, p := a.podPhase(ctx, podNS, clientPod, "Succeeded", "Failed")
		phase = p
		return ok, seen
	}); err != nil {
		return err
	}
	at := d.vm.Uptime()
	out, _, _, err := d.kubectlRetry(ctx, "logs", "-n", podNS, clientPod)
	if err != nil {
		return fmt.Errorf("reading the busybox client pod's log: %w", err)
	}
	kubeIP, err := kubernetesIP(d.cluster.Info().ServiceCIDR)
	if err != nil {
		return err
	}
	res, err := checkClientLog(out, podName, kubeIP, svc.Spec.ClusterIP)
	if err != nil || phase.Status.Phase != "Succeeded" {
		return fmt.Errorf("the busybox client pod (phase %s): %v; its log:\n%s", phase.Status.Phase, err, out)
	}
	d.host.ServiceAnswered, d.host.DNSResolved = at, at
	d.progress(at, "Service answered: http://%s/ (%s.%s's address) from a busybox pod → %q", res.Demo, svcName, podNS, res.Answer)
	d.progress(at, "DNS resolved: kubernetes.default → %s, %s.%s → %s", res.Kubernetes, svcName, podNS, res.Demo)

	// kubectl logs and debug node: the API server reaches the kubelet.
	logs, took, tries, err := d.kubectlRetry(ctx, "logs", "-n", podNS, podName)
	if err != nil {
		return fmt.Errorf("kubectl logs %s: %w", podName, err)
	}
	d.host.LogsRead = d.vm.Uptime()
	for _, l := range lastLines(logs, 1) {
		d.progress(d.host.LogsRead, "kubectl logs %s: %s (%.1f s, %d tries)", podName, l, took.Seconds(), tries)
	}
	rep, err := d.debugNode(ctx)
	if err != nil {
		return err
	}
	d.host.DebugShell = d.vm.Uptime()
	d.progress(d.host.DebugShell, "debug shell on the node read boot.json: ok=%t version=%s, berth's part %d ms, registered at %d ms (guest clock)",
		rep.OK, rep.Version, rep.EndMs-rep.KernelToInitMs, rep.RegisteredMs)
	return nil
}

// kubectlRetry runs kubectl until it succeeds or logsRetry passes.
func (d *demo) kubectlRetry(ctx context.Context, args ...string) (string, time.Duration, int, error) {
	return kubectl.UntilOK(ctx, logsRetry, logsRetryWait, func() (string, error) { return d.kc.Run(ctx, kubectlTimeout, nil, args...) })
}

// debugNode reads the host's boot.json from a busybox shell on the node
// (kubectl.Runner.DebugNodeShell).
func (d *demo) debugNode(ctx context.Context) (*report.Report, error) {
	out, _, err := d.kc.DebugNodeShell(ctx, kubectlTimeout, nodeName, d.images.Busybox, "cat /host/run/berth/boot.json; exit 0\n")
	if err != nil {
		return nil, fmt.Errorf("kubectl debug node/%s: %w", nodeName, err)
	}
	rep, err := bootJSONIn(out)
	if err != nil {
		return nil, fmt.Errorf("kubectl debug node/%s reading /host/run/berth/boot.json: %w\n%s", nodeName, err, out)
	}
	return rep, nil
}

// clientResult is what the busybox client pod saw.
type clientResult struct {
	Answer, Kubernetes, Demo string
}

// checkClientLog reads the client pod's log (clientScript's output): the
// Service's answer must name the demo pod, and the two lookups must give
// the kubernetes Service's ClusterIP and the demo Service's.
func checkClientLog(log, pod, kubeIP, clusterIP string) (clientResult, error) {
	var r clientResult
	for _, l := range strings.Split(log, "\n") {
		if a, ok := strings.CutPrefix(strings.TrimSpace(l), "answer: "); ok {
			r.Answer = strings.TrimSpace(a)
		}
	}
	// The demo pod answers "hello from berth demo pod NAME".
	if f := strings.Fields(r.Answer); len(f) == 0 || f[len(f)-1] != pod {
		return r, fmt.Errorf("the Service answered %q, want an answer naming the demo pod %q", r.Answer, pod)
	}
	if !resolvedTo(log, kubeIP) {
		return r, fmt.Errorf("kubernetes.default did not resolve to %s", kubeIP)
	}
	r.Kubernetes = kubeIP
	if clusterIP == "" || !resolvedTo(log, clusterIP) {
		return r, fmt.Errorf("%s.%s did not resolve to its ClusterIP %q", svcName, podNS, clusterIP)
	}
	r.Demo = clusterIP
	return r, nil
}

// resolvedTo says whether an nslookup answer in log gives ip: busybox
// prints "Address: IP" (or "Address 1: IP" in older builds), and the
// server line names the DNS Service, which must not count.
func resolvedTo(log, ip string) bool {
	for _, l := range strings.Split(log, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) >= 2 && f[0] == "Address:" && f[1] == ip,
			len(f) >= 3 && f[0] == "Address" && f[2] == ip:
			return true
		}
	}
	return false
}

// kubernetesIP is the kubernetes Service's ClusterIP: the first address of
// the service CIDR.
func kubernetesIP(serviceCIDR string) (string, error) {
	p, err := netip.ParsePrefix(serviceCIDR)
	if err != nil {
		return "", fmt.Errorf("the cluster's service CIDR %q: %w", serviceCIDR, err)
	}
	return p.Masked().Addr().Next().String(), nil
}

// bootJSONIn finds the boot report a debug shell printed: kubectl debug's
// own lines come first.
func bootJSONIn(out string) (*report.Report, error) {
	i := strings.Index(out, "{")
	if i < 0 {
		return nil, fmt.Errorf("no JSON in the shell's output")
	}
	var r report.Report
	if err := json.Unmarshal([]byte(strings.TrimSpace(out[i:])), &r); err != nil {
		return nil, fmt.Errorf("decoding boot.json: %w", err)
	}
	return &r, nil
}

// lastLines is the last n non-empty lines of s.
func lastLines(s string, n int) []string {
	var ls []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			ls = append(ls, l)
		}
	}
	return ls[max(0, len(ls)-n):]
}
