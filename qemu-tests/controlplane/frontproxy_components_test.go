//go:build components

package controlplane

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestClusterPublishesFrontProxyCA starts the real control plane and reads
// what an aggregated API server (the conformance suite's sample-apiserver)
// reads to authenticate the aggregator: kube-system's
// extension-apiserver-authentication holds the front-proxy CA writePKI
// wrote, kubeadm's allowed name and header names, and the client
// certificate the apiserver proxies with chains to that CA.
func TestClusterPublishesFrontProxyCA(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	c, err := Start(ctx, log, Options{BinDirs: componentsDirs(t)})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer c.Stop()
	l := layout{dir: c.opts.StateDir}

	code, body := do(t, c.Client(), "GET", c.Info().HostEndpoint+"/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication", "", nil)
	if code != 200 {
		t.Fatalf("reading extension-apiserver-authentication: %d %s", code, body)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := json.Unmarshal(body, &cm); err != nil {
		t.Fatalf("decoding extension-apiserver-authentication: %v", err)
	}
	for key, want := range map[string]string{
		"requestheader-allowed-names":        `["front-proxy-client"]`,
		"requestheader-username-headers":     `["X-Remote-User"]`,
		"requestheader-group-headers":        `["X-Remote-Group"]`,
		"requestheader-extra-headers-prefix": `["X-Remote-Extra-"]`,
	} {
		if got := cm.Data[key]; got != want {
			t.Errorf("extension-apiserver-authentication %s = %q, want %q", key, got, want)
		}
	}
	caFile, err := os.ReadFile(l.frontProxyCACert())
	if err != nil {
		t.Fatal(err)
	}
	published := cm.Data["requestheader-client-ca-file"]
	if published != string(caFile) {
		t.Errorf("requestheader-client-ca-file is not %s:\n%s", filepath.Base(l.frontProxyCACert()), published)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(published)) {
		t.Fatalf("requestheader-client-ca-file holds no PEM certificate: %q", published)
	}
	clientPEM, err := os.ReadFile(l.cert(frontProxyClientName))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(clientPEM)
	if block == nil {
		t.Fatalf("%s holds no PEM block", l.cert(frontProxyClientName))
	}
	client, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the proxy client certificate does not verify against the published requestheader CA: %v", err)
	}
}
