package network

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/rfc1035label"

	"github.com/berth-node/berth/internal/syntax"
	"github.com/berth-node/berth/network/resolvconf"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func ack(t testing.TB, opts ...dhcpv4.Option) *dhcpv4.DHCPv4 {
	t.Helper()
	mods := []dhcpv4.Modifier{dhcpv4.WithMessageType(dhcpv4.MessageTypeAck), dhcpv4.WithYourIP(net.IPv4(10, 0, 2, 15)),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.IPv4(10, 0, 2, 2)))}
	for _, o := range opts {
		mods = append(mods, dhcpv4.WithOption(o))
	}
	m, err := dhcpv4.New(mods...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestLeaseFromACKEC2Like(t *testing.T) {
	m := ack(t,
		dhcpv4.OptSubnetMask(net.CIDRMask(20, 32)),
		dhcpv4.OptRouter(net.IPv4(10, 0, 0, 1)),
		dhcpv4.OptDNS(net.IPv4(10, 0, 0, 2)),
		dhcpv4.OptDomainName("ec2.internal"),
		dhcpv4.OptHostName("ip-10-0-2-15"),
		dhcpv4.OptGeneric(dhcpv4.OptionInterfaceMTU, []byte{0x23, 0x29}), // 9001
		dhcpv4.OptIPAddressLeaseTime(3600*time.Second),
	)
	l, err := LeaseFromACK(m, t0)
	if err != nil {
		t.Fatal(err)
	}
	if l.Address != netip.MustParsePrefix("10.0.2.15/20") || l.Server != netip.MustParseAddr("10.0.2.2") ||
		l.MTU != 9001 || l.Hostname != "ip-10-0-2-15" || l.Domain != "ec2.internal" || len(l.DNS) != 1 ||
		l.Router != netip.MustParseAddr("10.0.0.1") || len(l.Routes) != 1 || l.Routes[0].Dst.Bits() != 0 {
		t.Errorf("lease: %+v", l)
	}
	if l.Time != time.Hour || l.T1 != 30*time.Minute || l.T2 != 52*time.Minute+30*time.Second {
		t.Errorf("timers %s %s %s", l.Time, l.T1, l.T2)
	}
	t1, t2, exp := l.Deadlines()
	if !t1.Equal(t0.Add(30*time.Minute)) || !t2.Equal(t0.Add(l.T2)) || !exp.Equal(t0.Add(time.Hour)) {
		t.Errorf("deadlines %v %v %v", t1, t2, exp)
	}
	if got := l.Lifetime(t0.Add(10*time.Minute + 500*time.Millisecond)); got != 3000 {
		t.Errorf("lifetime %d, want 3000 (rounded up)", got)
	}
	if got := l.Lifetime(t0.Add(2 * time.Hour)); got != 1 {
		t.Errorf("lifetime after expiry %d, want the floor 1", got)
	}
}

func TestLeaseOption121WinsOverRouter(t *testing.T) {
	m := ack(t,
		dhcpv4.OptSubnetMask(net.CIDRMask(24, 32)),
		dhcpv4.OptRouter(net.IPv4(10, 0, 2, 99)),
		dhcpv4.OptClasslessStaticRoute(
			&dhcpv4.Route{Dest: &net.IPNet{IP: net.IPv4(169, 254, 169, 254).To4(), Mask: net.CIDRMask(32, 32)}, Router: net.IPv4zero.To4()},
			&dhcpv4.Route{Dest: &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}, Router: net.IPv4(10, 0, 2, 2).To4()},
		),
	)
	l, err := LeaseFromACK(m, t0)
	if err != nil {
		t.Fatal(err)
	}
	want := []Route{
		{Dst: netip.MustParsePrefix("169.254.169.254/32")},
		{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gateway: netip.MustParseAddr("10.0.2.2")},
	}
	if len(l.Routes) != 2 || l.Routes[0] != want[0] || l.Routes[1] != want[1] || l.Router != netip.MustParseAddr("10.0.2.2") {
		t.Errorf("routes %+v router %v, want %+v via 10.0.2.2", l.Routes, l.Router, want)
	}
}

