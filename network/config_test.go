package network

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/internal/syntax"
)

func TestParseConfigDefaults(t *testing.T) {
	c, ps := ParseConfig(mapGet(nil))
	if ps != nil || ps.Err() != nil {
		t.Fatal(ps)
	}
	if c.Mode != ModeDHCP || c.Interface != "" || c.ResolvConfPath != DefaultResolvConfPath || c.SetHostname == nil {
		t.Errorf("defaults: %+v", c)
	}
}

func TestParseConfigStatic(t *testing.T) {
	c, ps := ParseConfig(mapGet(map[string]string{
		"berth.ip": "10.0.2.15/24", "berth.gw": "10.0.2.2", "berth.dns": "10.0.2.3, 1.1.1.1",
		"berth.mtu": "9001", "berth.iface": "52:54:00:12:34:56", "berth.hostname": "node-a.example",
		"berth.ipv6": "1", "berth.net.timeout": "45s",
	}))
	if ps != nil {
		t.Fatal(ps)
	}
	want := Config{Mode: ModeStatic, Address: netip.MustParsePrefix("10.0.2.15/24"), Gateway: netip.MustParseAddr("10.0.2.2"),
		DNS: []netip.Addr{netip.MustParseAddr("10.0.2.3"), netip.MustParseAddr("1.1.1.1")}, MTU: 9001,
		Interface: "52:54:00:12:34:56", Hostname: "node-a.example", IPv6: true, Timeout: 45 * time.Second}
	if c.Mode != want.Mode || c.Address != want.Address || c.Gateway != want.Gateway || len(c.DNS) != 2 ||
		c.DNS[0] != want.DNS[0] || c.DNS[1] != want.DNS[1] || c.MTU != want.MTU || c.Interface != want.Interface ||
		c.Hostname != want.Hostname || c.IPv6 != want.IPv6 || c.Timeout != want.Timeout {
		t.Errorf("got %+v\nwant %+v", c, want)
	}
}

// goodKeys are set alongside the bad key in TestParseConfigBadKeyIgnored:
// they must all still apply.
var goodKeys = map[string]string{
	"berth.iface": "eth0", "berth.hostname": "node-a", "berth.mtu": "1450", "berth.dns": "10.0.2.3",
	"berth.ipv6": "dhcp", "berth.net.timeout": "30s",
}

