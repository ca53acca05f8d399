package vcluster

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/qemu-tests/qemu"
)

func TestNodeAt(t *testing.T) {
	a, b := NodeAt(0), NodeAt(1)
	// The names and addresses TestCluster's figures and the README use.
	if a.Name != "node-a" || a.IP.String() != "192.168.127.10" || a.MAC.String() != "52:54:00:b3:27:0a" ||
		a.InstanceID != "i-0aaaaaaaaaaaaaaa1" || a.Hostname != "ip-192-168-127-10.us-west-2.compute.internal" {
		t.Errorf("node 0: %+v", a)
	}
	if b.Name != "node-b" || b.IP.String() != "192.168.127.11" || b.InstanceID != "i-0bbbbbbbbbbbbbbb2" {
		t.Errorf("node 1: %+v", b)
	}
	seen := map[string]bool{}
	for i := range MaxNodes {
		n := NodeAt(i)
		for _, k := range []string{n.Name, n.IP.String(), n.MAC.String(), n.InstanceID, n.Hostname} {
			if seen[k] {
				t.Errorf("node %d repeats %q", i, k)
			}
			seen[k] = true
		}
		if n.IP == ServiceAddr || !DefaultSubnetHas(n.IP) {
			t.Errorf("node %d's address %s is the service address or off the subnet", i, n.IP)
		}
	}
}

// DefaultSubnetHas is whether the rig's subnet holds a.
func DefaultSubnetHas(a netip.Addr) bool {
	return netip.MustParsePrefix("192.168.127.0/24").Contains(a)
}

func TestNewRefuses(t *testing.T) {
	lo := netip.MustParseAddrPort("127.0.0.1:6443")
	reg := netip.MustParseAddrPort("127.0.0.1:5000")
	dir := t.TempDir()
	for name, cfg := range map[string]Config{
		"no nodes":       {APIServer: lo, Registry: reg, Socket: SocketIn(dir)},
		"too many nodes": {Nodes: make([]NodeSpec, MaxNodes+1), APIServer: lo, Registry: reg, Socket: SocketIn(dir)},
		"API server off loopback": {Nodes: make([]NodeSpec, 1), APIServer: netip.MustParseAddrPort("192.0.2.1:6443"),
			Registry: reg, Socket: SocketIn(dir)},
		"no registry": {Nodes: make([]NodeSpec, 1), APIServer: lo, Socket: SocketIn(dir)},
	} {
		if r, err := New(cfg); err == nil {
			r.Close()
			t.Errorf("%s: New accepted %+v", name, cfg)
		} else if !strings.Contains(err.Error(), "vcluster: ") {
			t.Errorf("%s: %v: want an error naming the package", name, err)
		}
	}
}

