package nocloud

import (
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/berth-node/berth/internal/syntax"
	yaml "go.yaml.in/yaml/v3"
)

// Network is a network-config berth can apply: Ethernet interfaces with
// their addresses, routes and name servers.
type Network struct {
	// Version is the format: 1 (cloud-init's) or 2 (netplan's).
	Version int `json:"version"`
	// Ethernets are the interfaces in the order the file gives them.
	Ethernets []Ethernet `json:"ethernets"`
	// Nameservers are version 1's nameserver entries that name no
	// interface: for the node as a whole.
	Nameservers Nameservers `json:"nameservers,omitzero"`
}

// Ethernet is one interface: a version 2 ethernets entry or a version 1
// physical entry.
type Ethernet struct {
	// ID is the entry's name: version 2's configuration ID, version 1's
	// name.
	ID string `json:"id"`
	// Path and Line locate the entry, for messages.
	Path string `json:"path"`
	Line int    `json:"line"`
	// MatchMAC selects the interface by MAC address (lower case).
	MatchMAC string `json:"matchMac,omitempty"`
	// MatchName selects the interface by its kernel name. When neither
	// MatchMAC nor MatchName is set, ID is the interface's name.
	MatchName string `json:"matchName,omitempty"`
	// SetName is the name the seed asks the interface be renamed to
	// (version 2's set-name; version 1's name when a MAC address selects
	// the interface). berth does not rename interfaces: see NetworkConfig.
	SetName string `json:"setName,omitempty"`
	DHCP4   bool   `json:"dhcp4,omitempty"`
	DHCP6   bool   `json:"dhcp6,omitempty"`
	// SLAAC is version 1's ipv6_slaac subnet.
	SLAAC     bool           `json:"slaac,omitempty"`
	Addresses []netip.Prefix `json:"addresses,omitempty"`
	// Gateway4 and Gateway6 are gateway4/gateway6 (version 2) or a
	// subnet's gateway (version 1). A route to default is in Routes.
	Gateway4    netip.Addr  `json:"gateway4,omitzero"`
	Gateway6    netip.Addr  `json:"gateway6,omitzero"`
	Routes      []Route     `json:"routes,omitempty"`
	Nameservers Nameservers `json:"nameservers,omitzero"`
	MTU         int         `json:"mtu,omitempty"`
}

// Selector is how berth's network configuration would find the
// interface: its MAC address, else its name.
func (e Ethernet) Selector() string {
	switch {
	case e.MatchMAC != "":
		return e.MatchMAC
	case e.MatchName != "":
		return e.MatchName
	}
	return e.ID
}

// Route is one static route. To is 0.0.0.0/0 or ::/0 for a default
// route (written to: default, or 0.0.0.0/0).
type Route struct {
	To  netip.Prefix `json:"to"`
	Via netip.Addr   `json:"via,omitzero"`
	// Metric is the route's metric; HasMetric says whether one was given.
	Metric    uint32 `json:"metric,omitempty"`
	HasMetric bool   `json:"hasMetric,omitempty"`
	Path      string `json:"path"`
	Line      int    `json:"line"`
}

// IsDefault reports whether r is a default route.
func (r Route) IsDefault() bool { return r.To.Bits() == 0 }

// Nameservers are DNS servers and search domains.
type Nameservers struct {
	Addresses []netip.Addr `json:"addresses,omitempty"`
	Search    []string     `json:"search,omitempty"`
}

// ParseNetworkConfig reads network-config: version 1 or 2, with or
// without a top-level network: key. It returns nil for an empty file and
// for config: disabled (with a warning), which cloud-init takes as no
// network configuration. Anything berth does not configure is an error
// naming its line and key path; the warnings are what is read but not
// applied.
func ParseNetworkConfig(data []byte) (*Network, []Problem, error) {
	w := &walker{problemList: problemList{file: FileNetworkConfig}}
	warn := &problemList{file: FileNetworkConfig}
	if len(data) > MaxFileSize {
		return nil, nil, Problems{{File: FileNetworkConfig, Message: sizeMessage(len(data))}}
	}
	root, err := w.decode(data)
	if err != nil || root == nil {
		return nil, nil, err
	}
	var n *Network
	w.run(func() { n = w.network(root, warn) })
	if err := w.err(); err != nil {
		return nil, warn.problems(), err
	}
	return n, warn.problems(), nil
}

