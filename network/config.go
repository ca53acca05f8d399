package network

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netns"
)

// Mode says how the primary interface gets its IPv4 address.
type Mode string

// The modes accepted by berth.net=.
const (
	ModeDHCP   Mode = "dhcp"
	ModeStatic Mode = "static"
	ModeOff    Mode = "off"
)

// DefaultResolvConfPath is where ParseConfig points ResolvConfPath.
const DefaultResolvConfPath = "/etc/resolv.conf"

// Defaults for the waits; every wait has one so boot never hangs on the network.
const (
	DefaultTimeout     = 60 * time.Second
	DefaultLinkTimeout = 20 * time.Second
	DefaultIPv6Timeout = 5 * time.Second
)

// The kernel command line keys ParseConfig reads.
const (
	KeyNet      = "berth.net"
	KeyIP       = "berth.ip"
	KeyGateway  = "berth.gw"
	KeyDNS      = "berth.dns"
	KeyMTU      = "berth.mtu"
	KeyIface    = "berth.iface"
	KeyHostname = "berth.hostname"
	KeyIPv6     = "berth.ipv6"
	KeyTimeout  = "berth.net.timeout"
)

// Config is what Up needs. The first group comes from ParseConfig (the
// kernel command line or the image config); the second is set by the caller.
type Config struct {
	Mode Mode `json:"mode"`
	// Interface selects the primary link by name or MAC; empty means the
	// first physical Ethernet link.
	Interface string       `json:"interface,omitempty"`
	Address   netip.Prefix `json:"address,omitempty"` // static only
	Gateway   netip.Addr   `json:"gateway,omitempty"` // static only
	DNS       []netip.Addr `json:"dns,omitempty"`     // static, or added to DHCP's when no override
	MTU       int          `json:"mtu,omitempty"`     // 0: DHCP option 26 or the driver's default
	Hostname  string       `json:"hostname,omitempty"`
	// IPv6 waits (bounded by IPv6Timeout) for a SLAAC address. Router
	// advertisements are accepted whatever this says, at no boot cost.
	IPv6 bool `json:"ipv6,omitempty"`
	// DHCPv6 takes an address by DHCPv6 (bounded by IPv6Timeout) instead of
	// waiting for SLAAC; EC2's VPCs hand out IPv6 addresses this way.
	DHCPv6      bool          `json:"dhcpv6,omitempty"`
	Timeout     time.Duration `json:"timeout,omitempty"`     // whole Up; 0: DefaultTimeout
	LinkTimeout time.Duration `json:"linkTimeout,omitempty"` // link appearance and carrier; 0: DefaultLinkTimeout
	IPv6Timeout time.Duration `json:"ipv6Timeout,omitempty"` // 0: DefaultIPv6Timeout

	// ResolvConfPath is written when non-empty, at Up and, with DHCP, after
	// every renewal that changes what it should say. The NodeConfig's
	// spec.instance.network is not known yet at Up: PID 1 hands it to the
	// renewer later, with Handle.SetDNSOverride.
	ResolvConfPath string `json:"-"`
	// SetHostname is called with the chosen hostname when non-nil.
	SetHostname func(name string) error `json:"-"`
	// NetNS, when non-zero, is the network namespace to configure instead
	// of the caller's own (tests).
	NetNS netns.NsHandle `json:"-"`
	// MinRetry is the shortest wait between renewal attempts (RFC 2131
	// suggests 60 s; the floor keeps short test leases workable). 0: 1 s.
	MinRetry time.Duration `json:"-"`
}

