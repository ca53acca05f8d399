package nocloud

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/network"
)

// TestNetworkConfigRefusals has one case per kind of refusal, each
// checking the whole error text: file, line, key path and message.
func TestNetworkConfigRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"bonds", "network:\n  version: 2\n  bonds:\n    bond0: {interfaces: [eth0]}\n",
			"network-config: line 3: network.bonds: not supported (berth configures ethernets only)"},
		{"bridges", "version: 2\nbridges: {br0: {dhcp4: true}}\n",
			"network-config: line 2: bridges: not supported (berth configures ethernets only)"},
		{"vlans", "version: 2\nvlans: {}\n",
			"network-config: line 2: vlans: not supported (berth configures ethernets only)"},
		{"wifis", "version: 2\nwifis: {}\n",
			"network-config: line 2: wifis: not supported (berth configures ethernets only)"},
		{"unknown top-level key", "version: 2\nethernet: {}\n",
			"network-config: line 2: ethernet: unknown key"},
		{"key beside network", "network:\n  version: 2\nversion: 2\n",
			"network-config: line 3: version: unknown key beside network:"},
		{"renderer", "version: 2\nrenderer: sriov\n",
			`network-config: line 2: renderer: "sriov": want networkd or NetworkManager`},
		{"version missing", "ethernets: {}\n",
			"network-config: line 1: version: missing; want 1 or 2"},
		{"version 3", "network:\n  version: 3\n",
			"network-config: line 2: network.version: want an integer from 1 to 2, got 3"},
		{"version string", "version: \"2\"\n",
			`network-config: line 1: version: want an integer from 1 to 2, got "2"`},
		{"not a mapping", "- version: 2\n",
			"network-config: line 1: want a mapping with version: 1 or 2 (or a network: key holding one), got a list"},
		{"unsupported ethernet key", "version: 2\nethernets:\n  eth0:\n    dhcp4: true\n    dhcp4-overrides: {route-metric: 100}\n",
			"network-config: line 5: ethernets.eth0.dhcp4-overrides: not supported: berth reads match, set-name, dhcp4, dhcp6, addresses, routes, gateway4, gateway6, nameservers, mtu, optional and renderer"},
		{"match driver", "version: 2\nethernets:\n  nic:\n    match: {driver: ixgbe}\n    dhcp4: true\n",
			"network-config: line 4: ethernets.nic.match.driver: not supported: berth matches by macaddress or name"},
		{"match glob", "version: 2\nethernets:\n  nic:\n    match: {name: \"enp*\"}\n    dhcp4: true\n",
			`network-config: line 4: ethernets.nic.match.name: "enp*" is a pattern; berth matches one interface by its exact name or MAC address`},
		{"empty match", "version: 2\nethernets:\n  nic:\n    match: {}\n",
			"network-config: line 4: ethernets.nic.match: empty: give macaddress or name (an empty match would take every interface)"},
		{"id not an interface name", "version: 2\nethernets:\n  my/nic:\n    dhcp4: true\n",
			`network-config: line 3: ethernets."my/nic": "my/nic" is not an interface name (no '/', ':', spaces or control characters); without match:, the ID is the interface's name`},
		{"set-name without match", "version: 2\nethernets:\n  eth0:\n    set-name: lan0\n    dhcp4: true\n",
			"network-config: line 4: ethernets.eth0.set-name: needs match: (netplan renames only matched interfaces)"},
		{"bad MAC", "version: 2\nethernets:\n  nic:\n    match: {macaddress: \"52:54:00:12:34\"}\n",
			`network-config: line 4: ethernets.nic.match.macaddress: "52:54:00:12:34" is not an Ethernet MAC address (like 52:54:00:12:34:56)`},
		{"address without prefix", "version: 2\nethernets:\n  eth0:\n    addresses: [10.0.0.2]\n",
			`network-config: line 4: ethernets.eth0.addresses[0]: "10.0.0.2" has no prefix length; write it like 10.0.0.2/24`},
		{"address bad prefix", "version: 2\nethernets:\n  eth0:\n    addresses: [10.0.0.2/33]\n",
			`network-config: line 4: ethernets.eth0.addresses[0]: "10.0.0.2/33": prefix length or netmask "33" is not one for an IPv4 address`},
		{"address not contiguous netmask", "version: 2\nethernets:\n  eth0:\n    addresses: [10.0.0.2/255.0.255.0]\n",
			`network-config: line 4: ethernets.eth0.addresses[0]: "10.0.0.2/255.0.255.0": prefix length or netmask "255.0.255.0" is not one for an IPv4 address`},
		{"address options", "version: 2\nethernets:\n  eth0:\n    addresses:\n      - 10.0.0.2/24:\n          lifetime: 0\n",
			"network-config: line 5: ethernets.eth0.addresses[0]: address options (lifetime, label) are not supported; write the address alone, like 192.0.2.10/24"},
		{"addresses not a list", "version: 2\nethernets:\n  eth0:\n    addresses: 10.0.0.2/24\n",
			`network-config: line 4: ethernets.eth0.addresses: want a list of addresses with prefix lengths, got the string "10.0.0.2/24"`},
		{"multicast address", "version: 2\nethernets:\n  eth0:\n    addresses: [224.0.0.1/24]\n",
			"network-config: line 4: ethernets.eth0.addresses[0]: 224.0.0.1 is not a host address"},
		{"gateway4 IPv6", "version: 2\nethernets:\n  eth0:\n    gateway4: 2001:db8::1\n",
			"network-config: line 4: ethernets.eth0.gateway4: 2001:db8::1 is not an IPv4 address"},
		{"dhcp4 not a boolean", "version: 2\nethernets:\n  eth0:\n    dhcp4: maybe\n",
			`network-config: line 4: ethernets.eth0.dhcp4: want true or false, got "maybe"`},
		{"mtu too small", "version: 2\nethernets:\n  eth0:\n    dhcp4: true\n    mtu: 20\n",
			"network-config: line 5: ethernets.eth0.mtu: want an integer from 68 to 65535, got 20"},
		{"route unsupported key", "version: 2\nethernets:\n  eth0:\n    routes:\n      - to: default\n        via: 10.0.0.1\n        on-link: true\n",
			"network-config: line 7: ethernets.eth0.routes[0].on-link: not supported: berth reads to, via and metric"},
		{"route without to", "version: 2\nethernets:\n  eth0:\n    routes:\n      - via: 10.0.0.1\n",
			"network-config: line 5: ethernets.eth0.routes[0]: missing to:"},
		{"default route without via", "version: 2\nethernets:\n  eth0:\n    routes:\n      - to: default\n",
			"network-config: line 5: ethernets.eth0.routes[0]: a default route needs via: the gateway"},
		{"route host bits", "version: 2\nethernets:\n  eth0:\n    routes:\n      - {to: 10.1.2.3/8, via: 10.0.0.1}\n",
			"network-config: line 5: ethernets.eth0.routes[0].to: 10.1.2.3/8 has host bits set; the network is 10.0.0.0/8"},
		{"route mixed families", "version: 2\nethernets:\n  eth0:\n    routes:\n      - {to: \"::/0\", via: 10.0.0.1}\n",
			"network-config: line 5: ethernets.eth0.routes[0]: to ::/0 and via 10.0.0.1 are different IP versions"},
		{"nameserver not an address", "version: 2\nethernets:\n  eth0:\n    nameservers: {addresses: [dns.example.com]}\n",
			`network-config: line 4: ethernets.eth0.nameservers.addresses[0]: want an IP address: "dns.example.com" is not an IP address: ParseAddr("dns.example.com"): unexpected character (at "dns.example.com")`},
		{"search not a name", "version: 2\nethernets:\n  eth0:\n    nameservers: {search: [\"bad_domain\"]}\n",
			`network-config: line 4: ethernets.eth0.nameservers.search[0]: "bad_domain" is not a DNS name: label "bad_domain" has '_'; only letters, digits and '-' are allowed`},
		{"two entries for one interface", "version: 2\nethernets:\n  a:\n    match: {macaddress: \"52:54:00:00:00:01\"}\n  b:\n    match: {macaddress: \"52:54:00:00:00:01\"}\n",
			"network-config: line 5: ethernets.b: selects 52:54:00:00:00:01, as ethernets.a does; give each interface one entry"},
		{"duplicate key", "version: 2\nethernets:\n  eth0:\n    dhcp4: true\n    dhcp4: false\n",
			"network-config: line 5: ethernets.eth0.dhcp4: key repeated (first at line 4); YAML keeps only the last, so the first would be lost"},
		{"invalid YAML", "version: 2\nethernets: [\n",
			"network-config: invalid YAML: line 2: did not find expected node content"},
		{"two documents", "version: 2\n---\nversion: 1\n",
			"network-config: line 3: a second YAML document: the file holds one"},
		{"v1 bond", "version: 1\nconfig:\n  - type: bond\n    name: bond0\n",
			"network-config: line 3: config[0].type: bond: not supported (berth configures physical interfaces only)"},
		{"v1 unknown type", "version: 1\nconfig:\n  - type: loopback\n",
			`network-config: line 3: config[0].type: "loopback": unknown type; berth reads physical and nameserver`},
		{"v1 missing config", "version: 1\n",
			"network-config: config: missing: version 1 lists its interfaces under config:"},
		{"v1 physical key", "version: 1\nconfig:\n  - type: physical\n    name: eth0\n    accept-ra: true\n",
			"network-config: line 5: config[0].accept-ra: not supported: berth reads name, mac_address, mtu and subnets"},
		{"v1 physical without name", "version: 1\nconfig:\n  - type: physical\n    subnets: [{type: dhcp}]\n",
			"network-config: line 3: config[0].name: missing: a physical entry needs a name"},
		{"v1 subnet type", "version: 1\nconfig:\n  - type: physical\n    name: eth0\n    subnets:\n      - type: manual\n",
			`network-config: line 6: config[0].subnets[0].type: "manual": not supported; berth reads dhcp, dhcp4, dhcp6, ipv6_slaac, static and static6`},
		{"v1 static without address", "version: 1\nconfig:\n  - type: physical\n    name: eth0\n    subnets:\n      - type: static\n",
			"network-config: line 6: config[0].subnets[0].address: missing: a static subnet needs an address"},
		{"v1 static key with dhcp", "version: 1\nconfig:\n  - type: physical\n    name: eth0\n    subnets:\n      - type: dhcp\n        address: 10.0.0.2/24\n",
			"network-config: line 7: config[0].subnets[0].address: not supported with type dhcp"},
		{"v1 prefix and netmask", "version: 1\nconfig:\n  - type: physical\n    name: eth0\n    subnets:\n      - {type: static, address: 10.0.0.2/24, netmask: 255.255.255.0}\n",
			`network-config: line 6: config[0].subnets[0].address: "10.0.0.2/24" has a prefix length and the subnet a netmask; give one`},
		{"v1 control", "version: 1\nconfig:\n  - type: physical\n    name: eth0\n    subnets:\n      - {type: dhcp, control: manual}\n",
			`network-config: line 6: config[0].subnets[0].control: "manual": berth brings its interface up at boot (auto) only`},
		{"v1 nameserver for no interface", "version: 1\nconfig:\n  - type: physical\n    name: eth0\n  - type: nameserver\n    interface: eth1\n    address: [1.1.1.1]\n",
			`network-config: line 5: config[1].interface: "eth1" is not the name of a physical entry`},
		{"v1 route unsupported key", "version: 1\nconfig:\n  - type: physical\n    name: eth0\n    subnets:\n      - type: static\n        address: 10.0.0.2/24\n        routes:\n          - {destination: 10.1.0.0/16, gateway: 10.0.0.1, table: 5}\n",
			"network-config: line 9: config[0].subnets[0].routes[0].table: not supported: berth reads destination, netmask, gateway and metric"},
		{"too large", "version: 2\n#" + strings.Repeat("x", MaxFileSize) + "\n",
			fmt.Sprintf("network-config: %d bytes, over the %d-byte limit (nocloud.MaxFileSize)", MaxFileSize+13, MaxFileSize)},
		{"alias expansion", aliasBomb(),
			fmt.Sprintf("network-config: more than %d YAML nodes once aliases are expanded; a seed file is a few hundred", maxNodes)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, _, err := ParseNetworkConfig([]byte(tc.doc))
			if err == nil {
				t.Fatalf("accepted: %+v", n)
			}
			if n != nil {
				t.Errorf("a network returned with the error: %+v", n)
			}
			if err.Error() != tc.want {
				t.Errorf("error:\n got %s\nwant %s", err, tc.want)
			}
			var ps Problems
			if !asProblems(err, &ps) || len(ps) == 0 || ps[0].File != FileNetworkConfig {
				t.Errorf("error %T is not Problems naming network-config", err)
			}
		})
	}
}