func (w *walker) network(root *yaml.Node, warn *problemList) *Network {
	const want = "a mapping with version: 1 or 2 (or a network: key holding one)"
	pairs, ok := w.mapping(root, "", want)
	if !ok {
		return nil
	}
	path := ""
	for _, p := range pairs {
		if p.key != "network" {
			continue
		}
		// cloud-init takes the file with or without the key that
		// cloud.cfg puts around it; with it, nothing else belongs there.
		for _, q := range pairs {
			if q.key != "network" {
				w.add(q.line, q.key, "unknown key beside network:")
			}
		}
		path = "network"
		if pairs, ok = w.mapping(p.val, path, want); !ok {
			return nil
		}
		break
	}
	var version *pair
	for i := range pairs {
		switch pairs[i].key {
		case "version":
			version = &pairs[i]
		case "config":
			if s := w.resolve(pairs[i].val); s.Kind == yaml.ScalarNode && s.Value == "disabled" {
				warn.add(pairs[i].line, join(path, "config"), "disabled: the seed leaves the network to berth's own configuration")
				return nil
			}
		}
	}
	if version == nil {
		w.add(root.Line, join(path, "version"), "missing; want 1 or 2")
		return nil
	}
	v, ok := w.integer(version.val, join(path, "version"), 1, 2)
	if !ok {
		return nil
	}
	n := &Network{Version: int(v)}
	if v == 1 {
		w.v1(n, pairs, path, warn)
	} else {
		w.v2(n, pairs, path, warn)
	}
	w.checkIDs(n)
	return n
}

// checkIDs refuses two entries for one interface.
func (w *walker) checkIDs(n *Network) {
	seen := map[string]string{}
	for _, e := range n.Ethernets {
		s := e.Selector()
		if first, dup := seen[s]; dup {
			w.add(e.Line, e.Path, "selects %s, as %s does; give each interface one entry", s, first)
			continue
		}
		seen[s] = e.Path
	}
}

// macAddress reads an Ethernet MAC address, returned in lower case.
func (w *walker) macAddress(n *yaml.Node, path string) (string, bool) {
	s, line, ok := w.scalar(n, path, "a MAC address")
	if !ok {
		return "", false
	}
	mac, err := net.ParseMAC(s)
	if err != nil || len(mac) != 6 {
		w.add(line, path, "%q is not an Ethernet MAC address (like 52:54:00:12:34:56)", s)
		return "", false
	}
	return mac.String(), true
}

// ifName reads a Linux interface name: what the kernel's dev_valid_name
// takes, at most 15 bytes (IFNAMSIZ less the NUL).
func (w *walker) ifName(n *yaml.Node, path string) (string, bool) {
	s, line, ok := w.scalar(n, path, "an interface name")
	if !ok {
		return "", false
	}
	if msg := ifNameProblem(s); msg != "" {
		w.add(line, path, "%q %s", s, msg)
		return "", false
	}
	return s, true
}

func ifNameProblem(s string) string {
	if strings.ContainsAny(s, "*?[") {
		return "is a pattern; berth matches one interface by its exact name or MAC address"
	}
	if s == "" || len(s) > 15 || s == "." || s == ".." {
		return "is not an interface name (1 to 15 characters)"
	}
	for _, r := range s {
		if r == '/' || r == ':' || r <= ' ' || r > '~' {
			return "is not an interface name (no '/', ':', spaces or control characters)"
		}
	}
	return ""
}

// hostAddr reads an address berth may use as a gateway, route target or
// name server: unicast, not unspecified.
func (w *walker) hostAddr(n *yaml.Node, path, what string, zone bool) (netip.Addr, bool) {
	s, line, ok := w.scalar(n, path, what)
	if !ok {
		return netip.Addr{}, false
	}
	return w.checkHostAddr(s, line, path, what, zone)
}

