package nodeobject

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-node/berth/runtime/kubelet"
)

// TestSeedKubeconfigs reads the kubeconfigs under testdata.
func TestSeedKubeconfigs(t *testing.T) {
	read := func(name string) *restConfig {
		t.Helper()
		path := filepath.Join("testdata/kubeconfig", name)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := parseKubeconfig(path, b)
		if err != nil {
			t.Fatal(err)
		}
		return rc
	}

	rc := read("tls-bootstrap.yaml")
	pem := "/var/lib/kubelet/pki/kubelet-client-current.pem"
	if rc.server.String() != "https://10.0.0.10:6443" || rc.caFile != "/etc/kubernetes/pki/ca.crt" || rc.certFile != pem || rc.keyFile != pem || rc.userName != "default-auth" {
		t.Errorf("tls-bootstrap.yaml: %+v", rc)
	}

	rc = read("eks-exec.yaml")
	if rc.exec == nil || rc.exec.Command != "/sbin/berth" || strings.Join(rc.exec.Args, " ") != "eks-token --cluster-name prod --region eu-west-1" || rc.token != "" {
		t.Errorf("eks-exec.yaml: %+v", rc)
	}

	rc = read("data-relative.yaml")
	abs, _ := filepath.Abs("testdata/kubeconfig/secrets/token")
	if rc.server.Path != "/prefix" || rc.serverName != "kubernetes.default.svc" || string(rc.certData) != "cert" || string(rc.keyData) != "key" ||
		rc.tokenFile != abs || rc.proxy.String() != "http://proxy.internal:3128" || !bytes.HasPrefix(rc.caData, []byte("-----BEGIN CERTIFICATE-----")) {
		t.Errorf("data-relative.yaml: %+v", rc)
	}
}

// TestBerthKubeconfigs reads what runtime/kubelet writes for kubelet.
func TestBerthKubeconfigs(t *testing.T) {
	b, err := kubelet.Kubeconfig(kubelet.KubeconfigInputs{Server: "https://api.example", Exec: kubelet.BerthEKSToken.Exec("prod", "eu-west-1")})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := parseKubeconfig("/var/lib/kubelet/kubeconfig", b)
	if err != nil {
		t.Fatal(err)
	}
	if rc.exec == nil || rc.exec.Command != kubelet.BerthPath || rc.exec.Args[0] != "eks-token" || rc.exec.APIVersion != execV1beta1 || rc.caFile != kubelet.CACertPath {
		t.Errorf("EKS kubeconfig read as %+v, exec %+v", rc, rc.exec)
	}

	b, err = kubelet.Kubeconfig(kubelet.KubeconfigInputs{Server: "https://api.example", BootstrapToken: "abcdef.0123456789abcdef"})
	if err != nil {
		t.Fatal(err)
	}
	if rc, err = parseKubeconfig("/var/lib/kubelet/bootstrap-kubeconfig", b); err != nil || rc.token != "abcdef.0123456789abcdef" {
		t.Errorf("bootstrap kubeconfig read as %+v, %v", rc, err)
	}
}