func asProblems(err error, ps *Problems) bool {
	p, ok := err.(Problems)
	*ps = p
	return ok
}

// aliasBomb is a small network-config whose aliases, followed, visit
// far more than maxNodes nodes.
func aliasBomb() string {
	var b strings.Builder
	b.WriteString("version: 2\nx: &a [" + strings.Repeat("1,", 300) + "1]\nethernets:\n")
	for i := range 100 {
		fmt.Fprintf(&b, "  e%d:\n    addresses: *a\n", i)
	}
	return b.String()
}

// TestNetworkConfigAllProblems checks that one pass reports every
// problem, capped at MaxProblems with a line counting the rest.
func TestNetworkConfigAllProblems(t *testing.T) {
	var b strings.Builder
	b.WriteString("version: 2\nethernets:\n")
	for i := range MaxProblems + 5 {
		fmt.Fprintf(&b, "  eth%d:\n    mtu: 1\n", i)
	}
	_, _, err := ParseNetworkConfig([]byte(b.String()))
	ps, ok := err.(Problems)
	if !ok {
		t.Fatalf("error %T (%v), want Problems", err, err)
	}
	if len(ps) != MaxProblems+1 {
		t.Fatalf("%d problems, want %d kept and one counting the rest", len(ps), MaxProblems+1)
	}
	if got, want := ps[1].Error(), "network-config: line 6: ethernets.eth1.mtu: want an integer from 68 to 65535, got 1"; got != want {
		t.Errorf("second problem %q, want %q", got, want)
	}
	if got, want := ps[MaxProblems].Message, "... and 5 more problems not listed; fix the ones above and check again"; got != want {
		t.Errorf("last line %q, want %q", got, want)
	}
}