// ParseConfig reads the berth.* network keys through get (for example a
// kernel command line lookup). Missing keys mean DHCP on the first Ethernet
// link. The result writes /etc/resolv.conf and sets the hostname.
func ParseConfig(get func(key string) (string, bool)) (Config, error) {
	c := Config{
		Mode:           ModeDHCP,
		ResolvConfPath: DefaultResolvConfPath,
		SetHostname:    SetHostname,
	}
	mode, modeSet := get(KeyNet)
	if modeSet {
		switch m := Mode(strings.TrimSpace(mode)); m {
		case ModeDHCP, ModeStatic, ModeOff:
			c.Mode = m
		default:
			return Config{}, fmt.Errorf("%s=%q: want dhcp, static or off", KeyNet, mode)
		}
	}
	if v, ok := get(KeyIP); ok {
		p, err := netip.ParsePrefix(v)
		if err != nil || !p.Addr().Is4() {
			return Config{}, fmt.Errorf("%s=%q: want an IPv4 address with prefix length, like 10.0.2.15/24", KeyIP, v)
		}
		c.Address = p
		if !modeSet {
			c.Mode = ModeStatic
		}
	}
	if v, ok := get(KeyGateway); ok {
		a, err := netip.ParseAddr(v)
		if err != nil || !a.Is4() {
			return Config{}, fmt.Errorf("%s=%q: want an IPv4 address, like 10.0.2.2", KeyGateway, v)
		}
		c.Gateway = a
	}
	if v, ok := get(KeyDNS); ok {
		for i, s := range strings.Split(v, ",") {
			a, err := netip.ParseAddr(strings.TrimSpace(s))
			if err != nil {
				return Config{}, fmt.Errorf("%s=%q: entry %d (%q) is not an IP address", KeyDNS, v, i+1, s)
			}
			c.DNS = append(c.DNS, a)
		}
	}
	if v, ok := get(KeyMTU); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 68 || n > 65535 {
			return Config{}, fmt.Errorf("%s=%q: want an integer from 68 to 65535", KeyMTU, v)
		}
		c.MTU = n
	}
	if v, ok := get(KeyIface); ok {
		if err := checkIfaceSelector(v); err != nil {
			return Config{}, fmt.Errorf("%s=%q: %w", KeyIface, v, err)
		}
		c.Interface = v
	}
	if v, ok := get(KeyHostname); ok {
		if err := checkHostname(v); err != nil {
			return Config{}, fmt.Errorf("%s=%q: %w", KeyHostname, v, err)
		}
		c.Hostname = v
	}
	if v, ok := get(KeyIPv6); ok {
		switch v {
		case "dhcp":
			c.IPv6, c.DHCPv6 = true, true
		case "slaac":
			c.IPv6 = true
		default:
			b, err := strconv.ParseBool(v)
			if err != nil {
				return Config{}, fmt.Errorf("%s=%q: want dhcp, slaac, 1 (slaac) or 0", KeyIPv6, v)
			}
			c.IPv6 = b
		}
	}
	if v, ok := get(KeyTimeout); ok {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return Config{}, fmt.Errorf("%s=%q: want a positive duration, like 30s", KeyTimeout, v)
		}
		c.Timeout = d
	}
	switch c.Mode {
	case ModeStatic:
		if !c.Address.IsValid() {
			return Config{}, fmt.Errorf("%s=static needs %s (like 10.0.2.15/24)", KeyNet, KeyIP)
		}
		if c.Gateway.IsValid() && !c.Address.Masked().Contains(c.Gateway) {
			return Config{}, fmt.Errorf("%s=%s is outside %s=%s", KeyGateway, c.Gateway, KeyIP, c.Address)
		}
	case ModeDHCP, ModeOff:
		if c.Address.IsValid() || c.Gateway.IsValid() {
			return Config{}, fmt.Errorf("%s=%s conflicts with %s/%s, which are for static config", KeyNet, c.Mode, KeyIP, KeyGateway)
		}
	}
	return c, nil
}

// checkIfaceSelector accepts a MAC address or a Linux interface name.
func checkIfaceSelector(v string) error {
	if _, err := net.ParseMAC(v); err == nil {
		return nil
	}
	// IFNAMSIZ is 16 including the NUL.
	if v == "" || len(v) > 15 || v == "." || v == ".." {
		return fmt.Errorf("want an interface name (1 to 15 characters) or a MAC address")
	}
	for _, r := range v {
		if r == '/' || r == ':' || r <= ' ' || r > '~' {
			return fmt.Errorf("want an interface name (no '/', ':' or spaces) or a MAC address")
		}
	}
	return nil
}

// checkHostname follows RFC 1123: dot-separated labels of letters, digits
// and hyphens, at most 63 characters each and 253 in all (and 64 for the
// kernel's UTS nodename).
func checkHostname(v string) error {
	if v == "" || len(v) > 64 {
		return fmt.Errorf("want a hostname of 1 to 64 characters")
	}
	for _, label := range strings.Split(v, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("label %q: want 1 to 63 characters", label)
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("label %q: must not start or end with '-'", label)
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return fmt.Errorf("label %q: character %q not allowed", label, r)
			}
		}
	}
	return nil
}
