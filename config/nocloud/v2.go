package nocloud

import (
	yaml "go.yaml.in/yaml/v3"
)

// v2Unsupported are netplan's device types berth refuses.
var v2Unsupported = map[string]bool{
	"bonds": true, "bridges": true, "vlans": true, "wifis": true, "modems": true,
	"tunnels": true, "vrfs": true, "dummy-devices": true, "virtual-ethernets": true,
	"nm-devices": true,
}

const ethernetsOnly = "not supported (berth configures ethernets only)"

// v2 reads netplan's form: version, renderer and ethernets.
func (w *walker) v2(n *Network, pairs []pair, path string, warn *problemList) {
	for _, p := range pairs {
		kp := join(path, p.key)
		switch {
		case p.key == "version":
		case p.key == "renderer":
			w.renderer(p.val, kp)
		case p.key == "ethernets":
			ents, ok := w.mapping(p.val, kp, "a mapping of interface IDs to their settings")
			if !ok {
				continue
			}
			for _, e := range ents {
				if eth, ok := w.ethernetV2(e, join(kp, e.key), warn); ok {
					n.Ethernets = append(n.Ethernets, eth)
				}
			}
		case v2Unsupported[p.key]:
			w.add(p.line, kp, ethernetsOnly)
		default:
			w.add(p.line, kp, "unknown key")
		}
	}
}

// renderer accepts netplan's renderers: which one renders the config
// does not matter to berth, which renders it itself.
func (w *walker) renderer(n *yaml.Node, path string) {
	s, line, ok := w.scalar(n, path, "networkd or NetworkManager")
	if ok && s != "networkd" && s != "NetworkManager" {
		w.add(line, path, "%q: want networkd or NetworkManager", s)
	}
}

func (w *walker) ethernetV2(e pair, path string, warn *problemList) (Ethernet, bool) {
	eth := Ethernet{ID: e.key, Path: path, Line: e.line}
	before := len(w.list) + w.omitted
	fields, ok := w.mapping(e.val, path, "a mapping of settings")
	if !ok {
		return eth, false
	}
	var match, setName *pair
	for i, f := range fields {
		fp := join(path, f.key)
		switch f.key {
		case "match":
			match = &fields[i]
		case "set-name":
			setName = &fields[i]
		case "renderer":
			w.renderer(f.val, fp)
		case "optional":
			// berth waits for the one interface it configures, for a
			// bounded time, whatever this says.
			w.boolean(f.val, fp)
		case "dhcp4":
			eth.DHCP4, _ = w.boolean(f.val, fp)
		case "dhcp6":
			eth.DHCP6, _ = w.boolean(f.val, fp)
		case "addresses":
			w.addressesV2(&eth, f.val, fp)
		case "gateway4", "gateway6":
			a, ok := w.hostAddr(f.val, fp, "an IP address", false)
			switch {
			case !ok:
			case (f.key == "gateway4") != a.Is4():
				w.add(f.line, fp, "%s is not an IPv%s address", a, f.key[len(f.key)-1:])
			case a.Is4():
				eth.Gateway4 = a
			default:
				eth.Gateway6 = a
			}
		case "routes":
			w.routesV2(&eth, f.val, fp)
		case "nameservers":
			eth.Nameservers = w.nameserversV2(f.val, fp)
		case "mtu":
			eth.MTU, _ = w.mtu(f.val, fp)
		default:
			w.add(f.line, fp, "not supported: berth reads match, set-name, dhcp4, dhcp6, addresses, routes, gateway4, gateway6, nameservers, mtu, optional and renderer")
		}
	}
	if match != nil {
		w.matchV2(&eth, match.val, join(path, "match"))
	} else if msg := ifNameProblem(e.key); msg != "" {
		// Without match, the ID is the interface name.
		w.add(e.line, path, "%q %s; without match:, the ID is the interface's name", e.key, msg)
	}
	if setName != nil {
		sp := join(path, "set-name")
		if name, ok := w.ifName(setName.val, sp); ok {
			if match == nil {
				w.add(setName.line, sp, "needs match: (netplan renames only matched interfaces)")
			} else {
				eth.SetName = name
				warn.add(setName.line, sp, "not applied: berth finds the interface by its match and keeps the kernel's name for it")
			}
		}
	}
	return eth, len(w.list)+w.omitted == before
}

