package qemutests

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/mounts/localstorage"
	"github.com/berth-node/berth/network"
	"github.com/berth-node/berth/network/timesync"
	"github.com/berth-node/berth/qemu-tests/imdsserver"
	"github.com/berth-node/berth/qemu-tests/qemu"
)

// testCA is a throwaway CA certificate, base64 of its PEM, as
// spec.cluster.certificateAuthority carries it.
func testCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "berth-test-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// mimeUserData wraps NodeConfig YAML the way eksctl and Karpenter do: MIME
// multipart with a shell part berth must skip.
func mimeUserData(nodeConfig string) []byte {
	return scriptAndNodeConfig("#!/bin/bash\necho hello\n", nodeConfig)
}

// scriptAndNodeConfig is MIME multipart user data of a shell script part
// and a NodeConfig part, in that order, as Karpenter writes it.
func scriptAndNodeConfig(script, nodeConfig string) []byte {
	return []byte("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n" +
		"--//\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n" + script + "\n" +
		"--//\nContent-Type: application/node.eks.aws\n\n" + nodeConfig + "\n--//--\n")
}

func nodeConfigYAML(t *testing.T, extraSpec string) string {
	return fmt.Sprintf(`apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: berth-qemu
    apiServerEndpoint: https://10.0.2.2:6443
    certificateAuthority: %s
    cidr: 10.100.0.0/16
%s`, testCA(t), extraSpec)
}

// startIMDS runs the IMDSv2 stand-in on the host's loopback; the guest
// reaches it through QEMU's user network at 10.0.2.2.
func startIMDS(t *testing.T, userData []byte) (*imdsserver.Server, string) {
	t.Helper()
	inst := imdsserver.DefaultInstance()
	inst.LocalIPv4 = "10.0.2.15"
	inst.LocalHostname = "ip-10-0-2-15.us-west-2.compute.internal"
	srv, err := imdsserver.New(imdsserver.Config{Instance: inst, UserData: userData})
	if err != nil {
		t.Fatal(err)
	}
	hostURL, stop, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	u, err := url.Parse(hostURL)
	if err != nil {
		t.Fatal(err)
	}
	return srv, "http://10.0.2.2:" + u.Port()
}

// section decodes one section of the boot report into v.
func section(t *testing.T, rep map[string]any, name string, v any) {
	t.Helper()
	raw, ok := field(rep, name)
	if !ok {
		t.Fatalf("boot report has no %s section: %v", name, rep)
	}
	b, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("report %s section: %v\n%s", name, err, b)
	}
}

// bottlerocketSettings is Bottlerocket settings user data for the QEMU
// cluster, with the machine settings berth takes as its annotations: a
// sysctl over one of berth's defaults, one berth does not set, one that
// lives in a module the settings load (ip_vs, under ip_vs_lc), a module
// blocked (dummy, which the image has and nothing loads at boot), the
// hostname and an NTP server (TEST-NET: it never answers).
func bottlerocketSettings(t *testing.T) string {
	return fmt.Sprintf(`[settings.kubernetes]
cluster-name = "berth-qemu"
api-server = "https://10.0.2.2:6443"
cluster-certificate = "%s"
cluster-dns-ip = "10.100.0.10"

[settings.kernel.sysctl]
"vm.max_map_count" = "262144"
"net/core/somaxconn" = "8192"
"net.ipv4.vs.conntrack" = "1"

[settings.kernel.modules.ip_vs_lc]
allowed = true
autoload = true

[settings.kernel.modules.dummy]
allowed = false

[settings.network]
hostname = "br-node-1"

[settings.ntp]
time-servers = ["192.0.2.123"]
`, testCA(t))
}

