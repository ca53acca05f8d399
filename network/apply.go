package network

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Addressing is the IPv4 state berth puts on the primary link, from a
// lease or from static config.
type Addressing struct {
	Address netip.Prefix
	// ValidLft is the address lifetime in seconds for the kernel; 0 means
	// forever. The kernel drops the address itself when a lease runs out.
	ValidLft int
	Routes   []Route
	MTU      int
}

// routeProto marks berth's routes (RTPROT_DHCP, as dhcpcd and
// systemd-networkd use) so stale ones can be found and removed.
const routeProto = netlink.RouteProtocol(unix.RTPROT_DHCP)

// apply makes the link match a: MTU, the address with its lifetime, and
// exactly a.Routes among berth's routes on the link. Every step is a
// replace, so applying a renewed lease again is safe.
func (e *env) apply(log *slog.Logger, link netlink.Link, a Addressing, old netip.Prefix) error {
	name := link.Attrs().Name
	if a.MTU > 0 && a.MTU != link.Attrs().MTU {
		if err := e.nl.LinkSetMTU(link, a.MTU); err != nil {
			return fmt.Errorf("setting MTU %d on %s: %w", a.MTU, name, err)
		}
	}
	if old.IsValid() && old != a.Address {
		if err := e.nl.AddrDel(link, nlAddr(old, 0)); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
			log.Warn("could not remove the previous address", "interface", name, "address", old, "err", err)
		}
	}
	if err := e.nl.AddrReplace(link, nlAddr(a.Address, a.ValidLft)); err != nil {
		return fmt.Errorf("adding address %s (valid %ds) to %s: %w", a.Address, a.ValidLft, name, err)
	}
	want := map[string]bool{}
	// On-link routes first: a gateway route needs its gateway reachable.
	for _, pass := range []bool{false, true} {
		for _, r := range a.Routes {
			if r.Gateway.IsValid() != pass {
				continue
			}
			nr := e.nlRoute(link, a.Address, r)
			want[routeKey(nr)] = true
			if err := e.nl.RouteReplace(nr); err != nil {
				return fmt.Errorf("adding route %s via %s on %s: %w", r.Dst, gwString(r.Gateway), name, err)
			}
		}
	}
	have, err := e.nl.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{LinkIndex: link.Attrs().Index, Protocol: routeProto},
		netlink.RT_FILTER_OIF|netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return fmt.Errorf("listing routes on %s: %w", name, err)
	}
	for i := range have {
		if !want[routeKey(&have[i])] {
			if err := e.nl.RouteDel(&have[i]); err != nil {
				log.Warn("could not remove a stale route", "interface", name, "route", have[i].String(), "err", err)
			}
		}
	}
	return nil
}

// unapply removes the address and berth's routes, when a lease is lost.
func (e *env) unapply(link netlink.Link, addr netip.Prefix) error {
	var errs []error
	have, err := e.nl.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{LinkIndex: link.Attrs().Index, Protocol: routeProto},
		netlink.RT_FILTER_OIF|netlink.RT_FILTER_PROTOCOL)
	if err == nil {
		for i := range have {
			if err := e.nl.RouteDel(&have[i]); err != nil && !errors.Is(err, unix.ESRCH) {
				errs = append(errs, fmt.Errorf("removing route %s: %w", have[i].String(), err))
			}
		}
	}
	if addr.IsValid() {
		if err := e.nl.AddrDel(link, nlAddr(addr, 0)); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
			errs = append(errs, fmt.Errorf("removing address %s from %s: %w", addr, link.Attrs().Name, err))
		}
	}
	return errors.Join(errs...)
}

func nlAddr(p netip.Prefix, validLft int) *netlink.Addr {
	a := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 32)}}
	if validLft > 0 {
		a.ValidLft, a.PreferedLft = validLft, validLft
	}
	return a
}

func (e *env) nlRoute(link netlink.Link, src netip.Prefix, r Route) *netlink.Route {
	nr := &netlink.Route{
		LinkIndex: link.Attrs().Index,
		Dst:       &net.IPNet{IP: r.Dst.Addr().AsSlice(), Mask: net.CIDRMask(r.Dst.Bits(), 32)},
		Src:       src.Addr().AsSlice(),
		Protocol:  routeProto,
		Table:     unix.RT_TABLE_MAIN,
	}
	if r.Gateway.IsValid() {
		nr.Gw = r.Gateway.AsSlice()
		nr.Scope = netlink.SCOPE_UNIVERSE
		if !src.Masked().Contains(r.Gateway) {
			// A gateway outside the subnet (RFC 3442 allows it) is
			// reachable on the link itself.
			nr.Flags |= int(netlink.FLAG_ONLINK)
		}
	} else {
		nr.Scope = netlink.SCOPE_LINK
	}
	return nr
}

func routeKey(r *netlink.Route) string {
	dst := "0.0.0.0/0"
	if r.Dst != nil {
		dst = r.Dst.String()
	}
	return fmt.Sprintf("%s via %v", dst, r.Gw)
}

func gwString(a netip.Addr) string {
	if !a.IsValid() {
		return "on-link"
	}
	return a.String()
}
