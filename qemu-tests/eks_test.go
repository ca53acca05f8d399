package qemutests

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/qemu-tests/awsstub"
	"github.com/berth-node/berth/qemu-tests/awsstub/eks"
	"github.com/berth-node/berth/qemu-tests/clusterimages"
	"github.com/berth-node/berth/qemu-tests/controlplane"
	"github.com/berth-node/berth/qemu-tests/imdsserver"
	"github.com/berth-node/berth/qemu-tests/qemu"
)

// ecrRegistry is the ECR registry host the demo image is pulled from; the
// guest reaches the registry stand-in behind it at 10.0.2.2.
const ecrRegistry = "111122223333.dkr.ecr.us-west-2.amazonaws.com"

// eksNode is the EKS way of joining, set up on the host, from the user
// data of the EKS CloudFormation template's AL2 node group (see
// startEKSNode): the node joins with nothing but its instance role. kubelet's kubeconfig runs `berth
// eks-token`, which presigns STS GetCallerIdentity with the role
// credentials from IMDS; kube-apiserver asks an EKS-style authenticator,
// which checks the token with an STS stand-in that verifies SigV4 and maps
// the role to system:node:<private DNS name>. No bootstrap token, no static
// credentials in the user data. A pod can pull its image from an ECR-style
// registry with credentials that `berth ecr-credential-provider` gets from
// an ECR stand-in (eksNode.checkECRPull).
type eksNode struct {
	cluster *testCluster
	stack   *awsstub.Stack
	inst    imdsserver.Instance
	regURL  *url.URL
	// imdsURL is the IMDS stand-in as the guest reaches it.
	imdsURL string
}

