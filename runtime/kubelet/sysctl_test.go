package kubelet

import (
	"slices"
	"strings"
	"testing"
)

func TestSysctls(t *testing.T) {
	for _, ipv6 := range []bool{false, true} {
		s := Sysctls(ipv6)
		if !slices.IsSortedFunc(s, func(a, b Sysctl) int { return strings.Compare(a.Key, b.Key) }) {
			t.Errorf("ipv6=%v: not sorted by key", ipv6)
		}
		got := map[string]Sysctl{}
		for _, x := range s {
			if _, dup := got[x.Key]; dup {
				t.Errorf("ipv6=%v: %s twice", ipv6, x.Key)
			}
			got[x.Key] = x
		}
		// kubelet's setupKernelTunables refuses to start without these
		// (protectKernelDefaults), so a failure to write them is fatal.
		for k, v := range map[string]string{
			"vm.overcommit_memory":      "1",
			"vm.panic_on_oom":           "0",
			"kernel.panic":              "10",
			"kernel.panic_on_oops":      "1",
			"kernel.keys.root_maxkeys":  "1000000",
			"kernel.keys.root_maxbytes": "25000000",
			"net.ipv4.ip_forward":       "1",
		} {
			if x := got[k]; x.Value != v || !x.Required {
				t.Errorf("ipv6=%v: %s = %+v, want %s, required", ipv6, k, x, v)
			}
		}
		// The image boots with both panics armed; at rest they are off,
		// and not fatal to write (the update agent arms them on a trial).
		for _, k := range []string{"kernel.hung_task_panic", "kernel.softlockup_panic"} {
			if x := got[k]; x.Value != "0" || x.Required {
				t.Errorf("ipv6=%v: %s = %+v, want 0, not required", ipv6, k, x)
			}
		}
		if x, ok := got["net.ipv6.conf.all.forwarding"]; ok != ipv6 || (ok && !x.Required) {
			t.Errorf("ipv6=%v: net.ipv6.conf.all.forwarding %+v present=%v", ipv6, x, ok)
		}
		// Keys that only exist once their module is in.
		if got["net.netfilter.nf_conntrack_max"].Module != "nf_conntrack" ||
			got["net.bridge.bridge-nf-call-iptables"].Module != "br_netfilter" ||
			got["net.bridge.bridge-nf-call-ip6tables"].Module != "br_netfilter" {
			t.Errorf("ipv6=%v: module keys %+v", ipv6, s)
		}
		if m := SysctlModules(s); !slices.Equal(m, []string{"br_netfilter", "nf_conntrack"}) {
			t.Errorf("ipv6=%v: SysctlModules = %q", ipv6, m)
		}
	}
}
