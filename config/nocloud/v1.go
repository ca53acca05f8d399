package nocloud

import (
	yaml "go.yaml.in/yaml/v3"
)

const physicalOnly = "not supported (berth configures physical interfaces only)"

// v1 reads cloud-init's version 1: config is a list of physical and
// nameserver entries.
func (w *walker) v1(n *Network, pairs []pair, path string, warn *problemList) {
	var config *pair
	for i, p := range pairs {
		switch p.key {
		case "version":
		case "config":
			config = &pairs[i]
		default:
			w.add(p.line, join(path, p.key), "unknown key")
		}
	}
	if config == nil {
		w.add(0, join(path, "config"), "missing: version 1 lists its interfaces under config:")
		return
	}
	cp := join(path, "config")
	entries, ok := w.sequence(config.val, cp, "a list of physical and nameserver entries")
	if !ok {
		return
	}
	type tied struct {
		ns   Nameservers
		name string
		line int
		path string
	}
	var ties []tied
	for i, e := range entries {
		ep := index(cp, i)
		fields, ok := w.mapping(e, ep, "an entry with a type")
		if !ok {
			continue
		}
		typ := ""
		for _, f := range fields {
			if f.key == "type" {
				typ, _, _ = w.scalar(f.val, join(ep, "type"), "physical or nameserver")
			}
		}
		line := w.resolve(e).Line
		switch typ {
		case "physical":
			if eth, ok := w.physicalV1(fields, ep, line, warn); ok {
				n.Ethernets = append(n.Ethernets, eth)
			}
		case "nameserver":
			ns, iface := w.nameserverV1(fields, ep)
			if iface == "" {
				n.Nameservers.Addresses = append(n.Nameservers.Addresses, ns.Addresses...)
				n.Nameservers.Search = append(n.Nameservers.Search, ns.Search...)
			} else {
				ties = append(ties, tied{ns, iface, line, ep})
			}
		case "bond", "bridge", "vlan", "route":
			w.add(line, join(ep, "type"), "%s: %s", typ, physicalOnly)
		case "":
			w.add(line, ep, "missing type: (physical or nameserver)")
		default:
			w.add(line, join(ep, "type"), "%q: unknown type; berth reads physical and nameserver", typ)
		}
	}
	// A nameserver entry may name its interface; it must be one above.
	for _, t := range ties {
		found := false
		for i := range n.Ethernets {
			if n.Ethernets[i].ID == t.name {
				ns := &n.Ethernets[i].Nameservers
				ns.Addresses = append(ns.Addresses, t.ns.Addresses...)
				ns.Search = append(ns.Search, t.ns.Search...)
				found = true
			}
		}
		if !found {
			w.add(t.line, join(t.path, "interface"), "%q is not the name of a physical entry", t.name)
		}
	}
}

func (w *walker) physicalV1(fields []pair, path string, line int, warn *problemList) (Ethernet, bool) {
	eth := Ethernet{Path: path, Line: line}
	before := len(w.list) + w.omitted
	var name *pair
	for i, f := range fields {
		fp := join(path, f.key)
		switch f.key {
		case "type":
		case "name":
			name = &fields[i]
		case "mac_address":
			eth.MatchMAC, _ = w.macAddress(f.val, fp)
		case "mtu":
			eth.MTU, _ = w.mtu(f.val, fp)
		case "subnets":
			w.subnetsV1(&eth, f.val, fp)
		default:
			w.add(f.line, fp, "not supported: berth reads name, mac_address, mtu and subnets")
		}
	}
	if name == nil {
		w.add(line, join(path, "name"), "missing: a physical entry needs a name")
	} else if s, ok := w.ifName(name.val, join(path, "name")); ok {
		eth.ID = s
		if eth.MatchMAC != "" {
			// cloud-init renames the interface with that MAC to name.
			eth.SetName = s
			warn.add(name.line, join(path, "name"), "not applied as a new name: berth finds the interface by mac_address and keeps the kernel's name for it")
		}
	}
	return eth, len(w.list)+w.omitted == before
}

