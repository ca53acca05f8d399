package nocloud

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/berth-node/berth/network"
)

// NetworkConfig turns a network-config into the network package's
// Config, the one berth.net= and friends give on the kernel command line.
//
// network.Config configures one interface (Up brings up one link), so
// the network-config must hold exactly one Ethernet; more are refused,
// naming them, rather than configuring one and dropping the rest. Within
// it, what Config can express is taken: DHCPv4 or one static IPv4 address
// with its default gateway and more IPv4 routes through gateways on its
// subnet, DHCPv6 or SLAAC, DNS servers, search domains and the MTU.
// What it cannot express is refused, naming the key: routes beside DHCP,
// routes without a gateway on the subnet, IPv6 routes, static IPv6
// addresses and gateways, DHCPv4 together with a static address. A refusal here is not a
// mistake in the file: it is what berth's network setup cannot do yet.
//
// Only the first group of Config's fields is set (the interface and its
// addressing). The caller fills in the rest as for ParseConfig's result:
// ResolvConfPath, SetHostname, the timeouts, and Hostname (meta-data's
// local-hostname, if berth is to set it here). The warnings are what is
// read but not applied (a route metric, a second match condition).
func NetworkConfig(n *Network) (network.Config, []Problem, error) {
	errs := &problemList{file: FileNetworkConfig}
	warn := &problemList{file: FileNetworkConfig}
	var c network.Config
	if n == nil {
		return c, nil, Problems{{File: FileNetworkConfig, Message: "no network configuration"}}
	}
	switch len(n.Ethernets) {
	case 0:
		errs.add(0, "", "no interface to configure; give one ethernet (version 2) or physical entry (version 1)")
		return c, nil, errs.err()
	case 1:
	default:
		ids := make([]string, len(n.Ethernets))
		for i, e := range n.Ethernets {
			ids[i] = fmt.Sprintf("%s (line %d)", e.Path, e.Line)
		}
		errs.add(n.Ethernets[1].Line, n.Ethernets[1].Path, "%d interfaces: %s; berth configures one interface, so give only the one the node uses",
			len(ids), strings.Join(ids, ", "))
		return c, nil, errs.err()
	}
	e := n.Ethernets[0]
	// at is the key path of a field for messages; version 1 spreads
	// them over the entry's subnets.
	at := func(field string) string {
		if n.Version == 1 {
			return e.Path + ".subnets"
		}
		return e.Path + "." + field
	}

	c.Interface = e.Selector()
	if e.MatchMAC != "" && e.MatchName != "" {
		warn.add(e.Line, at("match.name"), "not checked: berth finds the interface by its MAC address alone")
	}
	c.MTU = e.MTU

	var v4 []netip.Prefix
	for _, a := range e.Addresses {
		if a.Addr().Is4() {
			v4 = append(v4, a)
		} else {
			errs.add(e.Line, at("addresses"), "%s: static IPv6 addresses are not supported yet; use dhcp6 or router advertisements", a)
		}
	}
	switch {
	case len(v4) > 1:
		errs.add(e.Line, at("addresses"), "%d IPv4 addresses (%s); berth configures one", len(v4), joinStrings(v4))
	case len(v4) == 1 && e.DHCP4:
		errs.add(e.Line, at("dhcp4"), "true beside the static address %s; berth configures one or the other", v4[0])
	case len(v4) == 1:
		c.Mode, c.Address = network.ModeStatic, v4[0]
	case e.DHCP4:
		c.Mode = network.ModeDHCP
	default:
		errs.add(e.Line, e.Path, "no IPv4 configuration: give dhcp4: true or an IPv4 address (berth needs IPv4 on its interface)")
	}

	gw, gwPath, gwLine := e.Gateway4, at("gateway4"), e.Line
	for _, r := range e.Routes {
		switch {
		case !r.IsDefault() && r.To.Addr().Is6():
			errs.add(r.Line, r.Path, "a route to %s: IPv6 routes are not supported yet; router advertisements give IPv6's", r.To)
		case !r.IsDefault() && c.Mode != network.ModeStatic:
			errs.add(r.Line, r.Path, "a route to %s beside DHCP: berth takes DHCP's routes (option 121) and adds none; give a static address to add routes", r.To)
		case !r.IsDefault() && !r.Via.IsValid():
			errs.add(r.Line, join(r.Path, "via"), "missing: a route to %s needs a gateway on %s (on-link routes are not supported yet)", r.To, c.Address.Masked())
		case !r.IsDefault() && !c.Address.Masked().Contains(r.Via):
			errs.add(r.Line, join(r.Path, "via"), "%s is outside %s, which berth's static setup does not route to", r.Via, c.Address)
		case !r.IsDefault():
			c.Routes = append(c.Routes, network.Route{Dst: r.To.Masked(), Gateway: r.Via})
			if r.HasMetric {
				warn.add(r.Line, join(r.Path, "metric"), "not applied: the route takes the kernel's default metric")
			}
		case r.To.Addr().Is6():
			errs.add(r.Line, r.Path, "an IPv6 default route: not supported yet; router advertisements give IPv6's")
		case gw.IsValid() && gw != r.Via:
			errs.add(r.Line, r.Path, "a default route via %s beside the gateway %s; give one", r.Via, gw)
		default:
			gw, gwPath, gwLine = r.Via, join(r.Path, "via"), r.Line
			if r.HasMetric {
				warn.add(r.Line, join(r.Path, "metric"), "not applied: the one default route takes the kernel's default metric")
			}
		}
	}
	if e.Gateway6.IsValid() {
		errs.add(e.Line, at("gateway6"), "not supported yet; router advertisements give IPv6's default route")
	}
	if gw.IsValid() {
		switch {
		case c.Mode != network.ModeStatic:
			errs.add(gwLine, gwPath, "%s without a static IPv4 address; with DHCP the server gives the gateway", gw)
		case !c.Address.Masked().Contains(gw):
			errs.add(gwLine, gwPath, "%s is outside %s, which berth's static setup does not route to", gw, c.Address)
		default:
			c.Gateway = gw
		}
	}

	ns := append(append([]netip.Addr(nil), e.Nameservers.Addresses...), n.Nameservers.Addresses...)
	c.DNS = ns
	c.Search = append(append([]string(nil), e.Nameservers.Search...), n.Nameservers.Search...)

	c.IPv6 = e.DHCP6 || e.SLAAC
	c.DHCPv6 = e.DHCP6
	if err := errs.err(); err != nil {
		return network.Config{}, warn.problems(), err
	}
	return c, warn.problems(), nil
}

