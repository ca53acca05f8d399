package qemutests

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/config/platform"
	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/network"
	"github.com/berth-node/berth/qemu-tests/qemu"
	"github.com/berth-node/berth/qemu-tests/seedimage"
	"github.com/berth-node/berth/qemu-tests/vcluster"
	"github.com/berth-node/berth/qemu-tests/vnet"
)

// noCloudStatic is the network-config (version 2, netplan's form) the
// static node's seed holds: an address the rig's DHCP does not hand out,
// the default route and one more through the gateway, the gateway's DNS
// with a search domain DHCP does not give, and an MTU.
const (
	noCloudStaticIP    = "192.168.127.60"
	noCloudStaticRoute = "10.123.0.0/16"
	noCloudSearch      = "lab.berth.test"
	noCloudStatic      = `version: 2
ethernets:
  lan:
    match:
      macaddress: "%s"
    set-name: eth0
    dhcp4: false
    addresses: [` + noCloudStaticIP + `/24]
    mtu: 1400
    routes:
      - to: default
        via: 192.168.127.1
      - to: ` + noCloudStaticRoute + `
        via: 192.168.127.1
    nameservers:
      addresses: [192.168.127.1]
      search: [` + noCloudSearch + `]
`
)

// TestNoCloud boots three machines that are not EC2 instances (QEMU's own
// DMI tables, and no IMDS anywhere on the network: the rig's gateway
// records any request to 169.254.169.254) and joins each to one control
// plane from its user data found elsewhere:
//   - node-a boots from the disk image through OVMF with Secure Boot, as a
//     bare-metal appliance does, with a vfat seed labelled cidata on
//     virtio-blk whose network-config gives it a static address, routes,
//     DNS and MTU;
//   - node-b boots the image's kernel with an iso9660 seed on a SCSI CD
//     drive (virtio-scsi), as virt-install and Proxmox attach one, and
//     takes DHCP;
//   - node-c has no seed and is told berth.userdata=http://... on its
//     command line; the rig serves its user data, which names the node
//     (kubelet's --hostname-override).
//
// Each is named by its seed's meta-data (or its override), has no provider
// ID, and goes Ready. Before them, two seeds that are wrong stop the boot
// with the file and the key named on the console: a network-config berth
// cannot apply, and a seed without user-data.
func TestNoCloud(t *testing.T) {
	dir := qemu.ImageDir(t)
	badSeeds(t, dir)

	tc := startRigControlPlane(t, clusterOptions{})
	nc := rigNodeConfig(t, tc)
	a := api{c: tc.Client(), base: tc.Info().HostEndpoint}
	// node-c's user data names it: with no meta-data, nothing else does.
	if strings.Contains(nc, "kubelet:") || !strings.HasSuffix(nc, "\n") {
		t.Fatalf("the rig's NodeConfig has a kubelet section already; add --hostname-override to it:\n%s", nc)
	}
	ncURL := nc + "  kubelet:\n    flags:\n      - --hostname-override=node-c\n"
	img, res := testDiskWith(t, dir, "console=ttyS0 quiet berth.onfail=halt berth.debugshell=ttyS1")
	if strings.Contains(res.Cmdline, "berth.imds") {
		t.Fatalf("the disk's UKI command line names berth.imds: %q", res.Cmdline)
	}
	disk := copyDisk(t, img, res.Layout.Size()+4<<30)
	vars := enrolledVars(t, qemu.ImageManifest(t, dir).Arch, disk)
	macA := vcluster.NodeAt(0).MAC.String()
	specs := []vcluster.NodeSpec{
		{UserData: mimeUserData(nc), Source: vcluster.SourceSeed, SeedFS: seedimage.VFAT,
			NetworkConfig: fmt.Appendf(nil, noCloudStatic, macA), IP: netip.MustParseAddr(noCloudStaticIP)},
		{UserData: mimeUserData(nc), Source: vcluster.SourceSeed, SeedFS: seedimage.ISO9660},
		{UserData: mimeUserData(ncURL), Source: vcluster.SourceURL},
	}
	start := time.Now()
	rig, nodes := bootRigSpecs(t, tc, specs, []vcluster.Boot{{Disk: &vcluster.DiskBoot{Path: disk, Vars: vars}}})
	figure(t, "QEMU start to the three off-EC2 nodes' boot reports: %.1f s", time.Since(start).Seconds())

	// node-a's network is its seed's, not DHCP's.
	var net network.Result
	section(t, nodes[0].rep, "network", &net)
	routes := fmt.Sprint(net.Routes)
	if net.Mode != network.ModeStatic || net.DHCPServer != "" || !slices.Contains(net.Addresses, noCloudStaticIP+"/24") ||
		net.Gateway != "192.168.127.1" || !strings.Contains(routes, noCloudStaticRoute) || net.MTU != 1400 ||
		!slices.Contains(net.DNS, "192.168.127.1") || !slices.Equal(net.Search, []string{noCloudSearch}) {
		t.Errorf("node-a's network %+v: want its seed's static %s/24, gateway, route to %s, DNS, search %s and MTU 1400, no DHCP",
			net, noCloudStaticIP, noCloudStaticRoute, noCloudSearch)
	}
	if out, err := nodes[0].vm.Shell("cat /proc/net/route; cat /sys/class/net/eth0/mtu; cat /etc/resolv.conf", shellTimeout); err != nil ||
		!strings.Contains(out, "00007B0A") || !strings.Contains(out, "1400") || !strings.Contains(out, "search "+noCloudSearch) {
		t.Errorf("node-a's kernel routes, MTU and resolv.conf: %v\n%s\nwant the route to %s, MTU 1400, search %s", err, out, noCloudStaticRoute, noCloudSearch)
	}

	for _, nd := range nodes {
		waitNodeReady(t, nd.vm, a, nd.nodeName)
		o, err := getNode(a, nd.nodeName)
		if err != nil {
			t.Fatal(err)
		}
		if o.Spec.ProviderID != "" {
			t.Errorf("%s: providerID %q: a machine off EC2 has none", nd.name, o.Spec.ProviderID)
		}
		if !slices.ContainsFunc(o.Status.Addresses, func(ad nodeAddress) bool { return ad.Type == "InternalIP" && ad.Address == nd.ip }) {
			t.Errorf("%s: addresses %+v: want InternalIP %s", nd.name, o.Status.Addresses, nd.ip)
		}
		vmStart := time.Now().Add(-nd.vm.Uptime())
		for _, cd := range o.Status.Conditions {
			if cd.Type == "Ready" && cd.Status == "True" {
				end, _ := field(nd.rep, "endMs")
				figure(t, "%s (%s) QEMU start to Ready: %.0f s (boot report at %v ms after the kernel)", nd.name,
					rig.Nodes[slices.Index(nodes, nd)].Source, cd.LastTransitionTime.Sub(vmStart).Seconds(), end)
			}
		}
	}
	// berth.userdata=https trusts the image's CA bundle (Go's system pool).
	if out, err := nodes[2].vm.Shell("grep -c 'BEGIN CERTIFICATE' /etc/ssl/certs/ca-certificates.crt", shellTimeout); err != nil {
		t.Errorf("node-c: the image's CA bundle: %v %q", err, out)
	} else if n, _ := strconv.Atoi(strings.TrimSpace(lastLine(out))); n < 100 {
		t.Errorf("node-c: /etc/ssl/certs/ca-certificates.crt holds %q certificates: want Debian's bundle, over 100", lastLine(out))
	}
	if m := rig.Net.IMDSMisses(); len(m) > 0 {
		t.Errorf("machines off EC2 asked 169.254.169.254: %q", m)
	}
}