func (w *walker) matchV2(eth *Ethernet, n *yaml.Node, path string) {
	fields, ok := w.mapping(n, path, "a mapping with macaddress or name")
	if !ok {
		return
	}
	for _, f := range fields {
		fp := join(path, f.key)
		switch f.key {
		case "macaddress":
			eth.MatchMAC, _ = w.macAddress(f.val, fp)
		case "name":
			eth.MatchName, _ = w.ifName(f.val, fp)
		default:
			w.add(f.line, fp, "not supported: berth matches by macaddress or name")
		}
	}
	if len(fields) == 0 {
		w.add(n.Line, path, "empty: give macaddress or name (an empty match would take every interface)")
	}
}

func (w *walker) addressesV2(eth *Ethernet, n *yaml.Node, path string) {
	items, ok := w.sequence(n, path, "a list of addresses with prefix lengths")
	if !ok {
		return
	}
	for i, it := range items {
		ip := index(path, i)
		r := w.resolve(it)
		if r.Kind == yaml.MappingNode {
			w.add(r.Line, ip, "address options (lifetime, label) are not supported; write the address alone, like 192.0.2.10/24")
			continue
		}
		s, line, ok := w.scalar(r, ip, "an address with a prefix length")
		if !ok {
			continue
		}
		if p, ok := w.prefix(s, line, ip, ""); ok {
			if _, ok := w.checkHostAddr(p.Addr().String(), line, ip, "an address", false); ok {
				eth.Addresses = append(eth.Addresses, p)
			}
		}
	}
}

func (w *walker) routesV2(eth *Ethernet, n *yaml.Node, path string) {
	items, ok := w.sequence(n, path, "a list of routes (to:, via:, metric:)")
	if !ok {
		return
	}
	for i, it := range items {
		rp := index(path, i)
		fields, ok := w.mapping(it, rp, "a route (to:, via:, metric:)")
		if !ok {
			continue
		}
		r := Route{Path: rp, Line: w.resolve(it).Line}
		good, toDefault, hasTo := true, false, false
		for _, f := range fields {
			fp := join(rp, f.key)
			switch f.key {
			case "to":
				hasTo = true
				s, line, ok := w.scalar(f.val, fp, "default or a network, like 10.0.0.0/8")
				if !ok {
					good = false
					continue
				}
				if s == "default" {
					toDefault = true
				} else if r.To, ok = w.routeTo(s, line, fp); !ok {
					good = false
				}
			case "via":
				var ok bool
				if r.Via, ok = w.hostAddr(f.val, fp, "an IP address", false); !ok {
					good = false
				}
			case "metric":
				m, ok := w.integer(f.val, fp, 0, 1<<32-1)
				r.Metric, r.HasMetric = uint32(m), ok
				good = good && ok
			default:
				w.add(f.line, fp, "not supported: berth reads to, via and metric")
				good = false
			}
		}
		if !hasTo {
			w.add(r.Line, rp, "missing to:")
			good = false
		}
		if good && w.setRoute(&r, toDefault) {
			eth.Routes = append(eth.Routes, r)
		}
	}
}

func (w *walker) nameserversV2(n *yaml.Node, path string) Nameservers {
	var ns Nameservers
	fields, ok := w.mapping(n, path, "a mapping with addresses and search")
	if !ok {
		return ns
	}
	for _, f := range fields {
		fp := join(path, f.key)
		switch f.key {
		case "addresses":
			for _, it := range w.stringList(f.val, fp, "IP addresses") {
				if a, ok := w.checkHostAddr(it.val, it.line, it.path, "an IP address", true); ok {
					ns.Addresses = append(ns.Addresses, a)
				}
			}
		case "search":
			for _, it := range w.stringList(f.val, fp, "domain names") {
				if d, ok := w.searchDomain(it.val, it.line, it.path); ok {
					ns.Search = append(ns.Search, d)
				}
			}
		default:
			w.add(f.line, fp, "not supported: berth reads addresses and search")
		}
	}
	return ns
}