func joinStrings[T fmt.Stringer](xs []T) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = x.String()
	}
	return strings.Join(s, ", ")
}

// NetworkOver is the network a node booted from a seed configures: base
// (network.ParseConfig's result from the kernel command line, with its
// timeouts, hostname and resolv.conf path) with seed's interface and
// addressing (NetworkConfig's result) in place of the default DHCP.
//
// The kernel command line is the last word, as for the rest of berth's
// keys: when it sets any of the keys that say what network-config says
// (berth.net, berth.ip, berth.gw, berth.dns, berth.mtu, berth.iface,
// berth.ipv6), base is kept whole and cmdline names those keys, so that a
// node whose seed gives a wrong address can be booted by hand. A nil seed
// (no network-config, or config: disabled) keeps base.
func NetworkOver(base network.Config, seed *network.Config, has func(key string) bool) (c network.Config, cmdline []string) {
	for _, k := range []string{network.KeyNet, network.KeyIP, network.KeyGateway, network.KeyDNS, network.KeyMTU, network.KeyIface, network.KeyIPv6} {
		if has(k) {
			cmdline = append(cmdline, k)
		}
	}
	if seed == nil || len(cmdline) > 0 {
		return base, cmdline
	}
	c = base
	c.Mode, c.Interface, c.Address, c.Gateway = seed.Mode, seed.Interface, seed.Address, seed.Gateway
	c.DNS, c.MTU, c.IPv6, c.DHCPv6 = seed.DNS, seed.MTU, seed.IPv6, seed.DHCPv6
	c.Routes, c.Search = seed.Routes, seed.Search
	return c, nil
}
