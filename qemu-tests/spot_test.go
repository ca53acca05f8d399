package qemutests

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/config/nodeconfig"
	"github.com/berth-node/berth/init/report"
)

// al2UserData is Amazon Linux 2 user data for the test cluster, as the
// EKS user guide's managed node group with a custom AMI writes it (VAR=
// lines, then bootstrap.sh with options), plus a NodeConfig part with what
// an AL2 script cannot say and the test cluster needs: the bootstrap token
// (EKS joins by instance role) and the registry mirror.
func al2UserData(t *testing.T, cluster *testCluster) []byte {
	t.Helper()
	info := cluster.Info()
	dns, err := nodeconfig.ClusterDNS(info.ServiceCIDR)
	if err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`#!/bin/bash
set -ex
echo "hello from pre-bootstrap"
B64_CLUSTER_CA=%s
API_SERVER_URL=%s
K8S_CLUSTER_DNS_IP=%s
/etc/eks/bootstrap.sh berth-qemu --kubelet-extra-args '--node-labels=berth.dev/from=al2' --b64-cluster-ca $B64_CLUSTER_CA --apiserver-endpoint $API_SERVER_URL --dns-cluster-ip $K8S_CLUSTER_DNS_IP
`, info.CertificateAuthority, info.APIServerEndpoint, dns)
	// The cluster part of joinNodeConfig is the script's: keep the rest.
	nc := joinNodeConfig(info, cluster.mirror)
	nc = nc[:strings.Index(nc, "spec:")]
	return scriptAndNodeConfig(script, nc)
}

// A spot interruption notice on a joined node running a pod: the IMDS
// stand-in starts answering spot/instance-action, and the node shuts
// itself down in order (kubelet, the pods, containerd) and powers off,
// with no one pressing a button. The console names the notice.
//
// The node joins from Amazon Linux 2 user data (al2UserData): its
// cluster, CA, DNS address and a node label come from a script's
// bootstrap.sh invocation, read and never run, and the boot report lists
// the script's other commands as not run.
func TestSpotInterruption(t *testing.T) {
	cluster := startControlPlane(t)
	info := cluster.Info()
	vm, rep, srv := bootJoined(t, al2UserData(t, cluster))
	if _, err := vm.Expect(regexp.MustCompile(`lifecycle: watching IMDS for lifecycle notices .*spot=shutdown`), time.Minute); err != nil {
		t.Fatalf("the lifecycle watcher did not start: %v", err)
	}
	var c report.Config
	section(t, rep, "config", &c)
	if c.Result == nil || !slices.Contains(c.Result.Used, "user-data part 1 (text/x-shellscript), bootstrap.sh on line 7") ||
		!slices.Contains(c.Result.NotRun, nodeconfig.NotRun{Source: "user-data part 1 (text/x-shellscript)", Line: 3, Text: `echo "hello from pre-bootstrap"`}) {
		t.Errorf("the report's config section does not show the AL2 script read and its echo not run: %+v", c.Result)
	}
	if _, err := vm.Expect(regexp.MustCompile(`not run: user-data part 1 \(text/x-shellscript\) line 3: echo "hello from pre-bootstrap"`), 0); err != nil {
		t.Errorf("the console does not list the command not run: %v", err)
	}

	a := api{c: cluster.Client(), base: info.HostEndpoint}
	node := "ip-10-0-2-15.us-west-2.compute.internal"
	waitNodeReady(t, vm, a, node)
	var labelled struct {
		Metadata struct{ Labels map[string]string } `json:"metadata"`
	}
	if err := a.do("GET", "/api/v1/nodes/"+node, nil, &labelled); err != nil || labelled.Metadata.Labels["berth.dev/from"] != "al2" {
		t.Errorf("the label from --kubelet-extra-args is not on the node: %v %v", err, labelled.Metadata.Labels)
	}
	if err := a.do("POST", "/api/v1/namespaces/default/pods", demoPod("default", "spot-demo", node), nil); err != nil {
		t.Fatal(err)
	}
	waitPodRunning(t, vm, a, "spot-demo")

	// EC2 gives two minutes; the notice's time says when.
	at := time.Now().Add(2 * time.Minute).UTC().Truncate(time.Second)
	if err := srv.SetSpotAction("terminate", at); err != nil {
		t.Fatal(err)
	}
	appeared := time.Now()
	notice := fmt.Sprintf("spot interruption notice: terminate at %s", at.Format(time.RFC3339))
	if _, err := vm.Expect(regexp.MustCompile(`lifecycle: lifecycle notice: `+regexp.QuoteMeta(notice)+`: starting the graceful shutdown`), time.Minute); err != nil {
		t.Fatalf("the console does not name the notice: %v\nconsole tail:\n%s", err, vm.ConsoleTail(40))
	}
	seen := time.Since(appeared)
	if err := vm.WaitExit(powerOffBound); err != nil {
		t.Fatalf("the node did not power off within %s of the notice: %v\nconsole tail:\n%s", powerOffBound, err, vm.ConsoleTail(40))
	}
	figure(t, "spot notice to berth acting on it: %.1f s; to QEMU exit: %.1f s (wall, poll interval 5 s)",
		seen.Seconds(), time.Since(appeared).Seconds())
	// The same graceful shutdown as the power button's.
	checkShutdownAftermath(t, a, node, []podRef{{"default", "spot-demo"}})

	expectShutdownInOrder(t, vm, regexp.MustCompile(`lifecycle: shutdown requested reason="`+regexp.QuoteMeta(notice)+`"`))
	if _, err := vm.Expect(regexp.MustCompile(`Kernel panic`), 0); err == nil {
		t.Errorf("kernel panicked during the shutdown")
	}
}
