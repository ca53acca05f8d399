package controlplane

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"

	"github.com/berth-node/berth/internal/golden"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

func TestIssuedCertsVerifyForTheirUse(t *testing.T) {
	now := time.Now()
	ca, err := NewCA("test-ca", now)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	svc, err := firstServiceIP(DefaultServiceCIDR)
	if err != nil {
		t.Fatal(err)
	}
	specs := certSpecs("10.0.2.2", svc)
	srv, err := ca.Issue(specs["apiserver"], now)
	if err != nil {
		t.Fatal(err)
	}
	// Every name a client uses must verify: the guest (10.0.2.2), the host
	// (127.0.0.1) and pods (the kubernetes service).
	for _, name := range []string{"10.0.2.2", "127.0.0.1", "10.96.0.1", "localhost", "kubernetes.default.svc.cluster.local"} {
		if _, err := srv.Cert.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("apiserver certificate does not verify for %s: %v", name, err)
		}
	}
	if _, err := srv.Cert.Verify(x509.VerifyOptions{DNSName: "10.0.2.3", Roots: roots}); err == nil {
		t.Errorf("apiserver certificate verifies for 10.0.2.3, an address it was not issued for")
	}
	admin, err := ca.Issue(specs["admin"], now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("admin client certificate does not verify: %v", err)
	}
	if got := admin.Cert.Subject.Organization; len(got) != 1 || got[0] != "system:masters" {
		t.Errorf("admin organization %v, want [system:masters]", got)
	}
	if _, err := admin.Cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Errorf("admin client certificate verifies as a server certificate")
	}
	for name, want := range map[string]string{"controller-manager": "system:kube-controller-manager", "scheduler": "system:kube-scheduler"} {
		if specs[name].CommonName != want || !specs[name].Client {
			t.Errorf("%s: CN %q client %v, want %q client", name, specs[name].CommonName, specs[name].Client, want)
		}
	}
	other, err := NewCA("other-ca", now)
	if err != nil {
		t.Fatal(err)
	}
	otherRoots := x509.NewCertPool()
	otherRoots.AddCert(other.Cert)
	if _, err := srv.Cert.Verify(x509.VerifyOptions{DNSName: "10.0.2.2", Roots: otherRoots}); err == nil {
		t.Errorf("apiserver certificate verifies against an unrelated CA")
	}
}

func TestFirstServiceIP(t *testing.T) {
	for in, want := range map[string]string{"10.96.0.0/12": "10.96.0.1", "172.20.0.0/16": "172.20.0.1"} {
		ip, err := firstServiceIP(in)
		if err != nil || ip.String() != want {
			t.Errorf("firstServiceIP(%s) = %v, %v; want %s", in, ip, err, want)
		}
	}
	for _, bad := range []string{"", "10.96.0.0", "fd00::/108"} {
		if _, err := firstServiceIP(bad); err == nil {
			t.Errorf("firstServiceIP(%q) accepted", bad)
		}
	}
}