func (w *walker) checkHostAddr(s string, line int, path, what string, zone bool) (netip.Addr, bool) {
	if err := syntax.IP(s, zone); err != nil {
		w.add(line, path, "want %s: %v", what, err)
		return netip.Addr{}, false
	}
	a, _ := netip.ParseAddr(s) // syntax.IP parsed it
	if a.IsUnspecified() || a.IsMulticast() {
		w.add(line, path, "%s is not a host address", s)
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// prefix reads ADDRESS/LEN or, for IPv4, ADDRESS/NETMASK (cloud-init's
// own NoCloud example writes 192.168.1.10/255.255.255.0); mask is a
// separate netmask (version 1), "" when none.
func (w *walker) prefix(s string, line int, path, mask string) (netip.Prefix, bool) {
	addrPart, lenPart, hasLen := strings.Cut(s, "/")
	if mask != "" {
		if hasLen {
			w.add(line, path, "%q has a prefix length and the subnet a netmask; give one", s)
			return netip.Prefix{}, false
		}
		lenPart, hasLen = mask, true
	}
	a, err := netip.ParseAddr(addrPart)
	if err != nil || a.Zone() != "" {
		w.add(line, path, "%q is not an IP address with a prefix length, like 192.0.2.10/24", s)
		return netip.Prefix{}, false
	}
	if !hasLen {
		w.add(line, path, "%q has no prefix length; write it like %s/24", s, addrPart)
		return netip.Prefix{}, false
	}
	bits, err := strconv.Atoi(lenPart)
	if err != nil || strings.HasPrefix(lenPart, "+") {
		bits = maskBits(lenPart, a.Is4())
	}
	if bits < 0 || bits > a.BitLen() {
		w.add(line, path, "%q: prefix length or netmask %q is not one for an IPv%d address", s, lenPart, map[bool]int{true: 4, false: 6}[a.Is4()])
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, bits), true
}

// maskBits turns a dotted IPv4 netmask into a prefix length; -1 when it
// is none.
func maskBits(m string, is4 bool) int {
	a, err := netip.ParseAddr(m)
	if !is4 || err != nil || !a.Is4() {
		return -1
	}
	b := a.As4()
	ones, size := net.IPMask(b[:]).Size()
	if size == 0 {
		return -1 // not contiguous
	}
	return ones
}

// routeTo reads a route destination: default, or a prefix.
func (w *walker) routeTo(s string, line int, path string) (netip.Prefix, bool) {
	if s == "default" {
		return netip.Prefix{}, true // family from the gateway
	}
	p, ok := w.prefix(s, line, path, "")
	if !ok {
		return p, false
	}
	if p.Masked() != p {
		w.add(line, path, "%s has host bits set; the network is %s", s, p.Masked())
		return netip.Prefix{}, false
	}
	return p, true
}

// searchDomain checks a search domain.
func (w *walker) searchDomain(s string, line int, path string) (string, bool) {
	if err := syntax.DNSName(s); err != nil {
		w.add(line, path, "%v", err)
		return "", false
	}
	return s, true
}

// mtu reads an MTU: from IPv4's minimum, 68, to 65535, as berth.mtu.
func (w *walker) mtu(n *yaml.Node, path string) (int, bool) {
	v, ok := w.integer(n, path, 68, 65535)
	return int(v), ok
}

// setRoute finishes a route once its destination and gateway are read:
// to: default takes the gateway's family, and the families must agree.
func (w *walker) setRoute(r *Route, toDefault bool) bool {
	if toDefault {
		if !r.Via.IsValid() {
			w.add(r.Line, r.Path, "a default route needs via: the gateway")
			return false
		}
		bits := 0
		if r.Via.Is4() {
			r.To = netip.PrefixFrom(netip.IPv4Unspecified(), bits)
		} else {
			r.To = netip.PrefixFrom(netip.IPv6Unspecified(), bits)
		}
	}
	if r.Via.IsValid() && r.Via.Is4() != r.To.Addr().Is4() {
		w.add(r.Line, r.Path, "to %s and via %s are different IP versions", r.To, r.Via)
		return false
	}
	return true
}
