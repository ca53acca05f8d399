package qemutests

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/qemu-tests/qemu"
)

// netfilterStep is one thing an add-on does to the host's netfilter or
// links, and the modules the kernel must have loaded for it through berth's
// /sbin/modprobe (nothing preloads them).
type netfilterStep struct {
	what string
	cmd  string
	mods []string
}

var netfilterSteps = []netfilterStep{
	// kube-proxy, iptables mode (iptables-nft: rules that nft cannot say
	// natively go through nft_compat to the xt_ modules).
	{"kube-proxy's random endpoint choice", "iptables -t nat -N BT && iptables -t nat -A BT -m statistic --mode random --probability 0.5 -j RETURN",
		[]string{"nf_tables", "nft_compat", "xt_statistic"}},
	{"kube-proxy's local-address match", "iptables -t nat -A BT -m addrtype --dst-type LOCAL -j RETURN", []string{"xt_addrtype"}},
	{"the VPC CNI's connmark", "iptables -t mangle -A PREROUTING -m connmark --mark 0x80/0x80 -j CONNMARK --restore-mark --mask 0x80", []string{"xt_connmark"}},
	{"node ports by multiport", "iptables -t nat -A BT -p tcp -m multiport --dports 80,443 -j RETURN", []string{"xt_multiport"}},
	// A Service's sessionAffinity: ClientIP, as kube-proxy writes it.
	{"kube-proxy's ClientIP session affinity", "iptables -t nat -A BT -m recent --name KUBE-SEP-BT --rcheck --seconds 10800 --reap -j RETURN && " +
		"iptables -t nat -A BT -m recent --name KUBE-SEP-BT --set -j RETURN", []string{"xt_recent"}},
	{"ipvs-mode ipsets", "ipset create bt hash:ip,port && iptables -t nat -A BT -m set --match-set bt dst,dst -j RETURN",
		[]string{"ip_set", "ip_set_hash_ipport", "xt_set"}},
	{"the VPC CNI's SNAT --random-fully and a DNAT", "iptables -t nat -A BT -j SNAT --to-source 10.0.2.15 --random-fully && " +
		"iptables -t nat -A BT -p tcp --dport 80 -j DNAT --to-destination 10.0.2.15:8080", []string{"xt_nat"}},
	{"Cilium's NOTRACK and TPROXY, socket match", "iptables -t raw -A PREROUTING -p udp --dport 8472 -j NOTRACK && " +
		"iptables -t mangle -A PREROUTING -m socket --transparent -j MARK --set-mark 0x200 && " +
		"iptables -t mangle -A PREROUTING -p tcp -m mark --mark 0x200 -j TPROXY --tproxy-mark 0x200 --on-port 4000",
		[]string{"xt_CT", "xt_socket", "xt_TPROXY", "xt_mark"}},
	{"IPv6 masquerade", "ip6tables -t nat -A POSTROUTING -o eth0 -m comment --comment berth -j MASQUERADE && ip6tables -t nat -S POSTROUTING",
		[]string{"nft_chain_nat", "xt_MASQUERADE"}},
	{"the legacy back end", "iptables-legacy -L -n", []string{"ip_tables", "iptable_filter"}},
	// kube-proxy, nftables mode.
	{"an nftables nat table with ct, fib, numgen and masquerade",
		"nft add table ip bt && nft add chain ip bt post '{ type nat hook postrouting priority 100 ; }' && " +
			"nft add rule ip bt post ct state established accept && nft add rule ip bt post fib daddr type local accept && " +
			"nft add rule ip bt post numgen random mod 2 0 accept && nft add rule ip bt post masquerade && nft list table ip bt",
		[]string{"nft_ct", "nft_fib_ipv4", "nft_numgen", "nft_masq", "nft_chain_nat"}},
	// Links: kube-ipvs0, Cilium's and Calico's overlays.
	{"a dummy link", "ip link add d0 type dummy", []string{"dummy"}},
	{"a vxlan link", "ip link add vx0 type vxlan id 42 dstport 4789 dev eth0", []string{"vxlan"}},
}

