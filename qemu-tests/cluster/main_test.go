package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-node/berth/config/nodeconfig"
	"github.com/berth-node/berth/qemu-tests/controlplane"
)

// The user data a node gets passes berth check, with the operator's part
// merged after the join config.
func TestUserData(t *testing.T) {
	info := controlplane.Info{APIServerEndpoint: "https://192.168.127.254:6443", CertificateAuthority: testCA(t),
		BootstrapToken: "abcdef.0123456789abcdef", ServiceCIDR: "10.96.0.0/12"}
	join := info.JoinNodeConfigMirrored("berth-cluster", `{"registry.berth.test":["http://192.168.127.254:5000"]}`)
	extra := "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flags:\n    - --node-labels=tier=edge\n"
	for name, ud := range map[string][]byte{"join only": userData(join, ""), "with a part": userData(join, extra)} {
		p := filepath.Join(t.TempDir(), "user-data")
		if err := os.WriteFile(p, ud, 0o600); err != nil {
			t.Fatal(err)
		}
		problems, ok := nodeconfig.Check(true, p)
		if !ok {
			t.Errorf("%s: berth check refuses it: %v\n%s", name, problems, ud)
		}
		if got := strings.Count(string(ud), "Content-Type: application/node.eks.aws"); (name == "join only") != (got == 1) {
			t.Errorf("%s: %d NodeConfig parts", name, got)
		}
	}
}

func TestNodeConfigsFlag(t *testing.T) {
	c := nodeConfigs{}
	if err := c.Set("node-b=labels.yaml"); err != nil || c["node-b"] != "labels.yaml" {
		t.Errorf("Set: %v %v", err, c)
	}
	for _, bad := range []string{"node-b", "=x", "node-b="} {
		if err := c.Set(bad); err == nil {
			t.Errorf("Set(%q) accepted", bad)
		}
	}
	if !validNode("node-b", 2) || validNode("node-c", 2) || validNode("b", 2) {
		t.Error("validNode")
	}
}

func TestHostFigures(t *testing.T) {
	used, err := memUsed(strings.NewReader("MemTotal:       23000000 kB\nMemFree:  100 kB\nMemAvailable:   20000000 kB\n"))
	if err != nil || used != 3000000<<10 {
		t.Errorf("memUsed: %d %v", used, err)
	}
	if _, err := memUsed(strings.NewReader("MemTotal: 5 kB\n")); err == nil {
		t.Error("memUsed without MemAvailable")
	}
	a, err := parseStat(strings.NewReader("cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 50 0 50 400 0 0 0 0 0 0\ncpu1 50 0 50 400 0 0 0 0 0 0\nintr 1\n"))
	if err != nil || a.busy != 200 || a.total != 1000 || a.cores != 2 {
		t.Fatalf("parseStat: %+v %v", a, err)
	}
	// 300 of the next 400 jiffies busy on 2 cores: 1.5 cores.
	b, err := parseStat(strings.NewReader("cpu  250 0 250 900 0 0 0 0 0 0\ncpu0 1 0 0 0 0 0 0 0 0 0\ncpu1 1 0 0 0 0 0 0 0 0 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := b.busySince(a); got != 1.5 {
		t.Errorf("busySince: %v, want 1.5", got)
	}
	if _, err := parseStat(strings.NewReader("intr 1\n")); err == nil {
		t.Error("parseStat without a cpu line")
	}
}

// testCA is base64 of a self-signed CA certificate's PEM, as
// spec.cluster.certificateAuthority holds it.
func testCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func TestProcCPU(t *testing.T) {
	// A command name with spaces and a parenthesis, as /proc shows it.
	stat := "4242 (qemu-system x) S 1 4242 4242 0 -1 4194560 1000 0 0 0 1234 566 0 0 20 0 3 0 100 0 0"
	if got := procCPU(stat); got != 18 {
		t.Errorf("procCPU: %v, want 18 s (1234+566 ticks)", got)
	}
	if got := procCPU("garbage"); got != 0 {
		t.Errorf("procCPU(garbage): %v", got)
	}
}

// A signal during the bring-up ends it as asked, not as a failure: the
// waits return the signal's cause (context.Cause), wrapped by the step
// it cut short. A real failure stays one, signal or not, and a
// cancellation that was no signal's is a failure too.
func TestStoppedByRequest(t *testing.T) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGUSR1)
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("SIGUSR1 did not end the context")
	}
	cut := fmt.Errorf("waiting for every node to be Ready: %w", context.Cause(ctx))
	if !stoppedByRequest(ctx, cut) {
		t.Errorf("%v after the signal: want it read as the stop asked for", cut)
	}
	if failed := errors.New("node-a never booted"); stoppedByRequest(ctx, failed) {
		t.Errorf("%v after the signal: want it still a failure", failed)
	}
	if stoppedByRequest(context.Background(), fmt.Errorf("applying the add-ons: %w", context.Canceled)) {
		t.Error("a cancellation with no signal: want it a failure")
	}
}