func (w *walker) subnetsV1(eth *Ethernet, n *yaml.Node, path string) {
	subnets, ok := w.sequence(n, path, "a list of subnets")
	if !ok {
		return
	}
	for i, s := range subnets {
		sp := index(path, i)
		fields, ok := w.mapping(s, sp, "a subnet with a type")
		if !ok {
			continue
		}
		line := w.resolve(s).Line
		get := map[string]pair{}
		for _, f := range fields {
			get[f.key] = f
		}
		typ := ""
		if f, ok := get["type"]; ok {
			typ, _, _ = w.scalar(f.val, join(sp, "type"), "a subnet type")
		}
		static := false
		switch typ {
		case "dhcp", "dhcp4":
			eth.DHCP4 = true
		case "dhcp6", "ipv6_dhcpv6-stateful":
			eth.DHCP6 = true
		case "ipv6_slaac":
			eth.SLAAC = true
		case "static", "static6":
			static = true
		case "":
			w.add(line, sp, "missing type: (dhcp, dhcp4, dhcp6, ipv6_slaac, static or static6)")
			continue
		default:
			w.add(line, join(sp, "type"), "%q: not supported; berth reads dhcp, dhcp4, dhcp6, ipv6_slaac, static and static6", typ)
			continue
		}
		allowed := map[string]bool{"type": true, "control": true}
		if static {
			for _, k := range []string{"address", "netmask", "gateway", "dns_nameservers", "dns_search", "routes"} {
				allowed[k] = true
			}
		}
		for _, f := range fields {
			fp := join(sp, f.key)
			if !allowed[f.key] {
				if static {
					w.add(f.line, fp, "not supported: berth reads address, netmask, gateway, dns_nameservers, dns_search and routes")
				} else {
					w.add(f.line, fp, "not supported with type %s", typ)
				}
				continue
			}
			if f.key == "control" {
				// auto is what berth does: bring it up at boot.
				if c, cl, ok := w.scalar(f.val, fp, "auto"); ok && c != "auto" {
					w.add(cl, fp, "%q: berth brings its interface up at boot (auto) only", c)
				}
			}
		}
		if static {
			w.staticV1(eth, get, sp, line, typ)
		}
	}
}

func (w *walker) staticV1(eth *Ethernet, get map[string]pair, path string, line int, typ string) {
	a, ok := get["address"]
	if !ok {
		w.add(line, join(path, "address"), "missing: a static subnet needs an address")
		return
	}
	ap := join(path, "address")
	s, sline, ok := w.scalar(a.val, ap, "an address")
	if !ok {
		return
	}
	mask := ""
	if m, ok := get["netmask"]; ok {
		if mask, _, ok = w.scalar(m.val, join(path, "netmask"), "a netmask"); !ok {
			return
		}
	}
	p, ok := w.prefix(s, sline, ap, mask)
	if !ok {
		return
	}
	if _, ok := w.checkHostAddr(p.Addr().String(), sline, ap, "an address", false); !ok {
		return
	}
	if typ == "static6" && p.Addr().Is4() {
		w.add(sline, ap, "%s is IPv4 in a static6 subnet", p)
		return
	}
	eth.Addresses = append(eth.Addresses, p)
	if g, ok := get["gateway"]; ok {
		gp := join(path, "gateway")
		if gw, ok := w.hostAddr(g.val, gp, "an IP address", false); ok {
			switch {
			case gw.Is4() != p.Addr().Is4():
				w.add(g.line, gp, "%s and the address %s are different IP versions", gw, p)
			case gw.Is4() && eth.Gateway4.IsValid() && eth.Gateway4 != gw,
				gw.Is6() && eth.Gateway6.IsValid() && eth.Gateway6 != gw:
				w.add(g.line, gp, "a second gateway, %s; the interface has one per IP version", gw)
			case gw.Is4():
				eth.Gateway4 = gw
			default:
				eth.Gateway6 = gw
			}
		}
	}
	if d, ok := get["dns_nameservers"]; ok {
		for _, it := range w.stringList(d.val, join(path, "dns_nameservers"), "IP addresses") {
			if a, ok := w.checkHostAddr(it.val, it.line, it.path, "an IP address", true); ok {
				eth.Nameservers.Addresses = append(eth.Nameservers.Addresses, a)
			}
		}
	}
	if d, ok := get["dns_search"]; ok {
		for _, it := range w.stringList(d.val, join(path, "dns_search"), "domain names") {
			if s, ok := w.searchDomain(it.val, it.line, it.path); ok {
				eth.Nameservers.Search = append(eth.Nameservers.Search, s)
			}
		}
	}
	if r, ok := get["routes"]; ok {
		w.routesV1(eth, r.val, join(path, "routes"))
	}
}