// TestParseConfigBadKeyIgnored: one bad key is reported (naming the key and
// its value) and ignored; every other key still applies, and the network
// comes up by DHCP unless the good keys say otherwise.
func TestParseConfigBadKeyIgnored(t *testing.T) {
	for _, tc := range []struct {
		kv       map[string]string
		key      string // the key the problem names
		want     string // in the problem's message
		mode     Mode
		override bool // the bad key replaces one of goodKeys
	}{
		{kv: map[string]string{"berth.net": "dhcp6"}, key: "berth.net", want: `berth.net="dhcp6" ignored: want dhcp, static or off`, mode: ModeDHCP},
		{kv: map[string]string{"berth.ip": "10.0.2.15"}, key: "berth.ip", want: `berth.ip="10.0.2.15" ignored: want an IPv4 address with prefix length`, mode: ModeDHCP},
		{kv: map[string]string{"berth.ip": "fd00::1/64"}, key: "berth.ip", want: "want an IPv4", mode: ModeDHCP},
		{kv: map[string]string{"berth.ip": "10.0.2.15/24", "berth.gw": "10.0.2"}, key: "berth.gw", want: `berth.gw="10.0.2" ignored: want an IPv4 address`, mode: ModeStatic},
		{kv: map[string]string{"berth.ip": "10.0.2.15/24", "berth.gw": "10.0.3.1"}, key: "berth.gw", want: `10.0.3.1 is outside berth.ip=10.0.2.15/24`, mode: ModeStatic},
		{kv: map[string]string{"berth.dns": "10.0.2.3,x"}, key: "berth.dns", want: `berth.dns="10.0.2.3,x" ignored: entry 2: "x" is not an IP address`, mode: ModeDHCP, override: true},
		{kv: map[string]string{"berth.dns": "10.0.2.3,fe80::1%x\nnameserver 6.6.6.6"}, key: "berth.dns", want: "entry 2", mode: ModeDHCP, override: true},
		{kv: map[string]string{"berth.dns": "10.0.2.3,fd00::1%eth0"}, key: "berth.dns", want: "only allowed on a link-local address", mode: ModeDHCP, override: true},
		{kv: map[string]string{"berth.mtu": "9002x"}, key: "berth.mtu", want: `berth.mtu="9002x" ignored: want an integer from 68 to 65535`, mode: ModeDHCP, override: true},
		{kv: map[string]string{"berth.mtu": "67"}, key: "berth.mtu", want: `berth.mtu="67"`, mode: ModeDHCP, override: true},
		{kv: map[string]string{"berth.iface": "eth0/1"}, key: "berth.iface", want: `berth.iface="eth0/1" ignored: want an interface name`, mode: ModeDHCP, override: true},
		{kv: map[string]string{"berth.iface": "averyveryverylongname"}, key: "berth.iface", want: `berth.iface="averyveryverylongname"`, mode: ModeDHCP, override: true},
		{kv: map[string]string{"berth.hostname": "-bad"}, key: "berth.hostname", want: `berth.hostname="-bad" ignored: "-bad" is not a hostname: label "-bad" starts with '-'`, mode: ModeDHCP, override: true},
		{kv: map[string]string{"berth.hostname": "a_b"}, key: "berth.hostname", want: `label "a_b" has '_'`, mode: ModeDHCP, override: true},
		{kv: map[string]string{"berth.hostname": "node\nnameserver 6.6.6.6"}, key: "berth.hostname", want: `has '\n'`, mode: ModeDHCP, override: true},
		{kv: map[string]string{"berth.ipv6": "maybe"}, key: "berth.ipv6", want: `berth.ipv6="maybe" ignored: want dhcp, slaac, 1 (slaac) or 0`, mode: ModeDHCP, override: true},
		{kv: map[string]string{"berth.net.timeout": "-1s"}, key: "berth.net.timeout", want: `berth.net.timeout="-1s" ignored: want a positive duration`, mode: ModeDHCP, override: true},
		{kv: map[string]string{"berth.net": "static"}, key: "berth.net", want: `berth.net="static" ignored: static needs a usable berth.ip`, mode: ModeDHCP},
		{kv: map[string]string{"berth.net": "static", "berth.ip": "nope", "berth.gw": "10.0.2.2"}, key: "berth.ip", want: `berth.ip="nope"`, mode: ModeDHCP},
		{kv: map[string]string{"berth.net": "dhcp", "berth.ip": "10.0.2.15/24"}, key: "berth.ip", want: `berth.ip="10.0.2.15/24" ignored: conflicts with berth.net=dhcp`, mode: ModeDHCP},
		{kv: map[string]string{"berth.net": "off", "berth.gw": "10.0.2.2"}, key: "berth.gw", want: `conflicts with berth.net=off`, mode: ModeOff},
	} {
		kv := map[string]string{}
		for k, v := range goodKeys {
			kv[k] = v
		}
		for k, v := range tc.kv {
			kv[k] = v
		}
		c, ps := ParseConfig(mapGet(kv))
		if len(ps) == 0 {
			t.Errorf("%q: no problem reported", tc.kv)
			continue
		}
		var named bool
		for _, p := range ps {
			named = named || p.Key == tc.key && strings.Contains(p.Error(), tc.want)
		}
		if !named {
			t.Errorf("%q: problems %q, want one for %s saying %q", tc.kv, ps, tc.key, tc.want)
		}
		err := ps.Err()
		var p Problem
		if !errors.As(err, &p) && !strings.HasPrefix(err.Error(), "kernel command line: ") {
			t.Errorf("%q: Err() = %v", tc.kv, err)
		}
		if c.Mode != tc.mode {
			t.Errorf("%q: mode %s, want %s", tc.kv, c.Mode, tc.mode)
		}
		if c.Mode != ModeStatic && (c.Address.IsValid() || c.Gateway.IsValid()) {
			t.Errorf("%q: %s with static address %v gateway %v", tc.kv, c.Mode, c.Address, c.Gateway)
		}
		// The good keys apply, whatever was wrong with the bad one.
		if !tc.override || tc.key != "berth.iface" {
			if c.Interface != "eth0" {
				t.Errorf("%q: interface %q, want eth0", tc.kv, c.Interface)
			}
		}
		if (!tc.override || tc.key != "berth.hostname") && c.Hostname != "node-a" {
			t.Errorf("%q: hostname %q, want node-a", tc.kv, c.Hostname)
		}
		if (!tc.override || tc.key != "berth.mtu") && c.MTU != 1450 {
			t.Errorf("%q: MTU %d, want 1450", tc.kv, c.MTU)
		}
		if (!tc.override || tc.key != "berth.dns") && (len(c.DNS) != 1 || c.DNS[0] != netip.MustParseAddr("10.0.2.3")) {
			t.Errorf("%q: DNS %v, want 10.0.2.3", tc.kv, c.DNS)
		}
		if (!tc.override || tc.key != "berth.ipv6") && !c.DHCPv6 {
			t.Errorf("%q: DHCPv6 off", tc.kv)
		}
		if (!tc.override || tc.key != "berth.net.timeout") && c.Timeout != 30*time.Second {
			t.Errorf("%q: timeout %s", tc.kv, c.Timeout)
		}
	}
}