func TestQEMUConfig(t *testing.T) {
	dir := t.TempDir()
	sock := SocketIn(dir)
	r, err := New(Config{
		Nodes:     []NodeSpec{{UserData: []byte("a")}, {UserData: []byte("b")}},
		APIServer: netip.MustParseAddrPort("127.0.0.1:6443"), Registry: netip.MustParseAddrPort("127.0.0.1:5000"),
		Socket: sock,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("the network does not listen on %s: %v", sock, err)
	}
	if got := Virtual(netip.MustParseAddrPort("127.0.0.1:5000")); got.String() != "192.168.127.254:5000" {
		t.Errorf("Virtual: %s", got)
	}
	img := filepath.Join(dir, "image")
	disk := qemu.Disk{Path: "/x.img", Interface: "nvme", Serial: "s"}
	cfg, err := r.QEMUConfig(img, 1, Boot{RTCBehind: time.Hour, Disks: []qemu.Disk{disk}, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(cfg.Append, "berth.imds") {
		t.Errorf("command line %q names berth.imds: the node must find EC2's IMDS as in production", cfg.Append)
	}
	if cfg.Name != "node-b" || !cfg.Shell || cfg.CPUs != 2 || cfg.MemoryMB != 2048 || cfg.Timeout != time.Minute {
		t.Errorf("config %+v", cfg)
	}
	if len(cfg.NICs) != 1 || cfg.NICs[0].Stream != sock || cfg.NICs[0].MAC != "52:54:00:b3:27:0b" {
		t.Errorf("NICs %+v: want one on %s with node-b's MAC", cfg.NICs, sock)
	}
	if !slices.Contains(cfg.Disks, disk) {
		t.Errorf("disks %+v lack %+v", cfg.Disks, disk)
	}
	if i := slices.Index(cfg.Extra, "-rtc"); i < 0 || i+1 >= len(cfg.Extra) || !strings.HasPrefix(cfg.Extra[i+1], "base=") {
		t.Errorf("extra %v: want -rtc base=... for a clock an hour behind", cfg.Extra)
	}
	if _, err := r.QEMUConfig(img, 2, Boot{}); err == nil {
		t.Error("QEMUConfig accepted node 2 of 2")
	}
	// Each node's IMDS serves its own instance.
	for i, n := range r.Nodes {
		if got := imdsGet(t, n.IMDS, "meta-data/instance-id"); got != NodeAt(i).InstanceID {
			t.Errorf("node %d's IMDS: instance-id %q, want %s", i, got, NodeAt(i).InstanceID)
		}
		if got := imdsGet(t, n.IMDS, "meta-data/local-ipv4"); got != NodeAt(i).IP.String() {
			t.Errorf("node %d's IMDS: local-ipv4 %q", i, got)
		}
		if got := imdsGet(t, n.IMDS, "user-data"); got != string(rune('a'+i)) {
			t.Errorf("node %d's IMDS: user-data %q", i, got)
		}
	}
}

// imdsGet asks h for path the IMDSv2 way: a session token first.
func imdsGet(t *testing.T, h http.Handler, path string) string {
	t.Helper()
	put := httptest.NewRequest(http.MethodPut, "/latest/api/token", nil)
	put.Header.Set("X-aws-ec2-metadata-token-ttl-seconds", "60")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, put)
	if w.Code != http.StatusOK {
		t.Fatalf("token: %d %s", w.Code, w.Body)
	}
	get := httptest.NewRequest(http.MethodGet, "/latest/"+path, nil)
	get.Header.Set("X-aws-ec2-metadata-token", w.Body.String())
	w = httptest.NewRecorder()
	h.ServeHTTP(w, get)
	if w.Code != http.StatusOK {
		t.Fatalf("%s: %d %s", path, w.Code, w.Body)
	}
	return w.Body.String()
}

// A node off EC2 gets no IMDS and QEMU's own DMI, and its user data where
// its source puts it: on a seed volume (vfat on virtio-blk, iso9660 on a
// SCSI CD) or served by the rig behind berth.userdata=; an EC2 node's DMI
// says Amazon EC2 and its instance ID.
func TestSources(t *testing.T) {
	dir := t.TempDir()
	r, err := New(Config{
		Nodes: []NodeSpec{
			{UserData: []byte("ec2")},
			{UserData: []byte("seed-a"), Source: SourceSeed, NetworkConfig: []byte("version: 2\n")},
			{UserData: []byte("seed-b"), Source: SourceSeed, SeedFS: "iso9660"},
			{UserData: []byte("url"), Source: SourceURL},
		},
		APIServer: netip.MustParseAddrPort("127.0.0.1:6443"), Registry: netip.MustParseAddrPort("127.0.0.1:5000"),
		Socket: SocketIn(dir),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	img := t.TempDir()
	cfgs := make([]string, len(r.Nodes))
	for i := range r.Nodes {
		c, err := r.QEMUConfig(img, i, Boot{})
		if err != nil {
			t.Fatal(err)
		}
		cfgs[i] = fmt.Sprintf("%s %v %+v", c.Append, c.Extra, c.Disks)
	}
	ec2, seedA, seedB, url := r.Nodes[0], r.Nodes[1], r.Nodes[2], r.Nodes[3]
	if ec2.IMDS == nil || !strings.Contains(cfgs[0], "type=1,manufacturer=Amazon EC2") || !strings.Contains(cfgs[0], "asset="+ec2.InstanceID) {
		t.Errorf("EC2 node: IMDS %v, config %s: want its IMDS and EC2's DMI", ec2.IMDS, cfgs[0])
	}
	for i, nd := range []*Node{seedA, seedB, url} {
		if nd.IMDS != nil || strings.Contains(cfgs[i+1], "smbios") {
			t.Errorf("%s: IMDS %v, config %s: off EC2 it has neither IMDS nor EC2's DMI", nd.Name, nd.IMDS, cfgs[i+1])
		}
		if nd.Hostname != nd.Name {
			t.Errorf("%s: hostname %q: off EC2 its node name is its own name", nd.Name, nd.Hostname)
		}
	}
	if !strings.Contains(cfgs[1], seedA.Seed+" Interface:virtio") || !strings.Contains(cfgs[2], seedB.Seed+" Interface:cdrom") {
		t.Errorf("seeds attached as %s and %s: want vfat on virtio-blk, iso9660 as a CD", cfgs[1], cfgs[2])
	}
	for _, nd := range []*Node{seedA, seedB} {
		if _, err := os.Stat(nd.Seed); err != nil {
			t.Errorf("%s: seed image: %v", nd.Name, err)
		}
	}
	if !strings.Contains(cfgs[3], "berth.userdata="+url.UserDataURL) || !strings.HasPrefix(url.UserDataURL, "http://192.168.127.254:") {
		t.Fatalf("URL node: berth.userdata=%q in %s", url.UserDataURL, cfgs[3])
	}
	// The rig serves it on the host at the virtual address's port.
	port := url.UserDataURL[len("http://192.168.127.254:"):strings.Index(url.UserDataURL, "/node-d/")]
	resp, err := http.Get("http://127.0.0.1:" + port + "/node-d/user-data")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "url" {
		t.Errorf("user data server: %s %q, want node-d's", resp.Status, body)
	}
	if _, err := r.QEMUConfig(img, 3, Boot{Disk: &DiskBoot{Path: "/disk.raw"}}); err == nil {
		t.Error("a disk boot with berth.userdata=: no error")
	}
	c, err := r.QEMUConfig(img, 1, Boot{Disk: &DiskBoot{Path: "/disk.raw", Vars: "/vars.fd"}})
	if err != nil || !c.UEFI || !c.SecureBoot || c.Kernel != "" || c.Disks[0].Path != "/disk.raw" || c.Disks[1].Path != seedA.Seed {
		t.Errorf("disk boot: %v %+v: want UEFI from /disk.raw, the seed after it", err, c)
	}
}
