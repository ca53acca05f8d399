package plan

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/berth-node/berth/config/nodeconfig"
	"github.com/berth-node/berth/network/resolvconf"
)

// TestResolvConf: the NodeConfig's spec.instance.network wins field by
// field over what DHCP gave (Host); the plan records the outcome in DNS
// and the file is network/resolvconf's rendering of it, the very bytes a
// DHCP renewal writes with that override (so a renewal leaves it alone).
func TestResolvConf(t *testing.T) {
	host := Host{CPUs: 2, MemoryMiB: 7680, Nameservers: []string{"10.0.0.2"}, SearchDomains: []string{"us-west-2.compute.internal"}}
	for _, tc := range []struct {
		name      string
		net       nodeconfig.NetworkOptions
		host      Host
		want      *DNS
		file      string
		warnsWith string
	}{
		{name: "neither: DHCP's file stands", host: host},
		{name: "both", host: host,
			net:  nodeconfig.NetworkOptions{Nameservers: []string{"10.0.0.53", "fd00::53"}, Domains: []string{"corp.example", "b.example."}},
			want: &DNS{Nameservers: []string{"10.0.0.53", "fd00::53"}, Search: []string{"corp.example", "b.example"}},
			file: "# Written by berth from spec.instance.network.\nnameserver 10.0.0.53\nnameserver fd00::53\nsearch corp.example b.example\n"},
		{name: "nameservers only: DHCP's search list", host: host,
			net:  nodeconfig.NetworkOptions{Nameservers: []string{"10.0.0.53"}},
			want: &DNS{Nameservers: []string{"10.0.0.53"}, Search: []string{"us-west-2.compute.internal"}},
			file: "# Written by berth from spec.instance.network.\nnameserver 10.0.0.53\nsearch us-west-2.compute.internal\n"},
		{name: "domains only: DHCP's servers", host: host,
			net:  nodeconfig.NetworkOptions{Domains: []string{"corp.example"}},
			want: &DNS{Nameservers: []string{"10.0.0.2"}, Search: []string{"corp.example"}},
			file: "# Written by berth from spec.instance.network.\nnameserver 10.0.0.2\nsearch corp.example\n"},
		{name: "domains only, no DHCP", host: Host{CPUs: 2},
			net:  nodeconfig.NetworkOptions{Domains: []string{"corp.example"}},
			want: &DNS{Search: []string{"corp.example"}},
			file: "# Written by berth from spec.instance.network.\nsearch corp.example\n"},
		{name: "more than the resolver reads", host: host,
			net:  nodeconfig.NetworkOptions{Nameservers: []string{"1.1.1.1", "8.8.8.8", "9.9.9.9", "10.0.0.2"}},
			want: &DNS{Nameservers: []string{"1.1.1.1", "8.8.8.8", "9.9.9.9", "10.0.0.2"}, Search: []string{"us-west-2.compute.internal"}},
			file: "# Written by berth from spec.instance.network.\nnameserver 1.1.1.1\nnameserver 8.8.8.8\nnameserver 9.9.9.9\n" +
				"# dropped (the resolver reads only 3): nameserver 10.0.0.2\nsearch us-west-2.compute.internal\n",
			warnsWith: "instance.network.nameservers has 4 entries; resolvers use only the first 3"},
		{name: "a bad host nameserver is left out", host: Host{CPUs: 2, Nameservers: []string{"10.0.0.2", "bogus"}},
			net:       nodeconfig.NetworkOptions{Domains: []string{"corp.example"}},
			want:      &DNS{Nameservers: []string{"10.0.0.2"}, Search: []string{"corp.example"}},
			file:      "# Written by berth from spec.instance.network.\nnameserver 10.0.0.2\nsearch corp.example\n",
			warnsWith: `host nameserver left out of /etc/resolv.conf: "bogus" is not an IP address`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := caseByName(t, "eksctl").inputs(t)
			in.Config.Spec.Instance.Network = tc.net
			in.Host = tc.host
			p, err := Build(in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p.DNS, tc.want) {
				t.Errorf("DNS = %+v, want %+v", p.DNS, tc.want)
			}
			got := fileData(p, ResolvConfPath)
			if tc.file == "" {
				if got != nil {
					t.Errorf("resolv.conf written although the NodeConfig sets no DNS:\n%s", got)
				}
				return
			}
			if string(got) != tc.file {
				t.Errorf("resolv.conf:\n%s\nwant:\n%s", got, tc.file)
			}
			// What a DHCP renewal renders with the plan's DNS as the
			// override, whatever the lease says: the same bytes.
			rc, err := resolvconf.Merge([]netip.Addr{netip.MustParseAddr("192.0.2.1")}, "lease.example", []string{"other.example"},
				p.DNS.Nameservers, p.DNS.Search)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.DNS.Nameservers) > 0 && len(p.DNS.Search) > 0 && string(resolvconf.Render(rc)) != tc.file {
				t.Errorf("a renewal with the plan's DNS as override renders\n%s\nnot the plan's\n%s", resolvconf.Render(rc), tc.file)
			}
			var warned bool
			for _, w := range p.Warnings {
				warned = warned || tc.warnsWith != "" && strings.Contains(w, tc.warnsWith)
			}
			if tc.warnsWith != "" && !warned {
				t.Errorf("no warning %q in %q", tc.warnsWith, p.Warnings)
			}
		})
	}
}

// TestResolvConfRejectsInjection: whatever gets past NodeConfig
// validation, resolv.conf gets no extra directives: Build fails instead.
func TestResolvConfRejectsInjection(t *testing.T) {
	for _, net := range []nodeconfig.NetworkOptions{
		{Nameservers: []string{"fe80::1%eth0\noptions ndots:9"}},
		{Domains: []string{"corp.example#", "x"}},
		{Domains: []string{"a.example\nnameserver 6.6.6.6"}},
	} {
		in := caseByName(t, "eksctl").inputs(t)
		in.Config.Spec.Instance.Network = net
		p, err := Build(in)
		if err == nil {
			t.Errorf("%+v: built, with resolv.conf:\n%s", net, fileData(p, ResolvConfPath))
		} else if !strings.Contains(err.Error(), "spec.instance.network.") {
			t.Errorf("%+v: err %v, want it to name spec.instance.network", net, err)
		}
	}
}