func (w *walker) routesV1(eth *Ethernet, n *yaml.Node, path string) {
	items, ok := w.sequence(n, path, "a list of routes (destination, netmask, gateway, metric)")
	if !ok {
		return
	}
	for i, it := range items {
		rp := index(path, i)
		fields, ok := w.mapping(it, rp, "a route (destination, netmask, gateway, metric)")
		if !ok {
			continue
		}
		r := Route{Path: rp, Line: w.resolve(it).Line}
		good := true
		var dest string
		var destLine int
		mask := ""
		for _, f := range fields {
			fp := join(rp, f.key)
			switch f.key {
			case "destination":
				if dest, destLine, ok = w.scalar(f.val, fp, "a network"); !ok {
					good = false
				}
			case "netmask":
				if mask, _, ok = w.scalar(f.val, fp, "a netmask"); !ok {
					good = false
				}
			case "gateway":
				if r.Via, ok = w.hostAddr(f.val, fp, "an IP address", false); !ok {
					good = false
				}
			case "metric":
				m, ok := w.integer(f.val, fp, 0, 1<<32-1)
				r.Metric, r.HasMetric = uint32(m), ok
				good = good && ok
			default:
				w.add(f.line, fp, "not supported: berth reads destination, netmask, gateway and metric")
				good = false
			}
		}
		if dest == "" {
			if good {
				w.add(r.Line, join(rp, "destination"), "missing")
			}
			continue
		}
		if !good {
			continue
		}
		p, ok := w.prefix(dest, destLine, join(rp, "destination"), mask)
		if !ok {
			continue
		}
		if p.Masked() != p {
			w.add(destLine, join(rp, "destination"), "%s has host bits set; the network is %s", p, p.Masked())
			continue
		}
		r.To = p
		if w.setRoute(&r, false) {
			eth.Routes = append(eth.Routes, r)
		}
	}
}

func (w *walker) nameserverV1(fields []pair, path string) (Nameservers, string) {
	var ns Nameservers
	iface := ""
	for _, f := range fields {
		fp := join(path, f.key)
		switch f.key {
		case "type":
		case "address":
			// cloud-init takes one address or a list.
			if r := w.resolve(f.val); r.Kind == yaml.ScalarNode {
				if a, ok := w.hostAddr(r, fp, "an IP address", true); ok {
					ns.Addresses = append(ns.Addresses, a)
				}
				continue
			}
			for _, it := range w.stringList(f.val, fp, "IP addresses") {
				if a, ok := w.checkHostAddr(it.val, it.line, it.path, "an IP address", true); ok {
					ns.Addresses = append(ns.Addresses, a)
				}
			}
		case "search":
			if r := w.resolve(f.val); r.Kind == yaml.ScalarNode {
				if s, line, ok := w.scalar(r, fp, "a domain name"); ok {
					if d, ok := w.searchDomain(s, line, fp); ok {
						ns.Search = append(ns.Search, d)
					}
				}
				continue
			}
			for _, it := range w.stringList(f.val, fp, "domain names") {
				if d, ok := w.searchDomain(it.val, it.line, it.path); ok {
					ns.Search = append(ns.Search, d)
				}
			}
		case "interface":
			iface, _, _ = w.scalar(f.val, fp, "an interface name")
		default:
			w.add(f.line, fp, "not supported: berth reads address, search and interface")
		}
	}
	return ns, iface
}
