//go:build components

// These tests run the real control plane; they need the binaries built by
// `make components` and are selected with `go test -tags components`.

package controlplane

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func componentsDirs(t *testing.T) []string {
	t.Helper()
	dir := os.Getenv("BERTH_COMPONENTS_DIR")
	if dir == "" {
		t.Fatal("BERTH_COMPONENTS_DIR is not set: run `make components` and set it to build/components")
	}
	dirs, err := BinDirsUnder(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

func do(t *testing.T, client *http.Client, method, url, bearer string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, rb
}

// TestClusterJoinsLikeAKubelet starts the real control plane and walks the
// path a berth node takes: trust the printed CA, authenticate with the
// bootstrap token, file a kubelet client CSR, get it auto-approved and
// signed, then use the signed certificate. It also creates a namespace as the
// admin, and checks Stop leaves nothing listening and no state behind.
func TestClusterJoinsLikeAKubelet(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	t0 := time.Now()
	c, err := Start(ctx, log, Options{BinDirs: componentsDirs(t)})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Logf("figure: control plane ready in %s", time.Since(t0).Round(time.Millisecond))
	stopped := false
	defer func() {
		if !stopped {
			c.Stop()
		}
	}()
	info := c.Info()
	host, admin := info.HostEndpoint, c.Client()

	if code, body := do(t, admin, "GET", host+"/readyz", "", nil); code != 200 || string(body) != "ok" {
		t.Fatalf("/readyz: %d %s", code, body)
	}
	ns := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "berth-demo"}}
	if code, body := do(t, admin, "POST", host+"/api/v1/namespaces", "", ns); code != 201 {
		t.Fatalf("creating namespace: %d %s", code, body)
	}

	// The admin kubeconfig file works with the real kubectl.
	kubectl, err := findBinary(componentsDirs(t), "kubectl")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", c.Kubeconfig(), "create", "namespace", "berth-kubectl").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl create namespace: %v\n%s", err, out)
	}
	out, err = exec.CommandContext(ctx, kubectl, "--kubeconfig", c.Kubeconfig(), "get", "namespaces", "-o", "name").CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("namespace/berth-kubectl")) || !bytes.Contains(out, []byte("namespace/berth-demo")) {
		t.Fatalf("kubectl get namespaces: %v\n%s", err, out)
	}
	bk, err := os.ReadFile(info.BootstrapKubeconfig)
	if err != nil || !bytes.Contains(bk, []byte("token: "+info.BootstrapToken)) || !bytes.Contains(bk, []byte("server: "+info.APIServerEndpoint)) {
		t.Errorf("bootstrap kubeconfig %s: %v\n%s", info.BootstrapKubeconfig, err, bk)
	}

	// A client that knows only what the node gets: the CA from Info.
	caPEM, err := base64.StdEncoding.DecodeString(info.CertificateAuthority)
	if err != nil {
		t.Fatalf("certificateAuthority is not base64: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("certificateAuthority holds no PEM certificate")
	}
	node := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}

	// The serving certificate must also be valid for the guest's view.
	if u := info.APIServerEndpoint; u != fmt.Sprintf("https://10.0.2.2:%s", portOf(t, host)) {
		t.Errorf("apiServerEndpoint %s", u)
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	csrDER, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:berth-test", Organization: []string{"system:nodes"}},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	csr := map[string]any{
		"apiVersion": "certificates.k8s.io/v1",
		"kind":       "CertificateSigningRequest",
		"metadata":   map[string]any{"name": "node-csr-berth-test"},
		"spec": map[string]any{
			"request":    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: csrDER}),
			"signerName": "kubernetes.io/kube-apiserver-client-kubelet",
			"usages":     []string{"digital signature", "client auth"},
		},
	}
	if code, body := do(t, node, "POST", host+"/apis/certificates.k8s.io/v1/certificatesigningrequests", info.BootstrapToken, csr); code != 201 {
		t.Fatalf("creating CSR with the bootstrap token: %d %s", code, body)
	}
	var certPEM []byte
	deadline := time.Now().Add(90 * time.Second)
	for {
		_, body := do(t, node, "GET", host+"/apis/certificates.k8s.io/v1/certificatesigningrequests/node-csr-berth-test", info.BootstrapToken, nil)
		var got struct {
			Status struct {
				Certificate []byte
				Conditions  []struct{ Type, Reason string }
			}
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("CSR status: %v: %s", err, body)
		}
		if len(got.Status.Certificate) > 0 {
			certPEM = got.Status.Certificate
			t.Logf("figure: CSR approved and signed in %s; conditions %+v", time.Since(deadline.Add(-90*time.Second)).Round(time.Millisecond), got.Status.Conditions)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CSR not signed within 90s (auto-approval or signing broken): %s\ncontroller-manager log:\n%s", body, tail(info.LogDir+"/kube-controller-manager.log", 30))
		}
		time.Sleep(500 * time.Millisecond)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatalf("signed certificate does not match the key: %v", err)
	}
	kubelet := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}}}}
	ssr := map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
	code, body := do(t, kubelet, "POST", host+"/apis/authentication.k8s.io/v1/selfsubjectreviews", "", ssr)
	if code != 201 || !bytes.Contains(body, []byte(`"username":"system:node:berth-test"`)) || !bytes.Contains(body, []byte(`"system:nodes"`)) {
		t.Fatalf("the signed kubelet certificate does not authenticate as system:node:berth-test: %d %s", code, body)
	}

	stopped = true
	t1 := time.Now()
	if err := c.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	t.Logf("figure: control plane stopped in %s", time.Since(t1).Round(time.Millisecond))
	if conn, err := net.DialTimeout("tcp", "127.0.0.1:"+portOf(t, host), time.Second); err == nil {
		conn.Close()
		t.Errorf("apiserver still listening after Stop")
	}
	if _, err := os.Stat(info.StateDir); !os.IsNotExist(err) {
		t.Errorf("state directory %s left after Stop: %v", info.StateDir, err)
	}
}