func TestLeaseBadOptions(t *testing.T) {
	m := ack(t,
		dhcpv4.OptGeneric(dhcpv4.OptionInterfaceMTU, []byte{0, 10}),               // 10 < 68
		dhcpv4.OptGeneric(dhcpv4.OptionClasslessStaticRoute, []byte{33, 1, 2, 3}), // mask > 32
		dhcpv4.OptRouter(net.IPv4(10, 0, 2, 2)),
		dhcpv4.OptHostName("bad_name"),
		dhcpv4.OptGeneric(dhcpv4.OptionSubnetMask, []byte{255, 0, 255, 0}),
	)
	l, err := LeaseFromACK(m, t0)
	if err != nil {
		t.Fatal(err)
	}
	if l.MTU != 0 || l.Hostname != "" || l.Address.Bits() != 8 || len(l.Routes) != 1 || l.Routes[0].Gateway != netip.MustParseAddr("10.0.2.2") {
		t.Errorf("lease: %+v", l)
	}
	joined := strings.Join(l.Warnings, "\n")
	for _, w := range []string{"option 26: MTU 10", "option 121: malformed, falling back to option 3", `option 12: hostname dropped: "bad_name" is not a hostname`, "option 1: subnet mask"} {
		if !strings.Contains(joined, w) {
			t.Errorf("warnings %q lack %q", l.Warnings, w)
		}
	}
	if _, err := LeaseFromACK(ack(t, dhcpv4.OptIPAddressLeaseTime(time.Hour)), t0); err != nil {
		t.Errorf("minimal ACK: %v", err)
	}
	zero, _ := dhcpv4.New(dhcpv4.WithMessageType(dhcpv4.MessageTypeAck))
	if _, err := LeaseFromACK(zero, t0); err == nil || !strings.Contains(err.Error(), "no usable address") {
		t.Errorf("ACK without yiaddr: %v", err)
	}
}

func TestLeaseSearchAndInfinite(t *testing.T) {
	m := ack(t, dhcpv4.OptDomainSearch(&rfc1035label.Labels{Labels: []string{"a.example", "b.example"}}),
		dhcpv4.OptIPAddressLeaseTime(Infinite))
	l, err := LeaseFromACK(m, t0)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(l.Search, " ") != "a.example b.example" {
		t.Errorf("search %v", l.Search)
	}
	if t1, _, _ := l.Deadlines(); !t1.IsZero() || l.Lifetime(t0) != 0 {
		t.Errorf("infinite lease: deadline %v lifetime %d, want none and forever", t1, l.Lifetime(t0))
	}
}

// TestLeaseDropsBadNames: hostname, domain, search list and DNS servers
// from the server reach the hostname and resolv.conf, so each bad one is
// dropped with a warning naming the option and the value, and the good
// ones are kept.
func TestLeaseDropsBadNames(t *testing.T) {
	m := ack(t,
		dhcpv4.OptHostName("node\nnameserver 6.6.6.6"),
		dhcpv4.OptDomainName("ec2.internal\nnameserver 6.6.6.6"),
		dhcpv4.OptDomainSearch(&rfc1035label.Labels{Labels: []string{"good.example", "ex ample.com", "-bad.com", "b.example"}}),
		dhcpv4.OptDNS(net.IPv4(10, 0, 0, 2), net.IPv4zero, net.IPv4(224, 0, 0, 251), net.IPv4bcast, net.IPv4(10, 0, 0, 3)),
	)
	l, err := LeaseFromACK(m, t0)
	if err != nil {
		t.Fatal(err)
	}
	if l.Hostname != "" || l.Domain != "" || strings.Join(l.Search, " ") != "good.example b.example" {
		t.Errorf("hostname %q domain %q search %q", l.Hostname, l.Domain, l.Search)
	}
	if len(l.DNS) != 2 || l.DNS[0].String() != "10.0.0.2" || l.DNS[1].String() != "10.0.0.3" {
		t.Errorf("DNS %v", l.DNS)
	}
	joined := strings.Join(l.Warnings, "\n")
	for _, w := range []string{
		`option 12: hostname dropped: "node\nnameserver 6.6.6.6" is not a hostname`,
		`option 15: domain name dropped: "ec2.internal\nnameserver 6.6.6.6" is not a DNS name`,
		`option 119: search domain dropped: "ex ample.com" is not a DNS name`,
		`option 119: search domain dropped: "-bad.com" is not a DNS name: label "-bad" starts with '-'`,
		`option 6: DNS server "0.0.0.0" is unspecified; dropped`,
		`option 6: DNS server "224.0.0.251" is multicast; dropped`,
		`option 6: DNS server "255.255.255.255" is the broadcast address; dropped`,
	} {
		if !strings.Contains(joined, w) {
			t.Errorf("warnings lack %q:\n%s", w, joined)
		}
	}
	// What the renewer renders from such a lease: only the good entries.
	d := &dnsState{}
	d.setLease(l)
	rc, err := d.file()
	if err != nil {
		t.Fatal(err)
	}
	if got := string(resolvconf.Render(rc)); !strings.HasSuffix(got, "\nnameserver 10.0.0.2\nnameserver 10.0.0.3\nsearch good.example b.example\n") {
		t.Errorf("resolv.conf:\n%s", got)
	}
}

