package network

import (
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"

	"github.com/berth-node/berth/network/resolvconf"
)

// dnsState is what a Handle renders /etc/resolv.conf from after Up: the
// newest lease's DNS options, what Up added to them (berth.dns, DHCPv6's
// servers and search list) and the override PID 1 sets from the plan. mu
// also serialises the writes, so the file last written is the newest
// state's, whichever goroutine (the renewer, SetDNSOverride) wrote it.
type dnsState struct {
	path string // "": resolv.conf is not Up's to write

	mu          sync.Mutex
	leaseDNS    []netip.Addr // option 6
	domain      string       // option 15
	leaseSearch []string     // option 119
	extraDNS    []netip.Addr // berth.dns, then DHCPv6's, after the lease's
	extraSearch []string     // the config's (a seed's network-config), then DHCPv6's, after the lease's
	// nameservers and search are the override: where non-empty they
	// replace the servers and the search list above.
	nameservers []string
	search      []string
}

// file is what resolv.conf says now; d.mu must be held.
func (d *dnsState) file() (resolvconf.File, error) {
	return resolvconf.Merge(slices.Concat(d.leaseDNS, d.extraDNS), d.domain, slices.Concat(d.leaseSearch, d.extraSearch),
		d.nameservers, d.search)
}

// setLease records a new lease's DNS options; d.mu must be held.
func (d *dnsState) setLease(l Lease) {
	d.leaseDNS, d.domain, d.leaseSearch = slices.Clone(l.DNS), l.Domain, slices.Clone(l.Search)
}

// leased follows a renewed or regained lease: resolv.conf is rewritten if
// what it should say changed (a new DNS option, unless the override hides
// it).
func (d *dnsState) leased(log *slog.Logger, l Lease) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.setLease(l)
	if d.path == "" {
		return
	}
	rc, err := d.file()
	if err == nil {
		err = resolvconf.WriteIfChanged(d.path, rc)
	}
	if err != nil {
		log.Error("updating resolv.conf after a DHCP renewal", "file", d.path, "err", err)
	}
}

// SetDNSOverride pins the nameservers and the search list of
// /etc/resolv.conf for as long as the lease is kept: from this call on,
// every rewrite after a renewal or a regained lease uses nameservers
// instead of the DHCP-given servers (the lease's option 6, berth.dns and
// DHCPv6's), and search instead of the DHCP-given domain and search list
// (options 15 and 119, DHCPv6's), each where non-empty; an empty one
// keeps following the lease. PID 1 calls it with the plan's DNS (the
// NodeConfig's spec.instance.network), so renewals keep what the plan
// wrote: both render through package resolvconf, so the same settings
// give the same bytes and a renewal that brings nothing new leaves the
// file alone. Both empty go back to following the lease entirely.
//
// The file is brought in line at once when it says something else (a
// renewal may have rewritten it before this call). An override that is
// not valid (a nameserver that is not an IP address, a search domain
// with spaces) is an error and changes nothing; an error writing the file
// keeps the override, for the next renewal to write. A nil Handle (static
// and off modes: nothing renews) does nothing. Safe to call while the
// renewer runs, and more than once.
func (h *Handle) SetDNSOverride(nameservers, search []string) error {
	if h == nil || h.dns == nil {
		return nil
	}
	d := h.dns
	d.mu.Lock()
	defer d.mu.Unlock()
	old := [2][]string{d.nameservers, d.search}
	d.nameservers, d.search = slices.Clone(nameservers), slices.Clone(search)
	rc, err := d.file()
	if err != nil {
		d.nameservers, d.search = old[0], old[1]
		return fmt.Errorf("DNS override: %w", err)
	}
	if d.path == "" {
		return nil
	}
	return resolvconf.WriteIfChanged(d.path, rc)
}