// procModules is the names in /proc/modules.
func procModules(t *testing.T, vm *qemu.VM) []string {
	t.Helper()
	out, err := vm.Shell("cat /proc/modules", shellTimeout)
	if err != nil {
		t.Fatal(err)
	}
	var mods []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			mods = append(mods, f[0])
		}
	}
	return mods
}

// netfilterOnDemand (TestJoin): a node joined to a cluster has the host's iptables with FORWARD's policy
// ACCEPT and kubelet's hint chains, and what kube-proxy (its three modes),
// the VPC CNI, Cilium and Calico do to netfilter and links works with no
// module preloaded: the kernel asks berth's /sbin/modprobe for each module
// by its alias.
func netfilterOnDemand(t *testing.T, cluster *testCluster, vm *qemu.VM, rep map[string]any) {
	atBoot := reportModules(t, rep)
	a := api{c: cluster.Client(), base: cluster.Info().HostEndpoint}
	waitFor(t, vm, "node registered", joinTimeout, func() (bool, string) {
		err := a.do("GET", "/api/v1/nodes/ip-10-0-2-15.us-west-2.compute.internal", nil, nil)
		return err == nil, fmt.Sprint(err)
	})

	var svc report.Services
	section(t, rep, "services", &svc)
	if len(svc.ForwardPolicy) != 2 {
		t.Errorf("report's services.forwardPolicy: %+v, want iptables and ip6tables", svc.ForwardPolicy)
	}
	for _, r := range svc.ForwardPolicy {
		if !r.OK {
			t.Errorf("report: %s did not set FORWARD ACCEPT: %s", r.Tool, r.Error)
		}
		figure(t, "%s -P FORWARD ACCEPT at boot: %d ms", r.Tool, r.DurationMs)
	}
	for _, tool := range []string{"iptables", "ip6tables"} {
		out, err := vm.Shell(tool+" -S FORWARD", shellTimeout)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "-P FORWARD ACCEPT") {
			t.Errorf("%s -S FORWARD:\n%s", tool, out)
		}
	}

	// kubelet finds iptables in PATH and keeps its chains, by which the
	// add-ons' iptables wrappers choose the host's back end (nft).
	hint := waitFor(t, vm, "kubelet's KUBE-IPTABLES-HINT and KUBE-KUBELET-CANARY", 2*time.Minute, func() (bool, string) {
		out, err := vm.Shell("iptables-nft -t mangle -S; ip6tables-nft -t mangle -S", shellTimeout)
		if err != nil {
			return false, err.Error()
		}
		return strings.Count(out, "-N KUBE-IPTABLES-HINT") == 2 && strings.Count(out, "-N KUBE-KUBELET-CANARY") == 2, out
	})
	figure(t, "kubelet's iptables hint chains present %s after the boot report", hint.Round(time.Second))

	for _, s := range netfilterSteps {
		before := procModules(t, vm)
		start := time.Now()
		out, err := vm.Shell(s.cmd, shellTimeout)
		took := time.Since(start)
		if err != nil {
			kmsg, _ := vm.Shell("dmesg | grep -i modprobe | tail -n 20", shellTimeout)
			t.Errorf("%s: %v\nberth modprobe in the kernel log:\n%s", s.what, err, kmsg)
			continue
		}
		after := procModules(t, vm)
		var loaded []string
		for _, m := range s.mods {
			switch {
			case slices.Contains(atBoot, m):
				t.Errorf("%s: %s was loaded at boot; it must load on demand", s.what, m)
			case !slices.Contains(after, m):
				t.Errorf("%s: %s is not in /proc/modules after it\n%s", s.what, m, out)
			case !slices.Contains(before, m):
				loaded = append(loaded, m)
			}
		}
		figure(t, "%s: %.1fs, loaded on demand %v", s.what, took.Seconds(), loaded)
	}
}