// A node boots on QEMU's user network by DHCP, reads its metadata and its
// MIME user data from an IMDSv2 stand-in on the host, renders the kubelet
// and containerd files, and the boot report says where everything came from.
// Its user data is a shell script (skipped), Bottlerocket settings (the
// cluster, and the machine settings berth takes as annotations: sysctls,
// a module to load, the hostname, an NTP server) and a NodeConfig asking
// for RAID0 over instance-store disks it does not have (only an EBS
// stand-in is attached): the storage phase is skipped and says why, and
// the EBS disk is untouched after power-off (this boot once was a storage
// test of its own, TestStorageNoDisks).
func TestConfigFromIMDS(t *testing.T) {
	dir := qemu.ImageDir(t)
	userData := []byte("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n" +
		"--//\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\necho hello\n\n" +
		"--//\nContent-Type: application/node.eks.aws\n\n" + bottlerocketSettings(t) + "\n" +
		"--//\nContent-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n" +
		"  cluster:\n    cidr: 10.100.0.0/16\n  instance:\n    localStorage:\n      strategy: RAID0\n\n--//--\n")
	srv, imdsURL := startIMDS(t, userData)
	disks := newStorageNode(t, 0)
	cfg := qemu.ImageConfig(dir, "berth.imds="+imdsURL)
	cfg.Shell = true
	cfg.Timeout = vmTimeout
	cfg.NICs = []qemu.NIC{{}}
	cfg.Disks = append(cfg.Disks, qemu.Disk{Path: disks.ebs, Interface: "nvme", Serial: "vol0ebsstandin"})
	vm := qemu.Start(t, cfg)

	rep, err := vm.Report(bootTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if !reportOK(rep) {
		t.Fatalf("boot failed: %v", rep["error"])
	}

	var n network.Result
	section(t, rep, "network", &n)
	if n.Mode != "dhcp" || !slices.Contains(n.Addresses, "10.0.2.15/24") || n.Gateway != "10.0.2.2" || n.DHCPServer == "" {
		t.Errorf("network by DHCP from QEMU's user network: %+v", n)
	}
	if n.MTU != 1500 {
		t.Errorf("MTU = %d, want 1500 (QEMU's user network)", n.MTU)
	}
	if !slices.Contains(n.DNS, "10.0.2.3") {
		t.Errorf("DNS servers %v lack QEMU's 10.0.2.3", n.DNS)
	}
	figure(t, "network phase %.0f ms, of which DHCP %.0f ms", n.Steps.Total, n.Steps.DHCP)

	var c report.Config
	section(t, rep, "config", &c)
	var pl report.Plan
	section(t, rep, "plan", &pl)
	var ap report.Apply
	section(t, rep, "apply", &ap)
	if c.Hostname != "ip-10-0-2-15.us-west-2.compute.internal" || c.HostnameSource != "imds" {
		t.Errorf("hostname in the report's config section: %q from %q, want IMDS local-hostname", c.Hostname, c.HostnameSource)
	}
	if c.IMDS != imdsURL {
		t.Errorf("config.imds = %q, want %q", c.IMDS, imdsURL)
	}
	if !slices.Contains(c.Sources, "user-data") {
		t.Errorf("config sources %v lack user-data", c.Sources)
	}
	if !slices.Contains(c.Result.Used, "user-data part 2 (application/node.eks.aws) (Bottlerocket settings)") {
		t.Errorf("config used %v, want the Bottlerocket settings part", c.Result.Used)
	}
	if len(c.Result.Skipped) != 1 || !strings.Contains(c.Result.Skipped[0].Source, "part 1") {
		t.Errorf("the shell part should be skipped, got %+v", c.Result.Skipped)
	}
	for _, f := range []string{"/etc/kubernetes/kubelet/config.json", "/etc/containerd/config.toml", "/etc/kubernetes/pki/ca.crt"} {
		if !slices.Contains(ap.Files, f) {
			t.Errorf("report files %v lack %s", ap.Files, f)
		}
	}
	if pl.NodeName != "ip-10-0-2-15.us-west-2.compute.internal" || pl.MaxPods != 29 ||
		pl.ProviderID != "aws:///us-west-2a/i-0123456789abcdef0" {
		t.Errorf("plan summary: %+v", pl)
	}

	// The files are really there, as the plan said, and the machine is
	// as the Bottlerocket settings asked: the hostname (the node's name
	// stays the private DNS name), the sysctls, the one in ip_vs written
	// after its module loaded, and the blocked module refused when the
	// kernel's modprobe is asked for it.
	out, err := vm.Shell("cat /etc/kubernetes/kubelet/config.json; echo; echo hostname=$(cat /proc/sys/kernel/hostname); cat /etc/resolv.conf; "+
		"echo max_map_count=$(cat /proc/sys/vm/max_map_count) somaxconn=$(cat /proc/sys/net/core/somaxconn) vs.conntrack=$(cat /proc/sys/net/ipv4/vs/conntrack); "+
		"test -d /sys/module/ip_vs_lc && echo ip_vs_lc=loaded; /run/berth/modprobe dummy; echo modprobe-dummy=$?; test -d /sys/module/dummy || echo dummy=absent", shellTimeout)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"providerID": "aws:///us-west-2a/i-0123456789abcdef0"`, `"cgroupDriver": "cgroupfs"`,
		"hostname=br-node-1\n", "nameserver 10.0.2.3", "max_map_count=262144 somaxconn=8192 vs.conntrack=1\n", "ip_vs_lc=loaded",
		"dummy blocked by user data", "modprobe-dummy=1\n", "dummy=absent"} {
		if !strings.Contains(out, want) {
			t.Errorf("guest lacks %q:\n%s", want, out)
		}
	}
	if ap.Hostname != "br-node-1" || len(ap.SysctlErrors) > 0 || len(ap.ModuleErrors) > 0 {
		t.Errorf("apply section: hostname %q, sysctl errors %q, module errors %q; want br-node-1 and none", ap.Hostname, ap.SysctlErrors, ap.ModuleErrors)
	}
	var tm timesync.Status
	section(t, rep, "time", &tm)
	if len(tm.Sources) < 2 || tm.Sources[0].Addr != "192.0.2.123:123" || tm.Sources[0].Origin != timesync.OriginUserData {
		t.Errorf("time sources %+v: want user data's 192.0.2.123:123 first, the boot's own after it", tm.Sources)
	}
	// IMDSv2 only: the first request was the token PUT and every GET
	// carried the token.
	reqs := srv.Requests()
	if len(reqs) == 0 || reqs[0].Method != "PUT" {
		t.Fatalf("first IMDS request was not the token PUT: %+v", reqs)
	}
	for _, r := range reqs {
		if r.Method == "GET" && !r.TokenPresent {
			t.Errorf("GET %s without a token", r.Path)
		}
	}

	var st localstorage.Result
	section(t, rep, "storage", &st)
	if st.Status != localstorage.StatusSkipped || !strings.Contains(st.Reason, "no instance-store disks") {
		t.Errorf("storage with RAID0 asked and only an EBS disk: %+v; want skipped, saying there are no instance-store disks", st)
	}
	disks.powerOff(t, vm)
}

// Static network config from the kernel command line, and an invalid
// NodeConfig that stops the boot with the field and the source named.
func TestStaticNetworkAndBadConfig(t *testing.T) {
	dir := qemu.ImageDir(t)
	bad := strings.Replace(nodeConfigYAML(t, ""), "https://10.0.2.2:6443", "http://10.0.2.2:6443", 1)
	_, imdsURL := startIMDS(t, []byte(bad))
	cfg := qemu.ImageConfig(dir, "berth.imds="+imdsURL+" berth.ip=10.0.2.15/24 berth.gw=10.0.2.2 berth.dns=10.0.2.3 berth.onfail=halt")
	cfg.Timeout = vmTimeout
	cfg.NICs = []qemu.NIC{{}}
	vm := qemu.Start(t, cfg)

	rep, err := vm.Report(bootTimeout)
	if err != nil {
		t.Fatal(err)
	}
	var n network.Result
	section(t, rep, "network", &n)
	if n.Mode != "static" || !slices.Contains(n.Addresses, "10.0.2.15/24") || n.Gateway != "10.0.2.2" || n.DHCPServer != "" {
		t.Errorf("static network: %+v", n)
	}
	if reportOK(rep) {
		t.Fatal("boot with an http:// apiServerEndpoint reported OK")
	}
	if _, err := vm.Expect(regexp.MustCompile(regexp.QuoteMeta(`user-data: spec.cluster.apiServerEndpoint: want an https URL`)), shellTimeout); err != nil {
		t.Errorf("console does not name the bad field and its source: %v", err)
	}
	if _, err := vm.Expect(regexp.MustCompile(regexp.QuoteMeta("reboot: System halted")), shellTimeout); err != nil {
		t.Errorf("berth.onfail=halt not followed: %v", err)
	}
}