func TestTimers(t *testing.T) {
	s := time.Second
	for _, tc := range []struct{ lease, t1, t2, w1, w2 time.Duration }{
		{100 * s, 0, 0, 50 * s, 87500 * time.Millisecond},
		{100 * s, 20 * s, 40 * s, 20 * s, 40 * s},
		{100 * s, 60 * s, 40 * s, 20 * s, 40 * s},               // T1 > T2: default 50 s would pass T2 too, so T2/2
		{100 * s, 0, 200 * s, 50 * s, 87500 * time.Millisecond}, // T2 > lease: default
		{100 * s, 0, 30 * s, 15 * s, 30 * s},                    // default T1 would pass T2
		{4 * s, 2 * s, 3 * s, 2 * s, 3 * s},
		{Infinite, 0, 0, Infinite, Infinite},
	} {
		g1, g2 := timers(tc.lease, tc.t1, tc.t2)
		if g1 != tc.w1 || g2 != tc.w2 {
			t.Errorf("timers(%s,%s,%s) = %s,%s want %s,%s", tc.lease, tc.t1, tc.t2, g1, g2, tc.w1, tc.w2)
		}
	}
}

func TestRetryWaitAndBackoff(t *testing.T) {
	s := time.Second
	for _, tc := range []struct{ left, floor, want time.Duration }{
		{600 * s, 60 * s, 300 * s},
		{100 * s, 60 * s, 60 * s},
		{30 * s, 60 * s, 30 * s}, // never past the phase end
		{2 * s, s, s},
		{-s, s, 0},
	} {
		if got := retryWait(t0, t0.Add(tc.left), tc.floor); got != tc.want {
			t.Errorf("retryWait(left %s, floor %s) = %s, want %s", tc.left, tc.floor, got, tc.want)
		}
	}
	want := []time.Duration{s, 2 * s, 4 * s, 8 * s, 16 * s, 32 * s, 60 * s, 60 * s}
	for i, w := range want {
		if got := backoff(i); got != w {
			t.Errorf("backoff(%d) = %s, want %s", i, got, w)
		}
	}
	if got := backoff(1000); got != time.Minute {
		t.Errorf("backoff(1000) = %s", got)
	}
	if tryTimeout(0) != s/2 || tryTimeout(1) != s || tryTimeout(3) != 4*s || tryTimeout(9) != 4*s {
		t.Errorf("tryTimeout: %s %s %s", tryTimeout(0), tryTimeout(1), tryTimeout(5))
	}
}

// FuzzLeaseFromACK: any packet off the wire, once the library parsed it,
// must give a lease whose invariants hold, or an error; never a panic.
func FuzzLeaseFromACK(f *testing.F) {
	f.Add(ack(f, dhcpv4.OptSubnetMask(net.CIDRMask(24, 32)), dhcpv4.OptRouter(net.IPv4(10, 0, 2, 2)),
		dhcpv4.OptGeneric(dhcpv4.OptionInterfaceMTU, []byte{0x23, 0x29}), dhcpv4.OptIPAddressLeaseTime(time.Hour)).ToBytes())
	f.Add(ack(f, dhcpv4.OptGeneric(dhcpv4.OptionClasslessStaticRoute, []byte{24, 192, 168, 1, 10, 0, 2, 1, 0, 10, 0, 2, 2})).ToBytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := dhcpv4.FromBytes(b)
		if err != nil {
			return
		}
		l, err := LeaseFromACK(m, t0)
		if err != nil {
			return
		}
		if !l.Address.IsValid() || !l.Address.Addr().Is4() {
			t.Fatalf("address %v", l.Address)
		}
		if l.MTU != 0 && l.MTU < 68 {
			t.Fatalf("MTU %d", l.MTU)
		}
		if l.Time < Infinite && !(0 < l.T1 && l.T1 < l.T2 && l.T2 < l.Time) && l.Time > 0 {
			t.Fatalf("timers %s %s %s", l.T1, l.T2, l.Time)
		}
		for _, r := range l.Routes {
			if !r.Dst.IsValid() || r.Dst != r.Dst.Masked() {
				t.Fatalf("route %+v", r)
			}
		}
		// Names from the wire reach files only if they are names.
		if l.Hostname != "" && syntax.Hostname(l.Hostname) != nil {
			t.Fatalf("hostname %q", l.Hostname)
		}
		for _, d := range append([]string{l.Domain}, l.Search...) {
			if d != "" && syntax.DNSName(d) != nil {
				t.Fatalf("domain %q", d)
			}
		}
		for _, w := range l.Warnings {
			if strings.ContainsAny(w, "\n\r") {
				t.Fatalf("warning %q spans lines", w)
			}
		}
	})
}