func startEKSNode(t *testing.T) *eksNode {
	t.Helper()
	now := time.Now().UTC()
	inst := imdsserver.DefaultInstance()
	inst.LocalIPv4 = "10.0.2.15"
	inst.LocalHostname = "ip-10-0-2-15.us-west-2.compute.internal"
	inst.Role = &imdsserver.Role{
		Name:            "berth-node",
		AccessKeyID:     "ASIABERTHTESTNODE001",
		SecretAccessKey: "berth/test/secret/key/that/only/the/stand/ins/know",
		Token:           "berth-session-token",
		Expiration:      now.Add(6 * time.Hour),
		LastUpdated:     now,
	}
	stack, err := awsstub.Start(awsstub.Config{
		Instance:    inst,
		ClusterName: "berth-qemu",
		Images:      []string{filepath.Join(componentsDir(t), "images", "demo.tar")},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stack.Stop)
	cluster := startControlPlaneWith(t, controlplane.Options{TokenWebhookURL: stack.WebhookURL, TokenWebhookCA: stack.WebhookCA})
	info := cluster.Info()

	ecrURL, err := url.Parse(awsstub.GuestURL(stack.ECRURL))
	if err != nil {
		t.Fatal(err)
	}
	// containerd reaches the ECR registry host through a mirror to the
	// stand-in (on EC2 it resolves and reaches ECR directly), which berth
	// writes as a hosts.toml from the user data's annotation.
	regURL, err := url.Parse(awsstub.GuestURL(stack.RegistryURL))
	if err != nil {
		t.Fatal(err)
	}
	mirrors, err := json.Marshal(map[string][]string{ecrRegistry: {regURL.String()}, clusterimages.Registry: {cluster.mirror}})
	if err != nil {
		t.Fatal(err)
	}
	// The EKS CloudFormation node group's user data: bootstrap.sh with the
	// cluster's name and kubelet's extra arguments only, so berth asks
	// EKS's DescribeCluster (the stand-in, with the instance role) for the
	// endpoint, the CA and the service CIDR, as AL2's bootstrap.sh did.
	// The NodeConfig part holds what the test rig needs and no AL2 script
	// can say: the registry mirrors, the stand-ins' endpoints, and
	// kubelet's shorter shutdown grace periods for TestJoin's
	// GracefulShutdown (on arm64, where that subtest does not run, they
	// only shorten the power-off's bound: kubelet lets go as soon as its
	// pods are down).
	ca, err := base64.StdEncoding.DecodeString(info.CertificateAuthority)
	if err != nil {
		t.Fatal(err)
	}
	stack.EKS.SetCluster(eks.Cluster{Name: "berth-qemu", ID: "berth-qemu-id", Status: "ACTIVE", Endpoint: info.APIServerEndpoint,
		CertificateAuthority:    &eks.CertificateAuthority{Data: base64.StdEncoding.EncodeToString(ca)},
		KubernetesNetworkConfig: &eks.KubernetesNetworkConfig{ServiceIpv4Cidr: info.ServiceCIDR, IPFamily: "ipv4"}})
	script := `#!/bin/bash
set -o xtrace
/etc/eks/bootstrap.sh berth-qemu --kubelet-extra-args '--node-labels=berth.dev/from=cloudformation'
/opt/aws/bin/cfn-signal --exit-code $? --stack berth --resource NodeGroup --region us-west-2
`
	nodeConfig := fmt.Sprintf(`apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
metadata:
  annotations:
    berth.dev/registry-mirrors: '%s'
spec:
  instance:
    environment:
      AWS_ENDPOINT_URL_ECR: %s
      AWS_ENDPOINT_URL_EKS: %s
  kubelet:
    config:
      shutdownGracePeriod: %s
      shutdownGracePeriodCriticalPods: %s
`, mirrors, ecrURL.String(), awsstub.GuestURL(stack.EKSURL), gracefulPeriod, gracefulCrit)
	if strings.Contains(nodeConfig+script, "bootstrap-token") || strings.Contains(nodeConfig+script, inst.Role.SecretAccessKey) {
		t.Fatal("the user data must carry no bootstrap token and no credentials")
	}
	srv, err := imdsserver.New(imdsserver.Config{Instance: inst, UserData: scriptAndNodeConfig(script, nodeConfig)})
	if err != nil {
		t.Fatal(err)
	}
	hostURL, stop, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return &eksNode{cluster: cluster, stack: stack, inst: inst, regURL: regURL, imdsURL: awsstub.GuestURL(hostURL)}
}

// checkFiles: kubelet's kubeconfig runs berth eks-token and there is no
// bootstrap kubeconfig; the registry mirror from the user data's
// annotation is containerd's hosts.toml.
func (e *eksNode) checkFiles(t *testing.T, vm *qemu.VM) {
	t.Helper()
	out, err := vm.Shell("cat /var/lib/kubelet/kubeconfig; ls /var/lib/kubelet/bootstrap-kubeconfig 2>&1; true", shellTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "command: /sbin/berth") || !strings.Contains(out, "eks-token") || !strings.Contains(out, "No such file") {
		t.Fatalf("kubeconfig should run berth eks-token and there should be no bootstrap kubeconfig:\n%s", out)
	}
	hostsTOML := "/etc/containerd/certs.d/" + ecrRegistry + "/hosts.toml"
	out, err = vm.Shell("cat "+hostsTOML, shellTimeout)
	if err != nil {
		t.Fatal(err)
	}
	// vm.Shell's output has no final newline.
	if want := fmt.Sprintf("server = \"https://%s\"\n\n[host.\"%s\"]\n  capabilities = [\"pull\", \"resolve\"]", ecrRegistry, e.regURL); !strings.HasSuffix(out, want) {
		t.Fatalf("%s from berth.dev/registry-mirrors:\n%s\nwant it to hold:\n%s", hostsTOML, out, want)
	}
}

// checkAuthenticated: a Ready node got there through the authenticator
// and STS stand-ins, with the cluster that DescribeCluster gave.
func (e *eksNode) checkAuthenticated(t *testing.T) {
	t.Helper()
	if len(e.stack.Authenticator.Requests()) == 0 || len(e.stack.STS.Requests()) == 0 {
		t.Fatal("the node is Ready but the authenticator and STS stand-ins saw no request")
	}
	if r := e.stack.EKS.Requests(); len(r) != 1 || r[0].Path != "/clusters/berth-qemu" || r[0].Status != 200 {
		t.Errorf("DescribeCluster requests %+v: want one, answered", r)
	}
}

// checkDescribed: the boot report's config says the cluster came from
// DescribeCluster for the script part, and the script's other commands
// were not run.
func (e *eksNode) checkDescribed(t *testing.T, rep map[string]any) {
	t.Helper()
	var c report.Config
	section(t, rep, "config", &c)
	const part = "user-data part 1 (text/x-shellscript)"
	if c.Result == nil || !slices.Equal(c.Result.Used, []string{part + ", bootstrap.sh on line 3", "user-data part 2 (application/node.eks.aws)",
		"eks:DescribeCluster berth-qemu (for " + part + ", bootstrap.sh on line 3)"}) {
		t.Errorf("config sources used: %+v", c.Result)
	}
	if c.Result != nil && (len(c.Result.NotRun) != 2 || c.Result.NotRun[1].Line != 4 || !strings.HasPrefix(c.Result.NotRun[1].Text, "/opt/aws/bin/cfn-signal")) {
		t.Errorf("not run: %+v, want set -o xtrace and cfn-signal", c.Result.NotRun)
	}
}

// checkECRPull runs a pod whose image comes from the ECR-style registry
// (imagePullPolicy Always) and checks that the registry behind the mirror
// served it and the ECR stand-in issued the token. Then a pod naming the
// imported localhost/berth-demo:v1, the same image ID, with pull policy
// Never: kubelet 1.35 now has a pull record for that ID, and without
// berth's record of the imported name (kubelet.PreloadedRecords) it
// refuses the pod (ErrImageNeverPull, "not present";
// kubernetes/kubernetes#138175).
func (e *eksNode) checkECRPull(t *testing.T, vm *qemu.VM, a api, node string) {
	t.Helper()
	pod := map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "from-ecr", "namespace": "default"},
		"spec": map[string]any{
			"nodeName":                      node,
			"terminationGracePeriodSeconds": 5,
			"containers": []any{map[string]any{
				"name": "demo", "image": ecrRegistry + "/berth-demo:v1", "imagePullPolicy": "Always",
			}},
		},
	}
	if err := a.do("POST", "/api/v1/namespaces/default/pods", pod, nil); err != nil {
		t.Fatal(err)
	}
	waitPodRunning(t, vm, a, "from-ecr")
	if len(e.stack.Registry.Requests()) == 0 {
		t.Error("the pod runs but the registry stand-in behind the mirror served nothing")
	}
	if len(e.stack.ECR.Requests()) == 0 {
		t.Error("the pod runs but the ECR stand-in issued no token")
	}
	if err := a.do("POST", "/api/v1/namespaces/default/pods", demoPod("default", "preloaded-after-ecr", node), nil); err != nil {
		t.Fatal(err)
	}
	waitPodRunning(t, vm, a, "preloaded-after-ecr")
	// Gone before the power button: kubelet's graceful shutdown of one
	// more pod cost this boot's power-off 20 s (it waits out its volume
	// unmounts per priority group), and the power-off checks only the
	// order.
	deletePods(t, vm, a, "from-ecr", "preloaded-after-ecr")
}