// TestParseConfigKeepsGoodDNSEntries: in a berth.dns list only the bad
// entries go.
func TestParseConfigKeepsGoodDNSEntries(t *testing.T) {
	c, ps := ParseConfig(mapGet(map[string]string{"berth.dns": "10.0.2.3, x ,fe80::1%eth0"}))
	if len(ps) != 1 || ps[0].Key != KeyDNS || !strings.Contains(ps[0].Error(), `entry 2: "x" is not an IP address`) {
		t.Errorf("problems %q", ps)
	}
	if len(c.DNS) != 2 || c.DNS[0].String() != "10.0.2.3" || c.DNS[1].String() != "fe80::1%eth0" {
		t.Errorf("DNS %v", c.DNS)
	}
}

func TestParseConfigOff(t *testing.T) {
	c, ps := ParseConfig(mapGet(map[string]string{"berth.net": "off"}))
	if ps != nil || c.Mode != ModeOff {
		t.Fatalf("%+v %v", c, ps)
	}
}

// FuzzParseConfig feeds arbitrary values for every key: ParseConfig must
// not panic, every problem names a key, and whatever it keeps must be
// self-consistent and safe to write into resolv.conf and the hostname.
func FuzzParseConfig(f *testing.F) {
	f.Add("static", "10.0.2.15/24", "10.0.2.2", "10.0.2.3", "1500", "eth0", "node", "0", "30s")
	f.Add("dhcp", "", "", "", "", "", "", "", "")
	f.Add("", "1.2.3.4/32", "1.2.3.4", "1.1.1.1,fd00::1", "65535", "aa:bb:cc:dd:ee:ff", "a.b-c.d", "true", "1ms")
	f.Add("static", "x", "10.0.2.2", "fe80::1%x\nnameserver 6.6.6.6", "0", "eth0/1", "a\nb", "maybe", "-1s")
	f.Fuzz(func(t *testing.T, mode, ip, gw, dns, mtu, iface, host, v6, timeout string) {
		m := map[string]string{}
		for k, v := range map[string]string{KeyNet: mode, KeyIP: ip, KeyGateway: gw, KeyDNS: dns, KeyMTU: mtu,
			KeyIface: iface, KeyHostname: host, KeyIPv6: v6, KeyTimeout: timeout} {
			if v != "" {
				m[k] = v
			}
		}
		c, ps := ParseConfig(mapGet(m))
		for _, p := range ps {
			if _, ok := m[p.Key]; !ok && p.Key != KeyNet {
				t.Errorf("problem %q names a key that was not given", p)
			}
		}
		switch c.Mode {
		case ModeStatic:
			if !c.Address.IsValid() {
				t.Errorf("static without an address: %+v", c)
			}
			if c.Gateway.IsValid() && !c.Address.Masked().Contains(c.Gateway) {
				t.Errorf("gateway %s outside %s", c.Gateway, c.Address)
			}
		case ModeDHCP, ModeOff:
			if c.Address.IsValid() || c.Gateway.IsValid() {
				t.Errorf("%s with a static address: %+v", c.Mode, c)
			}
		default:
			t.Errorf("mode %q", c.Mode)
		}
		if c.MTU != 0 && (c.MTU < 68 || c.MTU > 65535) {
			t.Errorf("MTU %d accepted", c.MTU)
		}
		if c.Hostname != "" && syntax.Hostname(c.Hostname) != nil {
			t.Errorf("bad hostname %q accepted", c.Hostname)
		}
		for _, a := range c.DNS {
			if syntax.IP(a.String(), true) != nil {
				t.Errorf("bad DNS server %q accepted", a)
			}
		}
	})
}
