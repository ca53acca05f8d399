package qemutests

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-node/berth/config/platform"
	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/internal/safe"
	"github.com/berth-node/berth/network"
	"github.com/berth-node/berth/qemu-tests/controlplane"
	"github.com/berth-node/berth/qemu-tests/imdsserver"
	"github.com/berth-node/berth/qemu-tests/qemu"
	"github.com/berth-node/berth/qemu-tests/vcluster"
	"github.com/berth-node/berth/qemu-tests/vnet"
)

// rigNode is one node of a test's virtual network (package vcluster) as
// the test sees it after its boot.
type rigNode struct {
	name, ip, id string
	srv          *imdsserver.Server
	vm           *qemu.VM
	rep          map[string]any
	nodeName     string
	boot         vcluster.Boot
}

// startRigControlPlane starts a control plane as the rig's nodes reach
// it: the API server advertised at vcluster.ServiceAddr, kubelets dialled
// by their InternalIP (the node proxy resolves a Hostname itself, which
// the rig's names are not to the host).
func startRigControlPlane(t *testing.T, o clusterOptions) *testCluster {
	t.Helper()
	o.cp.AdvertiseAddress = vcluster.ServiceAddr.String()
	o.cp.KubeletAddressType = "InternalIP"
	tc := startClusterWith(t, o)
	if !strings.Contains(tc.Info().APIServerEndpoint, vcluster.ServiceAddr.String()) {
		t.Fatalf("the API server endpoint %s is not at %s", tc.Info().APIServerEndpoint, vcluster.ServiceAddr)
	}
	return tc
}

// rigHosts are the host's addresses of tc's API server and registry
// stand-in, which the rig forwards to.
func rigHosts(t *testing.T, tc *testCluster) (apiServer, registry netip.AddrPort, scheme string) {
	t.Helper()
	reg, err := url.Parse(tc.mirror)
	if err != nil {
		t.Fatal(err)
	}
	registry, err = netip.ParseAddrPort("127.0.0.1:" + reg.Port())
	if err != nil {
		t.Fatalf("registry stand-in %q: %v", tc.mirror, err)
	}
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(tc.Ports().APIServer)), registry, reg.Scheme
}

// rigNodeConfig is the NodeConfig joining tc from the rig: the registry
// stand-in at its virtual address.
func rigNodeConfig(t *testing.T, tc *testCluster) string {
	t.Helper()
	_, registry, scheme := rigHosts(t, tc)
	return joinNodeConfig(tc.Info(), scheme+"://"+vcluster.Virtual(registry).String())
}

// bootRig boots one node per NodeConfig on a virtual network, waits for
// every boot report, checks each node took its own address, IMDS,
// hostname and node name there, and routes the API server's egress proxy
// to each kubelet through the network's gateway.
// more are the test's own host services the nodes may reach.
func bootRig(t *testing.T, tc *testCluster, nodeConfigs []string, boots []vcluster.Boot, more ...vnet.Service) (*vcluster.Rig, []*rigNode) {
	t.Helper()
	specs := make([]vcluster.NodeSpec, len(nodeConfigs))
	for i, nc := range nodeConfigs {
		specs[i] = vcluster.NodeSpec{UserData: mimeUserData(nc)}
	}
	return bootRigSpecs(t, tc, specs, boots, more...)
}

// bootRigSpecs is bootRig with each node's spec: its source of user data
// (IMDS, a NoCloud seed, berth.userdata=) and its seed's files.
func bootRigSpecs(t *testing.T, tc *testCluster, specs []vcluster.NodeSpec, boots []vcluster.Boot, more ...vnet.Service) (*vcluster.Rig, []*rigNode) {
	t.Helper()
	dir := qemu.ImageDir(t)
	apiServer, registry, _ := rigHosts(t, tc)
	rig, err := vcluster.New(vcluster.Config{Nodes: specs, APIServer: apiServer, Registry: registry, More: more, Socket: vcluster.SocketIn(t.TempDir())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rig.Close() })

	nodes := make([]*rigNode, len(rig.Nodes))
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, vn := range rig.Nodes {
		nd := &rigNode{name: vn.Name, ip: vn.IP.String(), id: vn.InstanceID, srv: vn.IMDS}
		if i < len(boots) {
			nd.boot = boots[i]
		}
		nd.boot.Timeout = max(nd.boot.Timeout, clusterVMTimeout)
		nodes[i] = nd
		cfg, err := rig.QEMUConfig(dir, i, nd.boot)
		if err != nil {
			t.Fatal(err)
		}
		nd.vm = qemu.Start(t, cfg)
		wg.Add(1)
		safe.Go(slog.Default(), nd.name+" boot report", func() {
			nd.rep, errs[i] = nd.vm.Report(bootTimeout)
			wg.Done()
		}, func(p *safe.Panic) { errs[i] = p; wg.Done() })
	}
	wg.Wait()
	for i, nd := range nodes {
		if errors.Is(errs[i], qemu.ErrGuestStalled) {
			nd.vm = resetRigNode(t, rig, i, nd, errs[i], nd.name+"-reset")
			nd.rep, errs[i] = nd.vm.Report(bootTimeout)
		}
	}
	for i, nd := range nodes {
		if errs[i] != nil {
			t.Fatalf("%s: %v\nconsole:\n%s", nd.name, errs[i], nd.vm.ConsoleTail(40))
		}
		nd.nodeName = checkRigBoot(t, nd, rig.Nodes[i], rig.Net)
	}
	for _, nd := range nodes {
		if err := tc.RouteKubeletVia(nd.ip, net.JoinHostPort(nd.ip, fmt.Sprint(controlplane.KubeletPort)), rig.Net.DialContext); err != nil {
			t.Fatal(err)
		}
	}
	return rig, nodes
}

