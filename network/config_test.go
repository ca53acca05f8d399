package network

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestParseConfigDefaults(t *testing.T) {
	c, err := ParseConfig(mapGet(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Mode != ModeDHCP || c.Interface != "" || c.ResolvConfPath != DefaultResolvConfPath || c.SetHostname == nil {
		t.Errorf("defaults: %+v", c)
	}
}

func TestParseConfigStatic(t *testing.T) {
	c, err := ParseConfig(mapGet(map[string]string{
		"berth.ip": "10.0.2.15/24", "berth.gw": "10.0.2.2", "berth.dns": "10.0.2.3, 1.1.1.1",
		"berth.mtu": "9001", "berth.iface": "52:54:00:12:34:56", "berth.hostname": "node-a.example",
		"berth.ipv6": "1", "berth.net.timeout": "45s",
	}))
	if err != nil {
		t.Fatal(err)
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

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		kv   map[string]string
		want string
	}{
		{map[string]string{"berth.net": "dhcp6"}, `berth.net="dhcp6": want dhcp, static or off`},
		{map[string]string{"berth.ip": "10.0.2.15"}, `berth.ip="10.0.2.15": want an IPv4 address with prefix length`},
		{map[string]string{"berth.ip": "fd00::1/64"}, `berth.ip="fd00::1/64": want an IPv4`},
		{map[string]string{"berth.ip": "10.0.2.15/24", "berth.gw": "10.0.2"}, `berth.gw="10.0.2": want an IPv4 address`},
		{map[string]string{"berth.ip": "10.0.2.15/24", "berth.gw": "10.0.3.1"}, `berth.gw=10.0.3.1 is outside berth.ip=10.0.2.15/24`},
		{map[string]string{"berth.dns": "10.0.2.3,x"}, `berth.dns="10.0.2.3,x": entry 2 ("x") is not an IP address`},
		{map[string]string{"berth.mtu": "9002x"}, `berth.mtu="9002x": want an integer from 68 to 65535`},
		{map[string]string{"berth.mtu": "67"}, `berth.mtu="67"`},
		{map[string]string{"berth.iface": "eth0/1"}, `berth.iface="eth0/1": want an interface name`},
		{map[string]string{"berth.iface": "averyveryverylongname"}, `berth.iface="averyveryverylongname"`},
		{map[string]string{"berth.hostname": "-bad"}, `berth.hostname="-bad": label "-bad": must not start or end with '-'`},
		{map[string]string{"berth.hostname": "a_b"}, `berth.hostname="a_b": label "a_b": character '_' not allowed`},
		{map[string]string{"berth.ipv6": "maybe"}, `berth.ipv6="maybe": want dhcp, slaac, 1 (slaac) or 0`},
		{map[string]string{"berth.net.timeout": "-1s"}, `berth.net.timeout="-1s": want a positive duration`},
		{map[string]string{"berth.net": "static"}, `berth.net=static needs berth.ip`},
		{map[string]string{"berth.net": "dhcp", "berth.ip": "10.0.2.15/24"}, `berth.net=dhcp conflicts with berth.ip/berth.gw`},
	} {
		_, err := ParseConfig(mapGet(tc.kv))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want it to contain %q", tc.kv, err, tc.want)
		}
	}
}

func TestParseConfigOff(t *testing.T) {
	c, err := ParseConfig(mapGet(map[string]string{"berth.net": "off"}))
	if err != nil || c.Mode != ModeOff {
		t.Fatalf("%+v %v", c, err)
	}
}

// FuzzParseConfig feeds arbitrary values for every key: ParseConfig must
// not panic, and whatever it accepts must be self-consistent.
func FuzzParseConfig(f *testing.F) {
	f.Add("static", "10.0.2.15/24", "10.0.2.2", "10.0.2.3", "1500", "eth0", "node", "0", "30s")
	f.Add("dhcp", "", "", "", "", "", "", "", "")
	f.Add("", "1.2.3.4/32", "1.2.3.4", "1.1.1.1,fd00::1", "65535", "aa:bb:cc:dd:ee:ff", "a.b-c.d", "true", "1ms")
	f.Fuzz(func(t *testing.T, mode, ip, gw, dns, mtu, iface, host, v6, timeout string) {
		m := map[string]string{}
		for k, v := range map[string]string{KeyNet: mode, KeyIP: ip, KeyGateway: gw, KeyDNS: dns, KeyMTU: mtu,
			KeyIface: iface, KeyHostname: host, KeyIPv6: v6, KeyTimeout: timeout} {
			if v != "" {
				m[k] = v
			}
		}
		c, err := ParseConfig(mapGet(m))
		if err != nil {
			if !strings.Contains(err.Error(), "berth.") {
				t.Errorf("error %q names no key", err)
			}
			return
		}
		if c.Mode == ModeStatic && !c.Address.IsValid() {
			t.Errorf("static without an address: %+v", c)
		}
		if c.MTU != 0 && (c.MTU < 68 || c.MTU > 65535) {
			t.Errorf("MTU %d accepted", c.MTU)
		}
		if c.Hostname != "" && checkHostname(c.Hostname) != nil {
			t.Errorf("bad hostname %q accepted", c.Hostname)
		}
	})
}