func portOf(t *testing.T, url string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(url[len("https://"):])
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// TestClusterParallelStartStopStress starts several real control planes at
// once, in rounds, each with every component's first ports stolen (a test
// listener holds them), so each real etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler must be seen to fail on its
// taken port and be restarted on a fresh one. All must come up on distinct
// ports, each answering with its own CA, and Stop must release every port.
// BERTH_CONTROLPLANE_STRESS=N sets how many run at once (default 3).
func TestClusterParallelStartStopStress(t *testing.T) {
	parallel, rounds := 3, 2
	if s := os.Getenv("BERTH_CONTROLPLANE_STRESS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		parallel = n
	}
	// BERTH_CONTROLPLANE_NOSTEAL=1 starts them plainly, without stealing
	// the first ports: parallel starts on the ports the picker chose.
	noSteal := os.Getenv("BERTH_CONTROLPLANE_NOSTEAL") == "1"
	dirs := componentsDirs(t)
	th := newThief(t)
	for round := range rounds {
		log, logs := bufferLogger()
		clusters := make([]*Cluster, parallel)
		errs := make([]error, parallel)
		cancels := make([]context.CancelFunc, parallel)
		var wg sync.WaitGroup
		t0 := time.Now()
		for i := range parallel {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Cancelled only after Stop: Start stops the cluster when
				// its ctx ends, so a deferred cancel here would tear each
				// cluster down as soon as it had started.
				ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
				cancels[i] = cancel
				opts := Options{BinDirs: dirs, pickPorts: stealingPicker(th, stealEachFirstTry...)}
				if noSteal {
					opts.pickPorts = nil
				}
				clusters[i], errs[i] = Start(ctx, log, opts)
			}()
		}
		wg.Wait()
		t.Logf("figure: round %d: %d control planes ready in %s", round, parallel, time.Since(t0).Round(time.Millisecond))
		owner := map[int]int{}
		for i, c := range clusters {
			if errs[i] != nil {
				t.Errorf("round %d cluster %d: Start: %v", round, i, errs[i])
				continue
			}
			checkCluster(t, c, th)
			for name, p := range c.Ports().byName() {
				if j, dup := owner[p]; dup {
					t.Errorf("round %d: port %d (%s) used by clusters %d and %d", round, p, name, j, i)
				}
				owner[p] = i
			}
		}
		for _, b := range binaries {
			if n := logs.restarts(b); !noSteal && n < parallel {
				t.Errorf("round %d: %s restarted %d times, want at least %d (one per cluster)", round, b, n, parallel)
			}
		}
		for i, c := range clusters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if c != nil {
					if err := c.Stop(); err != nil {
						t.Errorf("round %d cluster %d: Stop: %v", round, i, err)
					}
				}
			}()
		}
		wg.Wait()
		for _, cancel := range cancels {
			cancel()
		}
		for _, c := range clusters {
			if c != nil {
				checkStopped(t, c)
			}
		}
		t.Logf("round %d: %d restarts on fresh ports", round, logs.restarts(""))
	}
}