// TestNetworkConfigMapping checks NetworkConfig's result field by field
// for the shapes berth can configure, and its refusals of what
// network.Config cannot express.
func TestNetworkConfigMapping(t *testing.T) {
	pfx, addr := netip.MustParsePrefix, netip.MustParseAddr
	for _, tc := range []struct {
		name, doc string
		want      network.Config
		wantErr   string
	}{
		{name: "v2 static by MAC", doc: "version: 2\nethernets:\n  lan:\n    match: {macaddress: \"52:54:00:AA:bb:01\"}\n    addresses: [10.0.2.15/24]\n    gateway4: 10.0.2.2\n    nameservers: {addresses: [10.0.2.3]}\n    mtu: 1400\n",
			want: network.Config{Mode: network.ModeStatic, Interface: "52:54:00:aa:bb:01", Address: pfx("10.0.2.15/24"), Gateway: addr("10.0.2.2"), DNS: []netip.Addr{addr("10.0.2.3")}, MTU: 1400}},
		{name: "v2 dhcp by name", doc: "version: 2\nethernets:\n  nic:\n    match: {name: ens5}\n    dhcp4: on\n    dhcp6: true\n",
			want: network.Config{Mode: network.ModeDHCP, Interface: "ens5", IPv6: true, DHCPv6: true}},
		{name: "v2 dhcp with extra DNS", doc: "version: 2\nethernets:\n  eth0:\n    dhcp4: true\n    nameservers: {addresses: [\"fe80::1%eth0\"]}\n",
			want: network.Config{Mode: network.ModeDHCP, Interface: "eth0", DNS: []netip.Addr{addr("fe80::1%eth0")}}},
		{name: "v1 static with netmask", doc: "version: 1\nconfig:\n  - type: physical\n    name: eth0\n    subnets:\n      - {type: static, address: 192.0.2.10, netmask: 255.255.255.128, gateway: 192.0.2.1}\n",
			want: network.Config{Mode: network.ModeStatic, Interface: "eth0", Address: pfx("192.0.2.10/25"), Gateway: addr("192.0.2.1")}},
		{name: "default route equal to gateway4", doc: "version: 2\nethernets:\n  eth0:\n    addresses: [10.0.0.5/24]\n    gateway4: 10.0.0.1\n    routes: [{to: 0.0.0.0/0, via: 10.0.0.1}]\n",
			want: network.Config{Mode: network.ModeStatic, Interface: "eth0", Address: pfx("10.0.0.5/24"), Gateway: addr("10.0.0.1")}},
		{name: "no IPv4", doc: "version: 2\nethernets:\n  eth0:\n    dhcp6: true\n",
			wantErr: "network-config: line 3: ethernets.eth0: no IPv4 configuration: give dhcp4: true or an IPv4 address (berth needs IPv4 on its interface)"},
		{name: "no interfaces", doc: "version: 2\nethernets: {}\n",
			wantErr: "network-config: no interface to configure; give one ethernet (version 2) or physical entry (version 1)"},
		{name: "two IPv4 addresses", doc: "version: 2\nethernets:\n  eth0:\n    addresses: [10.0.0.5/24, 10.0.1.5/24]\n",
			wantErr: "network-config: line 3: ethernets.eth0.addresses: 2 IPv4 addresses (10.0.0.5/24, 10.0.1.5/24); berth configures one"},
		{name: "static IPv6", doc: "version: 2\nethernets:\n  eth0:\n    dhcp4: true\n    addresses: [\"2001:db8::5/64\"]\n",
			wantErr: "network-config: line 3: ethernets.eth0.addresses: 2001:db8::5/64: static IPv6 addresses are not supported yet; use dhcp6 or router advertisements"},
		{name: "gateway6", doc: "version: 2\nethernets:\n  eth0:\n    dhcp4: true\n    gateway6: \"2001:db8::1\"\n",
			wantErr: "network-config: line 3: ethernets.eth0.gateway6: not supported yet; router advertisements give IPv6's default route"},
		{name: "gateway with DHCP", doc: "version: 2\nethernets:\n  eth0:\n    dhcp4: true\n    gateway4: 10.0.0.1\n",
			wantErr: "network-config: line 3: ethernets.eth0.gateway4: 10.0.0.1 without a static IPv4 address; with DHCP the server gives the gateway"},
		{name: "gateway outside the subnet", doc: "version: 2\nethernets:\n  eth0:\n    addresses: [10.0.0.5/24]\n    routes: [{to: default, via: 10.9.9.1}]\n",
			wantErr: "network-config: line 5: ethernets.eth0.routes[0].via: 10.9.9.1 is outside 10.0.0.5/24, which berth's static setup does not route to"},
		{name: "two default gateways", doc: "version: 2\nethernets:\n  eth0:\n    addresses: [10.0.0.5/24]\n    gateway4: 10.0.0.1\n    routes: [{to: default, via: 10.0.0.2}]\n",
			wantErr: "network-config: line 6: ethernets.eth0.routes[0]: a default route via 10.0.0.2 beside the gateway 10.0.0.1; give one"},
		{name: "IPv6 default route", doc: "version: 2\nethernets:\n  eth0:\n    dhcp4: true\n    routes: [{to: default, via: \"fe80::1\"}]\n",
			wantErr: "network-config: line 5: ethernets.eth0.routes[0]: an IPv6 default route: not supported yet; router advertisements give IPv6's"},
		{name: "v1 search domains", doc: "version: 1\nconfig:\n  - type: physical\n    name: eth0\n    subnets: [{type: dhcp}]\n  - type: nameserver\n    address: 1.1.1.1\n    search: example.com\n",
			want: network.Config{Mode: network.ModeDHCP, Interface: "eth0", DNS: []netip.Addr{addr("1.1.1.1")}, Search: []string{"example.com"}}},
		{name: "v2 static routes and search", doc: "version: 2\nethernets:\n  eth0:\n    addresses: [10.0.0.5/24]\n    routes:\n      - {to: default, via: 10.0.0.1}\n      - {to: 172.16.0.0/20, via: 10.0.0.254}\n    nameservers: {addresses: [10.0.0.2], search: [lab.example, example]}\n",
			want: network.Config{Mode: network.ModeStatic, Interface: "eth0", Address: pfx("10.0.0.5/24"), Gateway: addr("10.0.0.1"),
				Routes: []network.Route{{Dst: pfx("172.16.0.0/20"), Gateway: addr("10.0.0.254")}}, DNS: []netip.Addr{addr("10.0.0.2")}, Search: []string{"lab.example", "example"}}},
		{name: "route beside DHCP", doc: "version: 2\nethernets:\n  eth0:\n    dhcp4: true\n    routes: [{to: 172.16.0.0/12, via: 10.0.0.1}]\n",
			wantErr: "network-config: line 5: ethernets.eth0.routes[0]: a route to 172.16.0.0/12 beside DHCP: berth takes DHCP's routes (option 121) and adds none; give a static address to add routes"},
		{name: "route via off the subnet", doc: "version: 2\nethernets:\n  eth0:\n    addresses: [10.0.0.5/24]\n    routes: [{to: 172.16.0.0/12, via: 10.9.0.1}]\n",
			wantErr: "network-config: line 5: ethernets.eth0.routes[0].via: 10.9.0.1 is outside 10.0.0.5/24, which berth's static setup does not route to"},
		{name: "IPv6 route", doc: "version: 2\nethernets:\n  eth0:\n    addresses: [10.0.0.5/24]\n    routes: [{to: \"2001:db8::/32\", via: \"fe80::1\"}]\n",
			wantErr: "network-config: line 5: ethernets.eth0.routes[0]: a route to 2001:db8::/32: IPv6 routes are not supported yet; router advertisements give IPv6's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, _, err := ParseNetworkConfig([]byte(tc.doc))
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			c, _, err := NetworkConfig(n)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error:\n got %v\nwant %s", err, tc.wantErr)
				}
				if !reflect.DeepEqual(c, network.Config{}) {
					t.Errorf("a config came back with the error: %+v", c)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !reflect.DeepEqual(c, tc.want) {
				t.Errorf("config:\n got %+v\nwant %+v", c, tc.want)
			}
		})
	}
}

