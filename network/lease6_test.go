package network

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
	"github.com/insomniacslk/dhcp/rfc1035label"

	"github.com/berth-node/berth/internal/syntax"
)

func reply6(t testing.TB, ia *dhcpv6.OptIANA, extra ...dhcpv6.Option) *dhcpv6.Message {
	t.Helper()
	m := &dhcpv6.Message{MessageType: dhcpv6.MessageTypeReply}
	m.AddOption(dhcpv6.OptServerID(&dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: mac("02:00:00:00:00:01")}))
	if ia != nil {
		m.AddOption(ia)
	}
	for _, o := range extra {
		m.AddOption(o)
	}
	return m
}

func iaNA(t1, t2 time.Duration, addrs ...*dhcpv6.OptIAAddress) *dhcpv6.OptIANA {
	ia := &dhcpv6.OptIANA{T1: t1, T2: t2}
	for _, a := range addrs {
		ia.Options.Add(a)
	}
	return ia
}

func TestLease6FromReply(t *testing.T) {
	m := reply6(t, iaNA(0, 0,
		&dhcpv6.OptIAAddress{IPv6Addr: net.ParseIP("fe80::1"), PreferredLifetime: time.Hour, ValidLifetime: time.Hour}, // not global: skipped
		&dhcpv6.OptIAAddress{IPv6Addr: net.ParseIP("2600:1f18::10"), PreferredLifetime: 140 * time.Second, ValidLifetime: 450 * time.Second},
	), dhcpv6.OptDNS(net.ParseIP("fd00:ec2::253")))
	l, err := Lease6FromReply(m, t0)
	if err != nil {
		t.Fatal(err)
	}
	if l.Address.String() != "2600:1f18::10" || l.Preferred != 140*time.Second || l.Valid != 450*time.Second ||
		l.T1 != 70*time.Second || l.T2 != 112*time.Second || len(l.DNS) != 1 || l.Server == "" {
		t.Errorf("lease: %+v", l)
	}
	m = reply6(t, iaNA(10*time.Second, 20*time.Second,
		&dhcpv6.OptIAAddress{IPv6Addr: net.ParseIP("2600:1f18::11"), PreferredLifetime: 100 * time.Second, ValidLifetime: 200 * time.Second}))
	if l, err := Lease6FromReply(m, t0); err != nil || l.T1 != 10*time.Second || l.T2 != 20*time.Second {
		t.Errorf("server T1/T2: %+v %v", l, err)
	}
	for _, tc := range []struct {
		m    *dhcpv6.Message
		want string
	}{
		{reply6(t, nil), "no usable IA_NA address"},
		{reply6(t, iaNA(0, 0, &dhcpv6.OptIAAddress{IPv6Addr: net.ParseIP("2600::1"), PreferredLifetime: 2 * time.Hour, ValidLifetime: time.Hour})), "no usable IA_NA address"},
		{reply6(t, nil, &dhcpv6.OptStatusCode{StatusCode: iana.StatusNoAddrsAvail, StatusMessage: "pool empty"}), "pool empty"},
		{&dhcpv6.Message{MessageType: dhcpv6.MessageTypeAdvertise}, "not a DHCPv6 Reply"},
	} {
		if _, err := Lease6FromReply(tc.m, t0); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}

// TestLease6DropsBadNames: DHCPv6's DNS servers (option 23) and search
// list (option 24) get the DHCPv4 rules: bad entries dropped with a
// warning, good ones kept.
func TestLease6DropsBadNames(t *testing.T) {
	m := reply6(t, iaNA(0, 0, &dhcpv6.OptIAAddress{IPv6Addr: net.ParseIP("2600:1f18::10"), PreferredLifetime: time.Hour, ValidLifetime: time.Hour}),
		dhcpv6.OptDNS(net.ParseIP("fd00:ec2::253"), net.IPv6unspecified, net.ParseIP("ff02::1")),
		dhcpv6.OptDomainSearchList(&rfc1035label.Labels{Labels: []string{"ec2.internal", "a.example\nnameserver 6.6.6.6", "ex ample.com"}}))
	l, err := Lease6FromReply(m, t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.DNS) != 1 || l.DNS[0].String() != "fd00:ec2::253" || len(l.Search) != 1 || l.Search[0] != "ec2.internal" {
		t.Errorf("DNS %v search %q", l.DNS, l.Search)
	}
	joined := strings.Join(l.Warnings, "\n")
	for _, w := range []string{
		`option 23: DNS server "::" is unspecified; dropped`,
		`option 23: DNS server "ff02::1" is multicast; dropped`,
		`option 24: search domain dropped: "a.example\nnameserver 6.6.6.6" is not a DNS name`,
		`option 24: search domain dropped: "ex ample.com"`,
	} {
		if !strings.Contains(joined, w) {
			t.Errorf("warnings lack %q:\n%s", w, joined)
		}
	}
}

// FuzzLease6FromReply: any parsed DHCPv6 message gives a sane lease or an
// error, never a panic.
func FuzzLease6FromReply(f *testing.F) {
	f.Add(reply6(f, iaNA(0, 0, &dhcpv6.OptIAAddress{IPv6Addr: net.ParseIP("2600:1f18::10"), PreferredLifetime: 140 * time.Second, ValidLifetime: 450 * time.Second})).ToBytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := dhcpv6.MessageFromBytes(b)
		if err != nil {
			return
		}
		l, err := Lease6FromReply(m, t0)
		if err != nil {
			return
		}
		if !l.Address.IsGlobalUnicast() || l.Valid <= 0 || l.Preferred > l.Valid || l.T1 < time.Second || l.T2 < l.T1 {
			t.Fatalf("lease %+v", l)
		}
		for _, d := range l.Search {
			if syntax.DNSName(d) != nil {
				t.Fatalf("search domain %q", d)
			}
		}
	})
}