func TestMalformedKubeconfig(t *testing.T) {
	const head = "current-context: ctx\ncontexts:\n- name: ctx\n  context: {cluster: c, user: u}\n"
	const cluster = "clusters:\n- name: c\n  cluster: {server: 'https://api:6443'}\n"
	user := func(u string) string { return head + cluster + "users:\n- name: u\n  user: " + u + "\n" }
	for _, c := range []struct{ yaml, want string }{
		{"clusters: [", "kubeconfig /k/config: error converting YAML to JSON"},
		{"clusters: 3", "kubeconfig /k/config: error unmarshaling JSON"},
		{"kind: Config", "current-context is not set"},
		{"current-context: x", `current-context: no context named "x"`},
		{"current-context: ctx\ncontexts:\n- name: ctx\n", "contexts[ctx].context is missing"},
		{"current-context: ctx\ncontexts:\n- name: ctx\n  context: {user: u}\n", "contexts[ctx].context.cluster is not set"},
		{"current-context: ctx\ncontexts:\n- name: ctx\n  context: {cluster: c}\n", "contexts[ctx].context.user is not set"},
		{head, `kubeconfig /k/config: contexts[ctx].context.cluster: no cluster named "c"`},
		{head + cluster, `contexts[ctx].context.user: no user named "u"`},
		{head + cluster + "- name: c\n  cluster: {server: 'https://other:6443'}\nusers:\n- name: u\n  user: {}\n", `clusters: two entries named "c"`},
		{head + cluster + "users:\n- name: u\n  user: {}\n- name: u\n  user: {}\n", `users: two entries named "u"`},
		{"current-context: ctx\ncontexts:\n- name: ctx\n  context: {cluster: c, user: u}\n- name: ctx\n", `contexts: two entries named "ctx"`},
		{head + "clusters:\n- name: c\n", "clusters[c].cluster is missing"},
		{head + "clusters:\n- name: c\n  cluster: {}\nusers:\n- name: u\n  user: {}\n", "clusters[c].cluster.server is not set"},
		{head + "clusters:\n- name: c\n  cluster: {server: 'ftp://x'}\nusers:\n- name: u\n  user: {}\n", `clusters[c].cluster.server: "ftp://x" is not an http(s) URL`},
		{head + "clusters:\n- name: c\n  cluster: {server: 'https://a', certificate-authority-data: '!!'}\nusers:\n- name: u\n  user: {}\n", "clusters[c].cluster.certificate-authority-data: illegal base64"},
		{head + "clusters:\n- name: c\n  cluster: {server: 'https://a', certificate-authority: ca, insecure-skip-tls-verify: true}\nusers:\n- name: u\n  user: {}\n", "insecure-skip-tls-verify is set together with a certificate authority"},
		{head + "clusters:\n- name: c\n  cluster: {server: 'https://a', proxy-url: 'ftp://p'}\nusers:\n- name: u\n  user: {}\n", "clusters[c].cluster.proxy-url"},
		{head + cluster + "users:\n- name: u\n", "users[u].user is missing"},
		{user("{client-key-data: '%%'}"), "users[u].user.client-key-data: illegal base64"},
		{user("{client-certificate-data: '%%'}"), "users[u].user.client-certificate-data: illegal base64"},
		{user("{client-certificate: c.pem}"), "users[u].user: client-certificate is set but client-key is not"},
		{user("{client-key: k.pem}"), "client-key is set but client-certificate is not"},
		{user("{token: t, username: a}"), "more than one authentication method"},
		{user("{auth-provider: {name: gcp}}"), "users[u].user.auth-provider: auth provider plugins are not supported"},
		{user("{exec: {apiVersion: client.authentication.k8s.io/v1beta1}}"), "users[u].user.exec.command is not set"},
		{user("{exec: {command: x}}"), "users[u].user.exec.apiVersion is not set"},
		{user("{exec: {command: x, apiVersion: client.authentication.k8s.io/v1alpha1}}"), `users[u].user.exec.apiVersion: "client.authentication.k8s.io/v1alpha1" is not`},
		{user("{exec: {command: x, apiVersion: client.authentication.k8s.io/v1}}"), "users[u].user.exec.interactiveMode is not set"},
		{user("{exec: {command: x, apiVersion: client.authentication.k8s.io/v1, interactiveMode: Always}}"), "interactiveMode: Always needs a terminal"},
		{user("{exec: {command: x, apiVersion: client.authentication.k8s.io/v1, interactiveMode: Sometimes}}"), `interactiveMode: "Sometimes" is not`},
		{user("{exec: {command: x, apiVersion: client.authentication.k8s.io/v1beta1, env: [{value: v}]}}"), "users[u].user.exec.env[0].name is not set"},
		{user("{token: t, exec: {command: x, apiVersion: client.authentication.k8s.io/v1beta1}}"), "users[u].user.exec: an exec plugin cannot be combined with a token"},
		{user("{client-certificate: c, client-key: k, exec: {command: x, apiVersion: client.authentication.k8s.io/v1beta1}}"), "cannot be combined with client-certificate"},
	} {
		_, err := parseKubeconfig("/k/config", []byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "kubeconfig /k/config: ") {
			t.Errorf("kubeconfig\n%s\ngave %v, want an error containing %q", c.yaml, err, c.want)
		}
	}
}

