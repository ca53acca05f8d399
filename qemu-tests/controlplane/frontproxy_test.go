package controlplane

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"strings"
	"testing"
	"time"
)

// The apiserver runs the aggregator's front-proxy authentication as
// kubeadm configures it, and routes to aggregated servers and webhooks by
// endpoint: the flags, each with the file writeFrontProxyPKI writes.
func TestFrontProxyArgs(t *testing.T) {
	l := layout{dir: "/state"}
	args := strings.Join(apiServerArgs(l, Options{StateDir: "/state"}), "\n") + "\n"
	for _, want := range []string{
		"--requestheader-client-ca-file=/state/pki/front-proxy-ca.crt",
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-username-headers=X-Remote-User",
		"--proxy-client-cert-file=/state/pki/front-proxy-client.crt",
		"--proxy-client-key-file=/state/pki/front-proxy-client.key",
		"--enable-aggregator-routing=true",
		// Client certificates still authenticate against the cluster CA,
		// not the front-proxy one.
		"--client-ca-file=/state/pki/ca.crt",
	} {
		if !strings.Contains(args, "\n"+want+"\n") {
			t.Errorf("apiserver args lack %s:\n%s", want, args)
		}
	}
}

// The aggregator's client certificate chains to the front-proxy CA (and to
// no other), names front-proxy-client, and is for client use only.
func TestFrontProxyPKI(t *testing.T) {
	now := time.Now()
	ca, client, err := newFrontProxyPKI(now)
	if err != nil {
		t.Fatal(err)
	}
	if !ca.Cert.IsCA || ca.Cert.Subject.CommonName != "front-proxy-ca" {
		t.Errorf("front-proxy CA: IsCA %v CN %q, want a CA named front-proxy-ca", ca.Cert.IsCA, ca.Cert.Subject.CommonName)
	}
	if cn := client.Cert.Subject.CommonName; cn != "front-proxy-client" {
		t.Errorf("client CN %q, want front-proxy-client (--requestheader-allowed-names)", cn)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	if _, err := client.Cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("front-proxy-client does not verify as a client of the front-proxy CA: %v", err)
	}
	if _, err := client.Cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("front-proxy-client verifies as a server certificate")
	}
	cluster, err := NewCA("berth-test-ca", now)
	if err != nil {
		t.Fatal(err)
	}
	clusterRoots := x509.NewCertPool()
	clusterRoots.AddCert(cluster.Cert)
	if _, err := client.Cert.Verify(x509.VerifyOptions{Roots: clusterRoots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("front-proxy-client verifies against the cluster CA: it must chain to the front-proxy CA only")
	}
}

// writeFrontProxyPKI puts the CA and the client key pair where the
// apiserver's flags name them, keys readable by their owner only, and the
// key pair matches.
func TestWriteFrontProxyPKI(t *testing.T) {
	l := layout{dir: t.TempDir()}
	if err := os.MkdirAll(l.path("pki"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := writeFrontProxyPKI(l, time.Now()); err != nil {
		t.Fatal(err)
	}
	for path, mode := range map[string]os.FileMode{
		l.frontProxyCACert(): 0o644, l.frontProxyCAKey(): 0o600,
		l.cert("front-proxy-client"): 0o644, l.key("front-proxy-client"): 0o600,
	} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Errorf("front-proxy file: %v", err)
			continue
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode().Perm(), mode)
		}
	}
	certPEM, err := os.ReadFile(l.cert("front-proxy-client"))
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(l.key("front-proxy-client"))
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatalf("front-proxy-client key pair: %v", err)
	}
	caPEM, err := os.ReadFile(l.frontProxyCACert())
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(caPEM)
	if block == nil {
		t.Fatalf("%s holds no PEM block", l.frontProxyCACert())
	}
	caCert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(caCert)
	if _, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the written front-proxy-client does not chain to the written front-proxy CA: %v", err)
	}
}