// TestClusterAddons applies the add-ons to the real control plane and
// checks what a berth node then relies on: every object is accepted (twice:
// a second apply changes nothing), kube-dns holds the cluster DNS address,
// the kubernetes Service points at the address a guest dials, a new Node
// gets a pod CIDR from nodeipam, the DaemonSets and the Deployment are
// acted on by their controllers, install-cni's pod is bound to a node that
// is not Ready, and each service account's token can do what its add-on
// does and no more.
func TestClusterAddons(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	c, err := Start(ctx, log, Options{BinDirs: componentsDirs(t)})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer c.Stop()
	info := c.Info()
	host, admin := info.HostEndpoint, c.Client()

	a := c.Addons("registry.berth.test/berth/install-cni:v1.7.1", "registry.berth.test/berth/kube-proxy:v1.35.4", "registry.berth.test/berth/coredns:v1.12.4")
	if a.APIServer != info.APIServerEndpoint || a.ClusterCIDR != DefaultClusterCIDR || a.ServiceCIDR != DefaultServiceCIDR {
		t.Errorf("Addons from the cluster: %+v", a)
	}
	t0 := time.Now()
	if err := c.ApplyAddons(ctx, a); err != nil {
		t.Fatalf("ApplyAddons: %v", err)
	}
	t.Logf("figure: add-ons applied in %s", time.Since(t0).Round(time.Millisecond))
	if err := c.ApplyAddons(ctx, a); err != nil {
		t.Fatalf("ApplyAddons again: %v", err)
	}
	// A changed field reaches the existing object.
	a.CoreDNSReplicas = 2
	if err := c.ApplyAddons(ctx, a); err != nil {
		t.Fatalf("ApplyAddons with 2 CoreDNS replicas: %v", err)
	}

	get := func(path string, into any) {
		t.Helper()
		code, body := do(t, admin, "GET", host+path, "", nil)
		if code != 200 {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
		if err := json.Unmarshal(body, into); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	for _, p := range []string{
		"/apis/apps/v1/namespaces/kube-system/daemonsets/install-cni",
		"/apis/apps/v1/namespaces/kube-system/daemonsets/kube-proxy",
		"/apis/apps/v1/namespaces/kube-system/deployments/coredns",
		"/api/v1/namespaces/kube-system/configmaps/kube-proxy",
		"/api/v1/namespaces/kube-system/configmaps/coredns",
		"/api/v1/namespaces/kube-system/serviceaccounts/install-cni",
		"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/kubeadm:node-proxier",
	} {
		var o map[string]any
		get(p, &o)
	}
	var coredns appsv1.Deployment
	get("/apis/apps/v1/namespaces/kube-system/deployments/coredns", &coredns)
	if coredns.Spec.Replicas == nil || *coredns.Spec.Replicas != 2 {
		t.Errorf("coredns replicas %v after applying 2", coredns.Spec.Replicas)
	}
	var dns corev1.Service
	get("/api/v1/namespaces/kube-system/services/kube-dns", &dns)
	if dns.Spec.ClusterIP != "10.96.0.10" || len(dns.Spec.Ports) != 3 {
		t.Errorf("kube-dns: clusterIP %s ports %+v, want 10.96.0.10 and 53/UDP, 53/TCP, 9153/TCP", dns.Spec.ClusterIP, dns.Spec.Ports)
	}

	// Pods reach the API server through kube-proxy's DNAT of 10.96.0.1:443
	// to these endpoints: the address a guest dials, not loopback.
	var k8s corev1.Service
	get("/api/v1/namespaces/default/services/kubernetes", &k8s)
	var slice discoveryv1.EndpointSlice
	get("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes", &slice)
	port := portOf(t, host)
	if k8s.Spec.ClusterIP != "10.96.0.1" || len(slice.Endpoints) != 1 || len(slice.Endpoints[0].Addresses) != 1 ||
		slice.Endpoints[0].Addresses[0] != "10.0.2.2" || len(slice.Ports) != 1 || slice.Ports[0].Port == nil || strconv.Itoa(int(*slice.Ports[0].Port)) != port {
		t.Errorf("kubernetes Service %s, endpoints %+v ports %+v, want 10.96.0.1 -> 10.0.2.2:%s", k8s.Spec.ClusterIP, slice.Endpoints, slice.Ports, port)
	}

	// A node as a kubelet with --cloud-provider=external registers it: the
	// cloud provider's uninitialized taint, no Ready condition yet (so the
	// node lifecycle controller taints it too).
	const nodeName = "berth-addons-test"
	res := corev1.ResourceList{"cpu": resource.MustParse("2"), "memory": resource.MustParse("2Gi"), "pods": resource.MustParse("110")}
	node := corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{"kubernetes.io/os": "linux", "kubernetes.io/hostname": nodeName}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: UninitializedTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
		Status:     corev1.NodeStatus{Capacity: res, Allocatable: res},
	}
	t1 := time.Now()
	if code, body := do(t, admin, "POST", host+"/api/v1/nodes", "", node); code != 201 {
		t.Fatalf("creating node: %d %s", code, body)
	}
	eventually(t, 30*time.Second, "node gets spec.podCIDR from nodeipam", func() (bool, string) {
		get("/api/v1/nodes/"+nodeName, &node)
		return node.Spec.PodCIDR != "", fmt.Sprintf("%+v", node.Spec)
	})
	t.Logf("figure: node podCIDR %s assigned in %s", node.Spec.PodCIDR, time.Since(t1).Round(time.Millisecond))
	// The test control plane initializes it, as EKS's cloud-controller-
	// manager does: without that nothing but DaemonSets lands on it.
	eventually(t, 30*time.Second, "the uninitialized taint removed", func() (bool, string) {
		var now corev1.Node // fresh: decoding keeps fields the answer omits
		get("/api/v1/nodes/"+nodeName, &now)
		for _, tn := range now.Spec.Taints {
			if tn.Key == UninitializedTaint {
				return false, fmt.Sprintf("%+v", now.Spec.Taints)
			}
		}
		return true, ""
	})
	if _, n, err := net.ParseCIDR(node.Spec.PodCIDR); err != nil || !strings.HasPrefix(node.Spec.PodCIDR, "10.244.") || !strings.HasSuffix(n.String(), "/24") {
		t.Errorf("podCIDR %q, want a /24 of %s", node.Spec.PodCIDR, DefaultClusterCIDR)
	}

	for _, ds := range []string{"install-cni", "kube-proxy"} {
		eventually(t, 60*time.Second, ds+" DaemonSet wants a pod on the node", func() (bool, string) {
			var got appsv1.DaemonSet
			get("/apis/apps/v1/namespaces/kube-system/daemonsets/"+ds, &got)
			return got.Status.DesiredNumberScheduled == 1, fmt.Sprintf("%+v", got.Status)
		})
	}
	// install-cni must land on a node that is not Ready: that is the
	// node it makes Ready.
	eventually(t, 60*time.Second, "install-cni pod bound to the NotReady node", func() (bool, string) {
		var pods corev1.PodList
		get("/api/v1/namespaces/kube-system/pods?labelSelector=k8s-app%3Dinstall-cni", &pods)
		return len(pods.Items) == 1 && pods.Items[0].Spec.NodeName == nodeName, fmt.Sprintf("%d pods %+v", len(pods.Items), pods.Items)
	})
	eventually(t, 60*time.Second, "coredns ReplicaSet creates its pods", func() (bool, string) {
		var pods corev1.PodList
		get("/api/v1/namespaces/kube-system/pods?labelSelector=k8s-app%3Dkube-dns", &pods)
		return len(pods.Items) == 2, fmt.Sprintf("%d pods", len(pods.Items))
	})

	// Each add-on's own token, from the TokenRequest API as the kubelet
	// gets it for the pod, against a client that has only the CA.
	caPEM, err := base64.StdEncoding.DecodeString(info.CertificateAuthority)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	anon := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	token := func(sa string) string {
		t.Helper()
		tr := map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": map[string]any{"expirationSeconds": 600}}
		code, body := do(t, admin, "POST", host+"/api/v1/namespaces/kube-system/serviceaccounts/"+sa+"/token", "", tr)
		var got struct{ Status struct{ Token string } }
		if code != 201 || json.Unmarshal(body, &got) != nil || got.Status.Token == "" {
			t.Fatalf("TokenRequest for %s: %d %s", sa, code, body)
		}
		return got.Status.Token
	}
	for _, tc := range []struct {
		sa, method, path string
		want             int
	}{
		{"install-cni", "GET", "/api/v1/nodes/" + nodeName, 200},
		{"install-cni", "GET", "/api/v1/nodes", 200},
		{"install-cni", "GET", "/api/v1/nodes?watch=true&timeoutSeconds=1", 200},
		{"install-cni", "GET", "/api/v1/namespaces/kube-system/secrets", 403},
		{"install-cni", "DELETE", "/api/v1/nodes/" + nodeName, 403},
		{"kube-proxy", "GET", "/api/v1/services", 200},
		{"kube-proxy", "GET", "/apis/discovery.k8s.io/v1/endpointslices", 200},
		{"kube-proxy", "GET", "/api/v1/nodes/" + nodeName, 200},
		{"kube-proxy", "GET", "/api/v1/namespaces/kube-system/secrets", 403},
		{"coredns", "GET", "/apis/discovery.k8s.io/v1/endpointslices", 200},
		{"coredns", "GET", "/api/v1/services", 200},
		{"coredns", "GET", "/api/v1/namespaces", 200},
		{"coredns", "GET", "/api/v1/pods", 200},
		{"coredns", "GET", "/api/v1/nodes/" + nodeName, 403},
	} {
		code, body := do(t, anon, tc.method, host+tc.path, token(tc.sa), nil)
		if code != tc.want {
			t.Errorf("%s as %s: %d, want %d: %.300s", tc.method+" "+tc.path, tc.sa, code, tc.want, body)
		}
		if tc.path == "/api/v1/nodes/"+nodeName && code == 200 && !bytes.Contains(body, []byte(node.Spec.PodCIDR)) {
			t.Errorf("%s as %s: no podCIDR in %.300s", tc.path, tc.sa, body)
		}
	}
}

// eventually polls cond until it holds or timeout passes; cond's string
// says what it last saw.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, saw := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last saw %.1000s", what, timeout, saw)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
