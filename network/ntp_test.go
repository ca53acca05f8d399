package network

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv6"
)

// TestLeaseNTP: option 42's servers come through in order, and one that
// cannot be a server is dropped with a warning.
func TestLeaseNTP(t *testing.T) {
	m := ack(t, dhcpv4.OptNTPServers(net.IPv4(169, 254, 169, 123), net.IPv4zero, net.IPv4(10, 0, 0, 5)))
	l, err := LeaseFromACK(m, t0)
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Addr{netip.MustParseAddr("169.254.169.123"), netip.MustParseAddr("10.0.0.5")}
	if !slices.Equal(l.NTP, want) {
		t.Errorf("NTP %v, want %v", l.NTP, want)
	}
	if len(l.Warnings) != 1 || !strings.Contains(l.Warnings[0], "option 42") {
		t.Errorf("warnings %q, want one for option 42's 0.0.0.0", l.Warnings)
	}
}

// TestLease6NTP: option 56's server-address suboptions come through.
func TestLease6NTP(t *testing.T) {
	var o dhcpv6.OptNTPServer
	a := dhcpv6.NTPSuboptionSrvAddr(net.ParseIP("fd00:ec2::123"))
	o.Suboptions.Add(&a)
	m := reply6(t, iaNA(0, 0, &dhcpv6.OptIAAddress{IPv6Addr: net.ParseIP("2600:1f18::10"), PreferredLifetime: time.Hour, ValidLifetime: time.Hour}), &o)
	l, err := Lease6FromReply(m, t0)
	if err != nil {
		t.Fatal(err)
	}
	if want := []netip.Addr{netip.MustParseAddr("fd00:ec2::123")}; !slices.Equal(l.NTP, want) {
		t.Errorf("NTP %v, want %v", l.NTP, want)
	}
}

// TestUpDHCPNTPServers: a lease with option 42 puts its servers in the
// Result, where the time phase takes them from.
func TestUpDHCPNTPServers(t *testing.T) {
	p := newPair(t)
	p.addVeth(t)
	s := &fakeServer{lease: 600 * time.Second, opts: []dhcpv4.Option{
		dhcpv4.OptNTPServers(net.IPv4(10, 99, 0, 1), net.IPv4(169, 254, 169, 123)),
	}}
	p.serve(t, s)
	log, _ := newLog(t)
	var hostnames []string
	cfg := baseConfig(p, t.TempDir(), &hostnames)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, h, err := Up(ctx, log, cfg)
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	if want := []string{"10.99.0.1", "169.254.169.123"}; !slices.Equal(res.NTP, want) {
		t.Errorf("Result.NTP %q, want option 42's %q", res.NTP, want)
	}
	if l, _ := h.Lease(); len(l.NTP) != 2 {
		t.Errorf("lease NTP %v, want 2 servers", l.NTP)
	}
	cancel()
	<-h.Done()
}