// TestNetworkConfigWarnings checks what is read but not applied is said.
func TestNetworkConfigWarnings(t *testing.T) {
	doc := "version: 2\nethernets:\n  lan:\n    match: {macaddress: \"52:54:00:00:00:01\", name: eth0}\n    addresses: [10.0.0.5/24]\n    routes: [{to: default, via: 10.0.0.1, metric: 50}]\n"
	n, warns, err := ParseNetworkConfig([]byte(doc))
	if err != nil || len(warns) != 0 {
		t.Fatalf("parse: %v, warnings %v", err, warns)
	}
	c, warns, err := NetworkConfig(n)
	if err != nil {
		t.Fatal(err)
	}
	if c.Interface != "52:54:00:00:00:01" || c.Gateway != netip.MustParseAddr("10.0.0.1") {
		t.Errorf("config %+v", c)
	}
	var got []string
	for _, w := range warns {
		got = append(got, w.Error())
	}
	want := []string{
		"network-config: line 3: ethernets.lan.match.name: not checked: berth finds the interface by its MAC address alone",
		"network-config: line 6: ethernets.lan.routes[0].metric: not applied: the one default route takes the kernel's default metric",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("warnings:\n got %q\nwant %q", got, want)
	}
	if _, _, err := NetworkConfig(nil); err == nil || err.Error() != "network-config: no network configuration" {
		t.Errorf("nil network: %v", err)
	}
}