func TestBootstrapToken(t *testing.T) {
	re := regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`)
	a, err := NewBootstrapToken()
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewBootstrapToken()
	if err != nil {
		t.Fatal(err)
	}
	if !re.MatchString(a.String()) || !re.MatchString(b.String()) {
		t.Errorf("tokens %q %q do not match %s", a, b, re)
	}
	if a == b {
		t.Errorf("two tokens are equal: %s", a)
	}
}

// TestArgsGolden pins every component's flags for fixed options: a changed
// flag shows in review, and the bootstrap-critical ones are checked by name.
func TestArgsGolden(t *testing.T) {
	o := Options{StateDir: "/state"}
	o.Ports = Ports{APIServer: 6443, Etcd: 2379, EtcdPeer: 2380, ControllerManager: 10257, Scheduler: 10259}
	if err := o.setDefaults(); err != nil {
		t.Fatal(err)
	}
	l := layout{dir: o.StateDir}
	all := map[string][]string{
		"etcd":                    etcdArgs(l, o.Ports),
		"kube-apiserver":          apiServerArgs(l, o),
		"kube-controller-manager": controllerManagerArgs(l, o),
		"kube-scheduler":          schedulerArgs(l, o),
	}
	var got strings.Builder
	for _, name := range binaries {
		got.WriteString(name + "\n")
		for _, a := range all[name] {
			got.WriteString("  " + a + "\n")
		}
	}
	goldenPath := filepath.Join("testdata", "args.golden")
	golden.Check(t, goldenPath, []byte(got.String()), *update)
	for name, must := range map[string][]string{
		"kube-apiserver":          {"--advertise-address=10.0.2.2", "--bind-address=127.0.0.1", "--enable-bootstrap-token-auth=true", "--authorization-mode=Node,RBAC"},
		"kube-controller-manager": {"--controllers=*,bootstrapsigner,tokencleaner", "--cluster-signing-cert-file=/state/pki/ca.crt", "--use-service-account-credentials=true"},
		"etcd":                    {"--listen-client-urls=http://127.0.0.1:2379"},
	} {
		for _, m := range must {
			if !contains(all[name], m) {
				t.Errorf("%s lacks %s", name, m)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestSetDefaults: ports left zero stay zero, to be chosen as each
// component starts (TestPickFreePortsDistinctBindableAndAvoiding covers the
// choosing); ports given are checked.
func TestSetDefaults(t *testing.T) {
	var o Options
	if err := o.setDefaults(); err != nil {
		t.Fatal(err)
	}
	if o.Ports != (Ports{}) {
		t.Errorf("setDefaults chose ports %+v up front", o.Ports)
	}
	if o.AdvertiseAddress != "10.0.2.2" || o.KubeletAddressType != "Hostname" || o.ReadyTimeout == 0 || o.StopTimeout == 0 || o.pickPorts == nil {
		t.Errorf("defaults not applied: %+v", o)
	}
	badType := Options{KubeletAddressType: "ExternalDNS"}
	if err := badType.setDefaults(); err == nil || !strings.Contains(err.Error(), `"ExternalDNS"`) {
		t.Errorf("kubelet address type ExternalDNS: %v", err)
	}
	bad := Options{AdvertiseAddress: "host.example"}
	if err := bad.setDefaults(); err == nil {
		t.Errorf("advertise address host.example accepted")
	}
	dup := Options{Ports: Ports{APIServer: 6443, Scheduler: 6443}}
	if err := dup.setDefaults(); err == nil || !strings.Contains(err.Error(), "both 6443") {
		t.Errorf("two components on port 6443: %v", err)
	}
	huge := Options{Ports: Ports{Etcd: 70000}}
	if err := huge.setDefaults(); err == nil {
		t.Errorf("port 70000 accepted")
	}
}

func TestKubeconfigParses(t *testing.T) {
	now := time.Now()
	ca, err := NewCA("ca", now)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.Issue(CertSpec{CommonName: "kubernetes-admin", Client: true}, now)
	if err != nil {
		t.Fatal(err)
	}
	b, err := kubeconfig("https://127.0.0.1:6443", "admin", ca.CertPEM, kp)
	if err != nil {
		t.Fatal(err)
	}
	var cfg clientcmdv1.Config
	if err := yaml.UnmarshalStrict(b, &cfg); err != nil {
		t.Fatalf("kubeconfig does not parse: %v\n%s", err, b)
	}
	if cfg.CurrentContext != "admin" || len(cfg.Clusters) != 1 || cfg.Clusters[0].Cluster.Server != "https://127.0.0.1:6443" ||
		string(cfg.Clusters[0].Cluster.CertificateAuthorityData) != string(ca.CertPEM) ||
		len(cfg.AuthInfos) != 1 || string(cfg.AuthInfos[0].AuthInfo.ClientKeyData) != string(kp.KeyPEM) ||
		len(cfg.Contexts) != 1 || cfg.Contexts[0].Context.Cluster != cfg.Clusters[0].Name {
		t.Errorf("kubeconfig content wrong:\n%s", b)
	}
}

func TestBootstrapObjects(t *testing.T) {
	tok := BootstrapToken{ID: "abcdef", Secret: "0123456789abcdef"}
	objs := bootstrapObjects(tok, time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	b, err := json.Marshal(objs[0].Body)
	if err != nil {
		t.Fatal(err)
	}
	var secret struct {
		Metadata   struct{ Name, Namespace string }
		Type       string
		StringData map[string]string
	}
	if err := json.Unmarshal(b, &secret); err != nil {
		t.Fatal(err)
	}
	if secret.Metadata.Name != "bootstrap-token-abcdef" || secret.Metadata.Namespace != "kube-system" ||
		secret.Type != "bootstrap.kubernetes.io/token" || secret.StringData["token-id"] != "abcdef" ||
		secret.StringData["token-secret"] != "0123456789abcdef" || secret.StringData["usage-bootstrap-authentication"] != "true" ||
		secret.StringData["expiration"] != "2030-01-02T03:04:05Z" {
		t.Errorf("token secret wrong: %s", b)
	}
	roles := map[string]string{}
	for _, o := range objs[1:] {
		if o.Path != "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings" {
			t.Errorf("binding posted to %s", o.Path)
		}
		role := o.Body["roleRef"].(map[string]any)["name"].(string)
		subj := o.Body["subjects"].([]any)[0].(map[string]any)["name"].(string)
		roles[role] = subj
	}
	for role, group := range map[string]string{
		"system:node-bootstrapper": "system:bootstrappers",
		"system:certificates.k8s.io:certificatesigningrequests:nodeclient":     "system:bootstrappers",
		"system:certificates.k8s.io:certificatesigningrequests:selfnodeclient": "system:nodes",
	} {
		if roles[role] != group {
			t.Errorf("ClusterRole %s bound to %q, want %s", role, roles[role], group)
		}
	}
}

func TestFindBinary(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(a, "etcd"), []byte("x"), 0o644); err != nil { // not executable
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b, "etcd"), []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := findBinary([]string{a, b}, "etcd")
	if err != nil || got != filepath.Join(b, "etcd") {
		t.Errorf("findBinary = %q, %v; want %s", got, err, filepath.Join(b, "etcd"))
	}
	_, err = findBinary([]string{a, b}, "kube-apiserver")
	if err == nil || !strings.Contains(err.Error(), "make components") {
		t.Errorf("missing binary error %v does not say to run make components", err)
	}
}

func TestTail(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.log")
	var lines []string
	for i := 0; i < 40; i++ {
		lines = append(lines, "line "+string(rune('a'+i%26)))
	}
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := tail(p, 3)
	if got != strings.Join(lines[37:], "\n") {
		t.Errorf("tail = %q", got)
	}
	if !strings.Contains(tail(filepath.Join(t.TempDir(), "none"), 3), "cannot read log") {
		t.Errorf("tail of a missing file does not say so")
	}
}

func TestBootstrapKubeconfig(t *testing.T) {
	info := Info{
		APIServerEndpoint:    "https://10.0.2.2:6443",
		CertificateAuthority: base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n")),
		BootstrapToken:       "abcdef.0123456789abcdef",
	}
	b, err := BootstrapKubeconfig(info)
	if err != nil {
		t.Fatal(err)
	}
	var cfg clientcmdv1.Config
	if err := yaml.UnmarshalStrict(b, &cfg); err != nil {
		t.Fatalf("does not parse: %v\n%s", err, b)
	}
	if cfg.Clusters[0].Cluster.Server != "https://10.0.2.2:6443" || !strings.HasPrefix(string(cfg.Clusters[0].Cluster.CertificateAuthorityData), "-----BEGIN CERTIFICATE") ||
		cfg.AuthInfos[0].AuthInfo.Token != "abcdef.0123456789abcdef" || cfg.Contexts[0].Context.AuthInfo != cfg.AuthInfos[0].Name {
		t.Errorf("bootstrap kubeconfig wrong:\n%s", b)
	}
	if _, err := BootstrapKubeconfig(Info{CertificateAuthority: "%%%"}); err == nil {
		t.Errorf("a non-base64 CA was accepted")
	}
}
