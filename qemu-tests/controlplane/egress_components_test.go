//go:build components

package controlplane

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// The real kube-apiserver sends kubelet traffic through the egress proxy:
// a pod's log fails with the proxy's 502 naming the target until the test
// routes the node, then comes from a stand-in kubelet on loopback, which
// sees the apiserver's kubelet-client certificate.
func TestClusterReachesKubeletThroughProxy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, err := Start(ctx, slog.New(slog.NewTextHandler(os.Stderr, nil)), Options{BinDirs: componentsDirs(t)})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer c.Stop()
	host, admin := c.Info().HostEndpoint, c.Client()

	var mu sync.Mutex
	var seenCN, seenPath string
	kubelet := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seenPath = r.URL.Path
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			seenCN = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		mu.Unlock()
		io.WriteString(w, "stand-in kubelet\n")
	}))
	kubelet.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	kubelet.StartTLS()
	defer kubelet.Close()
	port := kubelet.Listener.Addr().(*net.TCPAddr).Port

	node := map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": "fake-node"}}
	if code, body := do(t, admin, "POST", host+"/api/v1/nodes", "", node); code != 201 {
		t.Fatalf("creating node: %d %s", code, body)
	}
	// As a berth node reports itself: InternalIP 10.0.2.15 (every QEMU
	// guest's) and its hostname.
	status := map[string]any{"status": map[string]any{
		"addresses":       []any{map[string]any{"type": "InternalIP", "address": "10.0.2.15"}, map[string]any{"type": "Hostname", "address": "fake-node"}},
		"daemonEndpoints": map[string]any{"kubeletEndpoint": map[string]any{"Port": KubeletPort}},
	}}
	b, _ := json.Marshal(status)
	req, _ := http.NewRequestWithContext(ctx, "PATCH", host+"/api/v1/nodes/fake-node/status", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/merge-patch+json")
	resp, err := admin.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("patching node status: %s %s", resp.Status, rb)
	}

	// A pod bound to the node: its log is fetched from the kubelet. (The
	// node's proxy subresource is no test of the route: the apiserver
	// first resolves the node's hostname in DNS, which no QEMU node has.)
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p"},
		"spec": map[string]any{"nodeName": "fake-node", "containers": []any{map[string]any{"name": "c", "image": "x"}}}}
	if code, body := do(t, admin, "POST", host+"/api/v1/namespaces/default/pods", "", pod); code != 201 {
		t.Fatalf("creating pod: %d %s", code, body)
	}
	logURL := host + "/api/v1/namespaces/default/pods/p/log"
	code, body := do(t, admin, "GET", logURL, "", nil)
	if code == 200 || !strings.Contains(string(body), "fake-node:10250") {
		t.Errorf("before RouteKubelet: %d %s, want a failure naming fake-node:10250", code, body)
	}
	if err := c.RouteKubelet("fake-node", port); err != nil {
		t.Fatal(err)
	}
	code, body = do(t, admin, "GET", logURL, "", nil)
	if code != 200 || string(body) != "stand-in kubelet\n" {
		t.Fatalf("after RouteKubelet: %d %s", code, body)
	}
	mu.Lock()
	defer mu.Unlock()
	if seenPath != "/containerLogs/default/p/c" || seenCN != "kube-apiserver-kubelet-client" {
		t.Errorf("stand-in kubelet saw path %q from %q, want /containerLogs/default/p/c from kube-apiserver-kubelet-client", seenPath, seenCN)
	}
}