// The seed's network replaces the command line's default DHCP, keeping
// the command line's timeouts and hostname; any addressing key on the
// command line keeps the command line's whole, and is named.
func TestNetworkOver(t *testing.T) {
	base := network.Config{Mode: network.ModeDHCP, Hostname: "fallback", Timeout: 7 * time.Second, ResolvConfPath: "/etc/resolv.conf"}
	seed := &network.Config{Mode: network.ModeStatic, Interface: "52:54:00:12:34:56", Address: netip.MustParsePrefix("192.0.2.10/24"),
		Gateway: netip.MustParseAddr("192.0.2.1"), DNS: []netip.Addr{netip.MustParseAddr("192.0.2.53")}, MTU: 9000}
	none := func(string) bool { return false }
	got, keys := NetworkOver(base, seed, none)
	want := *seed
	want.Hostname, want.Timeout, want.ResolvConfPath = "fallback", 7*time.Second, "/etc/resolv.conf"
	if !reflect.DeepEqual(got, want) || keys != nil {
		t.Errorf("NetworkOver = %+v, %v; want %+v", got, keys, want)
	}
	if got, _ := NetworkOver(base, nil, none); !reflect.DeepEqual(got, base) {
		t.Errorf("no seed network: %+v, want the command line's", got)
	}
	got, keys = NetworkOver(base, seed, func(k string) bool { return k == network.KeyIP || k == network.KeyNet })
	if !reflect.DeepEqual(got, base) || !reflect.DeepEqual(keys, []string{network.KeyNet, network.KeyIP}) {
		t.Errorf("command line keys: %+v, %v; want the command line's, naming berth.net and berth.ip", got, keys)
	}
}
