package qemutests

import (
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/qemu-tests/awsstub"
	"github.com/berth-node/berth/qemu-tests/clusterimages"
	"github.com/berth-node/berth/qemu-tests/controlplane"
	"github.com/berth-node/berth/qemu-tests/imdsserver"
	"github.com/berth-node/berth/qemu-tests/qemu"
)

// ecrRegistry is the ECR registry host the demo image is pulled from; the
// guest reaches the registry stand-in behind it at 10.0.2.2.
const ecrRegistry = "111122223333.dkr.ecr.us-west-2.amazonaws.com"

// The EKS way: the node joins with nothing but its instance role. kubelet's
// kubeconfig runs `berth eks-token`, which presigns STS GetCallerIdentity
// with the role credentials from IMDS; kube-apiserver asks an EKS-style
// authenticator, which checks the token with an STS stand-in that verifies
// SigV4 and maps the role to system:node:<private DNS name>. No bootstrap
// token, no static credentials in the user data. Then a pod pulls its image
// from an ECR-style registry with credentials that `berth
// ecr-credential-provider` got from an ECR stand-in.
func TestJoinEKSAuth(t *testing.T) {
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
	nodeConfig := fmt.Sprintf(`apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
metadata:
  annotations:
    berth.dev/registry-mirrors: '%s'
spec:
  cluster:
    name: berth-qemu
    apiServerEndpoint: %s
    certificateAuthority: %s
    cidr: %s
  instance:
    environment:
      AWS_ENDPOINT_URL_ECR: %s
`, mirrors, info.APIServerEndpoint, info.CertificateAuthority, info.ServiceCIDR, ecrURL.String())
	if strings.Contains(nodeConfig, "bootstrap") || strings.Contains(nodeConfig, inst.Role.SecretAccessKey) {
		t.Fatal("the user data must carry no bootstrap token and no credentials")
	}
	srv, err := imdsserver.New(imdsserver.Config{Instance: inst, UserData: mimeUserData(nodeConfig)})
	if err != nil {
		t.Fatal(err)
	}
	hostURL, stop, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	imdsURL := awsstub.GuestURL(hostURL)

	cfg := qemu.ImageConfig(qemu.ImageDir(t), "berth.imds="+imdsURL)
	cfg.MemoryMB = 2048
	cfg.Timeout = 20 * time.Minute
	cfg.NICs = []qemu.NIC{{}}
	cfg.Shell = true
	vm := qemu.Start(t, cfg)
	rep, err := vm.Report(bootTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if !reportOK(rep) {
		t.Fatalf("boot failed: %v", rep["error"])
	}
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
	if want := fmt.Sprintf("server = \"https://%s\"\n\n[host.\"%s\"]\n  capabilities = [\"pull\", \"resolve\"]", ecrRegistry, regURL); !strings.HasSuffix(out, want) {
		t.Fatalf("%s from berth.dev/registry-mirrors:\n%s\nwant it to hold:\n%s", hostsTOML, out, want)
	}

	a := api{c: cluster.Client(), base: info.HostEndpoint}
	node := inst.LocalHostname
	waitNodeReady(t, vm, a, node)
	if len(stack.Authenticator.Requests()) == 0 || len(stack.STS.Requests()) == 0 {
		t.Fatal("the node is Ready but the authenticator and STS stand-in saw no request")
	}

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
	if len(stack.Registry.Requests()) == 0 {
		t.Error("the pod runs but the registry stand-in behind the mirror served nothing")
	}
	if len(stack.ECR.Requests()) == 0 {
		t.Error("the pod runs but the ECR stand-in issued no token")
	}
	if err := vm.PowerDown(); err != nil {
		t.Fatal(err)
	}
	if err := vm.WaitExit(powerOffBound); err != nil {
		t.Fatal(err)
	}
}
