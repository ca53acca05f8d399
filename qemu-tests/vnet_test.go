package qemutests

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/internal/safe"
	"github.com/berth-node/berth/network"
	"github.com/berth-node/berth/qemu-tests/controlplane"
	"github.com/berth-node/berth/qemu-tests/imdsserver"
	"github.com/berth-node/berth/qemu-tests/qemu"
	"github.com/berth-node/berth/qemu-tests/vnet"
)

// Two nodes on one virtual network (package vnet), booted with the
// kernel command line they have in production: no berth.imds. Each takes
// its own address by DHCP, reads its own instance's metadata and user
// data at 169.254.169.254, and sets its clock from 169.254.169.123
// (node-a's RTC is an hour behind: the step proves the answer came from
// there). Both join the control plane, reached at its virtual address on
// the subnet, and go Ready with the CNI DaemonSet pulled from the
// registry stand-in there; each runs a pod, whose log the API server
// reads through its egress proxy, which dials each kubelet by its node
// IP through the network's gateway (as nodes/<n>/proxy does). The nodes
// reach each other directly; a connection to an address outside the
// machine is refused at once, and the network records it.
func TestVirtualNetworkTwoNodes(t *testing.T) {
	dir := qemu.ImageDir(t)
	// The host's services, as the nodes see them: one address on the
	// subnet, as a VPC endpoint would be.
	svcAddr := netip.MustParseAddr("192.168.127.254")
	tc := startClusterWith(t, clusterOptions{cp: controlplane.Options{AdvertiseAddress: svcAddr.String(), KubeletAddressType: "InternalIP"}})
	info := tc.Info()
	reg, err := url.Parse(tc.mirror)
	if err != nil {
		t.Fatal(err)
	}
	regPort, err := netip.ParseAddrPort("127.0.0.1:" + reg.Port())
	if err != nil {
		t.Fatalf("registry stand-in %q: %v", tc.mirror, err)
	}
	apiPort := uint16(tc.Ports().APIServer)
	services := []vnet.Service{
		{Name: "kube-apiserver", Virtual: netip.AddrPortFrom(svcAddr, apiPort), Host: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), apiPort)},
		{Name: "registry", Virtual: netip.AddrPortFrom(svcAddr, regPort.Port()), Host: regPort},
	}
	if !strings.Contains(info.APIServerEndpoint, svcAddr.String()) {
		t.Fatalf("the API server endpoint %s is not at %s", info.APIServerEndpoint, svcAddr)
	}
	userData := mimeUserData(joinNodeConfig(info, reg.Scheme+"://"+netip.AddrPortFrom(svcAddr, regPort.Port()).String()))

	type node struct {
		name, ip, id string
		mac          net.HardwareAddr
		rtcBehind    time.Duration
		srv          *imdsserver.Server
		vm           *qemu.VM
		rep          map[string]any
		nodeName     string
	}
	nodes := []*node{
		{name: "node-a", ip: "192.168.127.10", id: "i-0aaaaaaaaaaaaaaa1", mac: net.HardwareAddr{0x52, 0x54, 0x00, 0xb3, 0x27, 0x0a}, rtcBehind: time.Hour},
		{name: "node-b", ip: "192.168.127.11", id: "i-0bbbbbbbbbbbbbbb2", mac: net.HardwareAddr{0x52, 0x54, 0x00, 0xb3, 0x27, 0x0b}},
	}
	var cfgNodes []vnet.Node
	for _, nd := range nodes {
		in := imdsserver.DefaultInstance()
		in.InstanceID = nd.id
		in.LocalIPv4 = nd.ip
		in.LocalHostname = "ip-" + strings.ReplaceAll(nd.ip, ".", "-") + ".us-west-2.compute.internal"
		in.MAC = nd.mac.String()
		srv, err := imdsserver.New(imdsserver.Config{Instance: in, UserData: userData})
		if err != nil {
			t.Fatal(err)
		}
		nd.srv = srv
		cfgNodes = append(cfgNodes, vnet.Node{Name: nd.name, MAC: nd.mac, IP: netip.MustParseAddr(nd.ip), IMDS: srv})
	}
	n, err := vnet.New(vnet.Config{Nodes: cfgNodes, Services: services, SearchDomain: "us-west-2.compute.internal"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	sock := filepath.Join(t.TempDir(), "vnet.sock")
	if err := n.Listen(sock); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	qemuStart := time.Now()
	for i, nd := range nodes {
		cfg := qemu.ImageConfig(dir, "")
		cfg.Name = nd.name
		// ImageConfig turns IMDS off for QEMU's user network, which has
		// none; this network has one at EC2's address.
		cfg.Append = strings.Join(slices.DeleteFunc(strings.Fields(cfg.Append), func(w string) bool {
			return strings.HasPrefix(w, "berth.imds=")
		}), " ")
		cfg.Shell = true
		cfg.MemoryMB = 2048
		// One vCPU each: two guests' TCG threads then match the CI host's
		// two cores instead of fighting over them four to two.
		cfg.CPUs = 1
		cfg.Timeout = 20 * time.Minute
		cfg.NICs = []qemu.NIC{{MAC: nd.mac.String(), Stream: sock}}
		if nd.rtcBehind > 0 {
			cfg.Extra = append(cfg.Extra, "-rtc", "base="+time.Now().UTC().Add(-nd.rtcBehind).Format("2006-01-02T15:04:05"))
		}
		if strings.Contains(cfg.Append, "berth.imds") {
			t.Fatalf("the image's command line names berth.imds (%q): this test boots as production does", cfg.Append)
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
		if errs[i] != nil {
			t.Fatalf("%s: %v\nconsole:\n%s", nd.name, errs[i], nd.vm.ConsoleTail(40))
		}
		if !reportOK(nd.rep) {
			t.Fatalf("%s: boot failed: %v", nd.name, nd.rep["error"])
		}
		var net network.Result
		section(t, nd.rep, "network", &net)
		if !slices.Contains(net.Addresses, nd.ip+"/24") || net.Gateway != "192.168.127.1" || net.DHCPServer != "192.168.127.1" {
			t.Errorf("%s: network %+v: want %s/24 by DHCP from the gateway 192.168.127.1", nd.name, net, nd.ip)
		}
		if !slices.Contains(net.DNS, "192.168.127.1") || !slices.Contains(net.Search, "us-west-2.compute.internal") {
			t.Errorf("%s: DNS %v search %v: want the gateway and the region's domain", nd.name, net.DNS, net.Search)
		}
		var c report.Config
		section(t, nd.rep, "config", &c)
		if c.IMDS != "http://169.254.169.254" {
			t.Errorf("%s: config.imds = %q, want EC2's http://169.254.169.254", nd.name, c.IMDS)
		}
		wantHost := "ip-" + strings.ReplaceAll(nd.ip, ".", "-") + ".us-west-2.compute.internal"
		if c.Hostname != wantHost || c.HostnameSource != "imds" {
			t.Errorf("%s: hostname %q from %q, want %s from its own IMDS", nd.name, c.Hostname, c.HostnameSource, wantHost)
		}
		saidID := false
		for _, l := range nd.vm.Lines() {
			saidID = saidID || strings.Contains(l.Text, "id="+nd.id)
		}
		if !saidID {
			t.Errorf("%s: the console never names instance %s (its own, not the other node's)", nd.name, nd.id)
		}
		if len(nd.srv.Requests()) == 0 {
			t.Errorf("%s: its IMDS stand-in saw no request", nd.name)
		}
		var pl report.Plan
		section(t, nd.rep, "plan", &pl)
		if pl.NodeName != wantHost {
			t.Errorf("%s: node name %q, want %s", nd.name, pl.NodeName, wantHost)
		}
		nd.nodeName = pl.NodeName
		figure(t, "%s on the virtual network: DHCP %.0f ms, network phase %.0f ms", nd.name, net.Steps.DHCP, net.Steps.Total)
	}

	kapi := api{c: tc.Client(), base: info.HostEndpoint}
	for _, nd := range nodes {
		if err := tc.RouteKubeletVia(nd.ip, net.JoinHostPort(nd.ip, fmt.Sprint(controlplane.KubeletPort)), n.DialContext); err != nil {
			t.Fatal(err)
		}
	}
	for _, nd := range nodes {
		waitNodeReady(t, nd.vm, kapi, nd.nodeName)
		if err := kapi.do("POST", "/api/v1/namespaces/default/pods", demoPod("default", "demo-"+nd.name, nd.nodeName), nil); err != nil {
			t.Fatal(err)
		}
	}
	figure(t, "QEMU start to both nodes Ready on the virtual network: %.1f s (wall, two TCG guests of one vCPU each)", time.Since(qemuStart).Seconds())
	for _, nd := range nodes {
		waitPodRunning(t, nd.vm, kapi, "demo-"+nd.name)
		var p struct {
			Status struct {
				HostIP string `json:"hostIP"`
			} `json:"status"`
		}
		if err := kapi.do("GET", "/api/v1/namespaces/default/pods/demo-"+nd.name, nil, &p); err != nil {
			t.Fatal(err)
		}
		if p.Status.HostIP != nd.ip {
			t.Errorf("pod demo-%s: hostIP %q, want its node's %s", nd.name, p.Status.HostIP, nd.ip)
		}
	}
	t.Run("kubelets through the gateway", func(t *testing.T) {
		for _, nd := range nodes {
			// The pod's log and the node proxy: the API server to the
			// kubelet, through the egress proxy and the gateway's stack.
			waitFor(t, nd.vm, "pod demo-"+nd.name+"'s log", time.Minute, func() (bool, string) {
				resp, err := kapi.c.Get(kapi.base + "/api/v1/namespaces/default/pods/demo-" + nd.name + "/log")
				if err != nil {
					return false, err.Error()
				}
				defer resp.Body.Close()
				var b strings.Builder
				_, _ = fmt.Fprint(&b, resp.Status, ": ")
				buf := make([]byte, 4096)
				k, _ := resp.Body.Read(buf)
				b.Write(buf[:k])
				return resp.StatusCode == 200 && strings.Contains(b.String(), "berth demo pod"), b.String()
			})
			resp, err := kapi.c.Get(kapi.base + "/api/v1/nodes/" + nd.nodeName + "/proxy/healthz")
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 256)
			k, _ := resp.Body.Read(buf)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(buf[:k]) != "ok" {
				t.Errorf("nodes/%s/proxy/healthz: %s %q", nd.nodeName, resp.Status, buf[:k])
			}
		}
	})

	a, b := nodes[0], nodes[1]
	t.Run("time from 169.254.169.123", func(t *testing.T) {
		deadline := time.Now().Add(time.Minute)
		for {
			out, err := a.vm.Shell("cat /run/berth/boot.json", shellTimeout)
			if err != nil {
				t.Fatal(err)
			}
			var rep map[string]any
			if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &rep); err != nil {
				t.Fatalf("boot.json: %v", err)
			}
			ts, _ := rep["time"].(map[string]any)
			if ts != nil && ts["stepped"] == true {
				if ts["server"] != vnet.TimeSyncAddr.String() {
					t.Errorf("time section %v: want server %s", ts, vnet.TimeSyncAddr)
				}
				off, _ := ts["firstOffsetMs"].(float64)
				if d := time.Duration(off * float64(time.Millisecond)); (d - a.rtcBehind).Abs() > 5*time.Second {
					t.Errorf("first offset %.0f ms, want %s ± 5 s", off, a.rtcBehind)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no step within a minute of the report; time section: %v", ts)
			}
			time.Sleep(2 * time.Second)
		}
	})

	t.Run("node to node", func(t *testing.T) {
		out, err := a.vm.Shell("ping -c 2 -W 5 "+b.ip+" && echo PING-OK", shellTimeout)
		if err != nil || !strings.Contains(out, "PING-OK") {
			t.Errorf("node-a pinging node-b (%s): %v\n%s", b.ip, err, out)
		}
	})

	t.Run("outside refused", func(t *testing.T) {
		start := time.Now()
		// busybox's nc: Debian's busybox 1.35 wget segfaults on a refused
		// connection.
		out, err := a.vm.Shell("nc 203.0.113.7 80 </dev/null 2>&1; echo rc=$?", shellTimeout)
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "refused") || strings.Contains(out, "rc=0") {
			t.Errorf("node-a to 203.0.113.7:80: %q: want connection refused", out)
		}
		if took > 15*time.Second {
			t.Errorf("the refusal took %v: want a reset, not a timeout", took.Round(time.Second))
		}
		refused, _ := n.Refused()
		var seen []string
		for _, r := range refused {
			seen = append(seen, r.String())
		}
		if !slices.Contains(seen, fmt.Sprintf("tcp %s -> 203.0.113.7:80", a.ip)) {
			t.Errorf("the network's refusals %q lack node-a's connection to 203.0.113.7:80", seen)
		}
	})

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