// FuzzKubeconfig: the parser never panics, and what it accepts is usable.
func FuzzKubeconfig(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/kubeconfig/*.yaml")
	if len(seeds) == 0 {
		f.Fatal("no seeds under testdata/kubeconfig")
	}
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rc, err := parseKubeconfig("/etc/kubeconfig", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "kubeconfig /etc/kubeconfig: ") {
				t.Fatalf("error %q does not name the kubeconfig", err)
			}
			return
		}
		if rc.server == nil || rc.server.Host == "" || (rc.server.Scheme != "https" && rc.server.Scheme != "http") {
			t.Fatalf("accepted server %v", rc.server)
		}
		if rc.exec != nil && (rc.exec.Command == "" || rc.certFile != "" || rc.token != "") {
			t.Fatalf("accepted exec %+v with other credentials", rc.exec)
		}
		if (rc.certFile != "" || rc.certData != nil) != (rc.keyFile != "" || rc.keyData != nil) {
			t.Fatalf("accepted a certificate without a key or a key without one: %+v", rc)
		}
		_ = rc.authDescription()
	})
}

// TestGoldenNode reads the Ready condition of testdata/node.json, a Node
// as `kubectl get node -o json` shows an EKS node (its shape is
// k8s.io/api core/v1 Node: the test decodes it strictly into that type
// first, so the golden file cannot drift from the real schema).
func TestGoldenNode(t *testing.T) {
	b, err := os.ReadFile("testdata/node.json")
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var typed corev1.Node
	if err := dec.Decode(&typed); err != nil {
		t.Fatalf("testdata/node.json is no core/v1 Node: %v", err)
	}
	n, err := decodeNode(b)
	if err != nil {
		t.Fatal(err)
	}
	var ready corev1.NodeCondition
	for _, c := range typed.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c
		}
	}
	want := Node{
		Name:            typed.Name,
		ResourceVersion: typed.ResourceVersion,
		Annotations:     typed.Annotations,
		Labels:          typed.Labels,
		Unschedulable:   typed.Spec.Unschedulable,
		Ready:           string(ready.Status),
		ReadyReason:     ready.Reason,
		ReadyMessage:    ready.Message,
		// metav1.Time reads times in time.Local.
		ReadyHeartbeat:  ready.LastHeartbeatTime.UTC(),
		ReadyTransition: ready.LastTransitionTime.UTC(),
	}
	if !reflect.DeepEqual(n, want) {
		t.Errorf("decodeNode = %+v\nwant (via core/v1) %+v", n, want)
	}
	// And literally, in case both readings were wrong the same way.
	if n.Ready != "True" || n.ReadyReason != "KubeletReady" || !n.ReadyTransition.Equal(time.Date(2026, 12, 2, 6, 59, 47, 0, time.UTC)) ||
		!n.ReadyHeartbeat.Equal(time.Date(2026, 12, 2, 7, 1, 12, 0, time.UTC)) || !n.Unschedulable {
		t.Errorf("decodeNode = %+v", n)
	}

	// A Node kubelet has not yet reported Ready on, and one whose Ready
	// condition is False with times unset, marshalled by the core/v1 types.
	for _, c := range []struct {
		conds []corev1.NodeCondition
		want  Node
	}{
		{[]corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}}, Node{Name: "n"}},
		{[]corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", Message: "container runtime network not ready"}},
			Node{Name: "n", Ready: "False", ReadyReason: "KubeletNotReady", ReadyMessage: "container runtime network not ready"}},
		{[]corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, LastHeartbeatTime: metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))}},
			Node{Name: "n", Ready: "Unknown", ReadyHeartbeat: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}},
	} {
		b, err := json.Marshal(corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Conditions: c.conds}})
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeNode(b)
		if err != nil {
			t.Fatal(err)
		}
		if !got.ReadyHeartbeat.Equal(c.want.ReadyHeartbeat) {
			t.Errorf("decodeNode(%s).ReadyHeartbeat = %v, want %v", b, got.ReadyHeartbeat, c.want.ReadyHeartbeat)
		}
		got.ReadyHeartbeat, c.want.ReadyHeartbeat = time.Time{}, time.Time{}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("decodeNode(%s) = %+v, want %+v", b, got, c.want)
		}
	}
}
