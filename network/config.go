package network

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netns"

	"github.com/berth-node/berth/internal/syntax"
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
	// Routes are static IPv4 routes beside the default one (a NoCloud
	// network-config's), each through a gateway on the address's subnet;
	// static only.
	Routes []Route `json:"routes,omitempty"`
	// Search are search domains for resolv.conf: a static setup's, or
	// added after DHCP's.
	Search   []string `json:"search,omitempty"`
	MTU      int      `json:"mtu,omitempty"` // 0: DHCP option 26 or the driver's default
	Hostname string   `json:"hostname,omitempty"`
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

// Problem is a kernel command line key ParseConfig ignored: its value is
// not what the key takes, or it conflicts with another key.
type Problem struct {
	Key   string
	Value string
	Err   error
}

func (p Problem) Error() string { return fmt.Sprintf("%s=%q ignored: %v", p.Key, p.Value, p.Err) }

func (p Problem) Unwrap() error { return p.Err }

// Problems are the keys ParseConfig ignored, in the order it read them;
// nil when there are none. It is an error so that the list can be returned
// as the network phase's (non-fatal) error as it is; Err gives a nil error
// for an empty list, which a nil Problems stored in an error would not.
type Problems []Problem

func (ps Problems) Error() string {
	msgs := make([]string, len(ps))
	for i, p := range ps {
		msgs[i] = p.Error()
	}
	return "kernel command line: " + strings.Join(msgs, "; ")
}

// Err is ps as an error: nil when ps is empty.
func (ps Problems) Err() error {
	if len(ps) == 0 {
		return nil
	}
	return ps
}

// ParseConfig reads the berth.* network keys through get (for example a
// kernel command line lookup). Missing keys mean DHCP on the first Ethernet
// link. The result writes /etc/resolv.conf and sets the hostname.
//
// A key with a bad value is ignored and comes back as a Problem naming it;
// the other keys still apply. A typo in berth.dns must not cost the node
// its network: IMDS, and so the node's whole configuration, is reached
// over it. Where keys conflict, the one that asks for less wins: a
// berth.net=static without a usable berth.ip falls back to DHCP, and
// berth.ip/berth.gw are ignored under berth.net=dhcp or off.
func ParseConfig(get func(key string) (string, bool)) (Config, Problems) {
	c := Config{
		Mode:           ModeDHCP,
		ResolvConfPath: DefaultResolvConfPath,
		SetHostname:    SetHostname,
	}
	var ps Problems
	bad := func(key, value string, format string, args ...any) {
		ps = append(ps, Problem{Key: key, Value: value, Err: fmt.Errorf(format, args...)})
	}
	mode, modeSet := get(KeyNet)
	if modeSet {
		switch m := Mode(strings.TrimSpace(mode)); m {
		case ModeDHCP, ModeStatic, ModeOff:
			c.Mode = m
		default:
			modeSet = false
			bad(KeyNet, mode, "want dhcp, static or off")
		}
	}
	ip, ipSet := get(KeyIP)
	if ipSet {
		p, err := netip.ParsePrefix(ip)
		if err != nil || !p.Addr().Is4() || p.Addr().Zone() != "" {
			ipSet = false
			bad(KeyIP, ip, "want an IPv4 address with prefix length, like 10.0.2.15/24")
		} else {
			c.Address = p
		}
	}
	if v, ok := get(KeyGateway); ok {
		a, err := netip.ParseAddr(v)
		if err != nil || !a.Is4() {
			bad(KeyGateway, v, "want an IPv4 address, like 10.0.2.2")
		} else {
			c.Gateway = a
		}
	}
	if v, ok := get(KeyDNS); ok {
		// Entry by entry: the good servers of a list still serve.
		for i, s := range strings.Split(v, ",") {
			s = strings.TrimSpace(s)
			if err := syntax.IP(s, true); err != nil {
				bad(KeyDNS, v, "entry %d: %w", i+1, err)
				continue
			}
			a, _ := netip.ParseAddr(s) // syntax.IP parsed it already
			c.DNS = append(c.DNS, a)
		}
	}
	if v, ok := get(KeyMTU); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 68 || n > 65535 {
			bad(KeyMTU, v, "want an integer from 68 to 65535")
		} else {
			c.MTU = n
		}
	}
	if v, ok := get(KeyIface); ok {
		if err := checkIfaceSelector(v); err != nil {
			bad(KeyIface, v, "%w", err)
		} else {
			c.Interface = v
		}
	}
	if v, ok := get(KeyHostname); ok {
		if err := checkHostname(v); err != nil {
			bad(KeyHostname, v, "%w", err)
		} else {
			c.Hostname = v
		}
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
				bad(KeyIPv6, v, "want dhcp, slaac, 1 (slaac) or 0")
			} else {
				c.IPv6 = b
			}
		}
	}
	if v, ok := get(KeyTimeout); ok {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			bad(KeyTimeout, v, "want a positive duration, like 30s")
		} else {
			c.Timeout = d
		}
	}

	if ipSet && !modeSet {
		c.Mode = ModeStatic
	}
	switch c.Mode {
	case ModeStatic:
		if !c.Address.IsValid() {
			bad(KeyNet, mode, "static needs a usable %s (like 10.0.2.15/24); using dhcp", KeyIP)
			c.Mode, c.Gateway = ModeDHCP, netip.Addr{}
		} else if c.Gateway.IsValid() && !c.Address.Masked().Contains(c.Gateway) {
			gw, _ := get(KeyGateway)
			bad(KeyGateway, gw, "%s is outside %s=%s", c.Gateway, KeyIP, c.Address)
			c.Gateway = netip.Addr{}
		}
	case ModeDHCP, ModeOff:
		if c.Address.IsValid() {
			bad(KeyIP, ip, "conflicts with %s=%s; static addresses need %s=static", KeyNet, c.Mode, KeyNet)
			c.Address = netip.Prefix{}
		}
		if c.Gateway.IsValid() {
			gw, _ := get(KeyGateway)
			bad(KeyGateway, gw, "conflicts with %s=%s; a gateway needs %s=static", KeyNet, c.Mode, KeyNet)
			c.Gateway = netip.Addr{}
		}
	}
	return c, ps
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

// checkHostname is the kernel hostname rule (syntax.Hostname): RFC 1123
// labels, at most 64 characters for the UTS nodename.
func checkHostname(v string) error {
	return syntax.Hostname(v)
}
