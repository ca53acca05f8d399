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
	"sync"
	"testing"
	"time"
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