// resetRigNode resets node i, whose guest kernel hung (why), and powers
// it on again from its disks as name: what EC2's reboot action on a
// failed instance status check does for a real node (docs/operating.md).
// A hang under TCG is the emulator's or the guest kernel's, rare, and no
// rig test's subject, but it would leave a test of several guests (a
// rollout's quarter of an hour) to fail on it, and running such a test
// again does not fit in CI's time. Callers reset a node once per boot, so
// a hang that follows the test still fails it.
func resetRigNode(t *testing.T, rig *vcluster.Rig, i int, nd *rigNode, why error, name string) *qemu.VM {
	t.Helper()
	if err := nd.vm.Reset(); err != nil {
		t.Fatalf("%s: resetting it after its kernel hung: %v", nd.name, err)
	}
	cfg, err := rig.QEMUConfig(qemu.ImageDir(t), i, nd.boot)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Name = name
	t.Logf("%s: %v\n%s: reset from outside and powered on again as %s", nd.name, why, nd.name, name)
	return qemu.Start(t, cfg)
}

// clusterVMTimeout is the hard limit of a rig node's QEMU: the longest
// rig test's run.
const clusterVMTimeout = 25 * time.Minute

// checkRigBoot checks a rig node's boot report: its address by DHCP from
// the gateway, the gateway's DNS and the region's search domain (unless
// its seed's network-config set them: the caller checks those), its
// source of user data, and on EC2 IMDS's address, its own hostname and
// instance; it returns the node name.
func checkRigBoot(t *testing.T, nd *rigNode, vn *vcluster.Node, vnw *vnet.Network) string {
	t.Helper()
	if !reportOK(nd.rep) {
		t.Fatalf("%s: boot failed: %v", nd.name, nd.rep["error"])
	}
	var net network.Result
	section(t, nd.rep, "network", &net)
	if net.Mode == network.ModeDHCP {
		if !slices.Contains(net.Addresses, nd.ip+"/24") || net.Gateway != "192.168.127.1" || net.DHCPServer != "192.168.127.1" {
			t.Errorf("%s: network %+v: want %s/24 by DHCP from the gateway 192.168.127.1", nd.name, net, nd.ip)
		}
		if !slices.Contains(net.DNS, "192.168.127.1") || !slices.Contains(net.Search, vcluster.SearchDomain) {
			t.Errorf("%s: DNS %v search %v: want the gateway and the region's domain", nd.name, net.DNS, net.Search)
		}
	}
	var src report.Source
	section(t, nd.rep, "source", &src)
	if string(src.Use) != string(vn.Source) {
		t.Errorf("%s: user data from %q (%+v), want %s", nd.name, src.Use, src.Entries, vn.Source)
	}
	if vn.Source != vcluster.SourceIMDS {
		checkOffEC2Boot(t, nd, vn, vnw, src)
		var pl report.Plan
		section(t, nd.rep, "plan", &pl)
		if pl.NodeName != vn.Hostname {
			t.Errorf("%s: node name %q, want %s", nd.name, pl.NodeName, vn.Hostname)
		}
		return pl.NodeName
	}
	if src.EC2.Verdict != platform.Yes || src.EC2.InstanceID != nd.id {
		t.Errorf("%s: DMI verdict %+v: want EC2, instance %s", nd.name, src.EC2, nd.id)
	}
	var c report.Config
	section(t, nd.rep, "config", &c)
	if c.IMDS != "http://169.254.169.254" {
		t.Errorf("%s: config.imds = %q, want EC2's http://169.254.169.254", nd.name, c.IMDS)
	}
	if c.Hostname != vn.Hostname || c.HostnameSource != "imds" {
		t.Errorf("%s: hostname %q from %q, want %s from its own IMDS", nd.name, c.Hostname, c.HostnameSource, vn.Hostname)
	}
	saidID := false
	for _, l := range nd.vm.Lines() {
		saidID = saidID || strings.Contains(l.Text, "id="+nd.id)
	}
	if !saidID {
		t.Errorf("%s: the console never names instance %s (its own, not another node's)", nd.name, nd.id)
	}
	if len(nd.srv.Requests()) == 0 {
		t.Errorf("%s: its IMDS stand-in saw no request", nd.name)
	}
	var pl report.Plan
	section(t, nd.rep, "plan", &pl)
	if pl.NodeName != vn.Hostname {
		t.Errorf("%s: node name %q, want %s", nd.name, pl.NodeName, vn.Hostname)
	}
	figure(t, "%s on the virtual network: DHCP %.0f ms, network phase %.0f ms", nd.name, net.Steps.DHCP, net.Steps.Total)
	return pl.NodeName
}

// powerOffRig presses every node's power button at once and waits for
// each to power off in order (kubelet, pods, containerd).
func powerOffRig(t *testing.T, nodes []*rigNode) {
	t.Helper()
	for _, nd := range nodes {
		if err := nd.vm.PowerDown(); err != nil {
			t.Errorf("%s: power-off: %v", nd.name, err)
		}
	}
	for _, nd := range nodes {
		if err := nd.vm.WaitExit(powerOffBound); err != nil {
			t.Errorf("%s: %v", nd.name, err)
		}
	}
}