// checkOffEC2Boot checks a rig node that is not an EC2 instance: DMI said
// so, IMDS was neither asked nor waited for, and the source phase found
// its seed (with its meta-data) or its berth.userdata=.
func checkOffEC2Boot(t *testing.T, nd *rigNode, vn *vcluster.Node, vnw *vnet.Network, src report.Source) {
	t.Helper()
	if src.EC2.Verdict != platform.No {
		t.Errorf("%s: DMI verdict %+v: QEMU's DMI is not EC2's", nd.name, src.EC2)
	}
	for _, e := range src.Entries {
		if e.Source == "imds" && e.Used {
			t.Errorf("%s: IMDS used: %+v", nd.name, e)
		}
	}
	var c report.Config
	section(t, nd.rep, "config", &c)
	if c.IMDS != "off" || len(c.Calls) > 0 {
		t.Errorf("%s: config.imds %q with %d calls: off EC2 berth asks no IMDS", nd.name, c.IMDS, len(c.Calls))
	}
	switch vn.Source {
	case vcluster.SourceSeed:
		if src.Seed == nil || string(src.Seed.FS) != string(vn.SeedFS) || src.Seed.Label != seedimage.Label ||
			src.Seed.InstanceID != vn.InstanceID || src.Seed.LocalHostname != vn.Name {
			t.Errorf("%s: seed %+v: want its %s seed labelled %s, instance %s, hostname %s", nd.name, src.Seed, vn.SeedFS, seedimage.Label, vn.InstanceID, vn.Name)
		}
		if c.Hostname != vn.Name || c.HostnameSource != "nocloud meta-data" {
			t.Errorf("%s: hostname %q from %q, want %s from its seed's meta-data", nd.name, c.Hostname, c.HostnameSource, vn.Name)
		}
	case vcluster.SourceURL:
		if c.UserDataURL != vn.UserDataURL || len(c.UserDataURLCalls) == 0 {
			t.Errorf("%s: user data URL %q (%d calls), want %s", nd.name, c.UserDataURL, len(c.UserDataURLCalls), vn.UserDataURL)
		}
	}
	for _, m := range vnw.IMDSMisses() {
		if strings.HasPrefix(m, nd.ip+":") {
			t.Errorf("%s asked IMDS, which off EC2 it must not: %s", nd.name, m)
		}
	}
}

// badSeeds boots the image twice with a seed berth must refuse: a
// network-config with a key it cannot apply (a bond) and a wrong address,
// and a seed with no user-data. Each boot stops in the source phase, before
// the network, with a console line per problem naming the seed's device,
// the file and the key, and the FATAL line; the node halts
// (berth.onfail=halt) with nothing started.
func badSeeds(t *testing.T, dir string) {
	t.Helper()
	for _, sc := range []struct {
		name  string
		files map[string][]byte
		want  []string
	}{
		{"bad network-config", map[string][]byte{
			"user-data": []byte("#!/bin/bash\n/etc/eks/bootstrap.sh x\n"),
			"meta-data": []byte("instance-id: iid-bad\n"),
			"network-config": []byte("version: 2\nethernets:\n  eth0:\n    addresses: [192.168.1.300/24]\n" +
				"bonds:\n  bond0:\n    interfaces: [eth0]\n"),
		}, []string{"network-config", "ethernets.eth0.addresses[0]", "bonds"}},
		{"no user-data", map[string][]byte{
			"meta-data": []byte("instance-id: iid-bad\n"),
		}, []string{"user-data"}},
	} {
		t.Run(strings.ReplaceAll(sc.name, " ", "-"), func(t *testing.T) {
			seed := t.TempDir() + "/seed.img"
			if err := seedimage.Write(t.Context(), seed, seedimage.VFAT, sc.files); err != nil {
				t.Fatal(err)
			}
			cfg := qemu.ImageConfig(dir, "berth.onfail=halt berth.imds=")
			// No berth.imds at all: the machine is told apart by DMI.
			cfg.Append = strings.Join(slices.DeleteFunc(strings.Fields(cfg.Append), func(w string) bool {
				return strings.HasPrefix(w, "berth.imds=")
			}), " ")
			cfg.Disks = []qemu.Disk{{Path: seed, Interface: "virtio", Serial: "cidata"}}
			cfg.NICs = []qemu.NIC{{}}
			cfg.Timeout = 5 * time.Minute
			vm := qemu.Start(t, cfg)
			_, fl, _, err := lineAfter(vm, 0, reFatal, bootTimeout)
			if err != nil {
				t.Fatalf("no FATAL line: %v\n%s", err, vm.ConsoleTail(30))
			}
			if !strings.Contains(fl.Text, "source: ") || !strings.Contains(fl.Text, "/dev/vd") {
				t.Errorf("FATAL line %q: want the source phase and the seed's device", fl.Text)
			}
			errs := linesMatching(vm, 0, regexp.MustCompile(`NoCloud seed /dev/vd`))
			text := fl.Text
			for _, l := range errs {
				text += "\n" + l.Text
			}
			for _, w := range sc.want {
				if !strings.Contains(text, w) {
					t.Errorf("the console does not name %q:\n%s", w, text)
				}
			}
			if l := linesMatching(vm, 0, regexp.MustCompile(`phase=network|network up|services: service started`)); len(l) > 0 {
				t.Errorf("the boot went on past the source phase: %q", l[0].Text)
			}
			if _, err := vm.ExpectLine(reSystemHalts, time.Minute); err != nil {
				t.Errorf("the node did not halt: %v", err)
			}
			t.Logf("console:\n%s", text)
		})
	}
}
