package network

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/berth-node/berth/internal/syntax"
)

// Route is one IPv4 route the lease asks for. An invalid Gateway means the
// destination is on-link (router 0.0.0.0 in option 121).
type Route struct {
	Dst     netip.Prefix `json:"dst"`
	Gateway netip.Addr   `json:"gateway,omitempty"`
}

// Infinite is the lease time of a lease that never expires (0xffffffff s).
const Infinite = time.Duration(0xffffffff) * time.Second

// Lease is a DHCPv4 ACK reduced to what berth applies.
type Lease struct {
	Address netip.Prefix `json:"address"`
	Server  netip.Addr   `json:"server"`
	// Routes are option 121's when present (RFC 3442: then option 3 is
	// ignored), else a default route through the first option 3 router.
	Routes   []Route       `json:"routes,omitempty"`
	Router   netip.Addr    `json:"router,omitempty"` // the gateway of the default route, if any
	MTU      int           `json:"mtu,omitempty"`
	DNS      []netip.Addr  `json:"dns,omitempty"`
	Domain   string        `json:"domain,omitempty"`
	Search   []string      `json:"search,omitempty"`
	Hostname string        `json:"hostname,omitempty"`
	Time     time.Duration `json:"leaseTime"`
	T1       time.Duration `json:"t1"`
	T2       time.Duration `json:"t2"`
	Acquired time.Time     `json:"acquired"`
	// Warnings are options berth ignored, and why.
	Warnings []string `json:"warnings,omitempty"`
	// NTP are option 42's servers, for the time phase.
	NTP []netip.Addr `json:"ntp,omitempty"`
}

// defaultLeaseTime is used when an ACK carries no option 51; RFC 2131
// makes it mandatory, so this only guards against broken servers.
const defaultLeaseTime = time.Hour

// LeaseFromACK turns an ACK into a Lease, acquired at now.
func LeaseFromACK(ack *dhcpv4.DHCPv4, now time.Time) (Lease, error) {
	if ack == nil {
		return Lease{}, errors.New("no ACK")
	}
	ip, ok := netip.AddrFromSlice(ack.YourIPAddr.To4())
	if !ok || !ip.IsValid() || ip.IsUnspecified() || ip.IsMulticast() || ip.IsLoopback() || ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return Lease{}, fmt.Errorf("ACK offers no usable address (yiaddr %v)", ack.YourIPAddr)
	}
	l := Lease{Acquired: now}
	bits := 0
	if m := ack.SubnetMask(); m != nil {
		ones, size := net.IPMask(m).Size()
		if size == 32 && ones > 0 {
			bits = ones
		} else {
			l.Warnings = append(l.Warnings, fmt.Sprintf("option 1: subnet mask %v is not contiguous", net.IP(m)))
		}
	}
	if bits == 0 {
		bits = classfulBits(ip)
	}
	l.Address = netip.PrefixFrom(ip, bits)
	if s, ok := netip.AddrFromSlice(ack.ServerIdentifier().To4()); ok {
		l.Server = s
	}

	if raw := ack.Options.Get(dhcpv4.OptionClasslessStaticRoute); raw != nil {
		routes := ack.ClasslessStaticRoute()
		if routes == nil {
			l.Warnings = append(l.Warnings, "option 121: malformed, falling back to option 3")
		}
		for _, r := range routes {
			ones, _ := r.Dest.Mask.Size()
			dst, ok1 := netip.AddrFromSlice(r.Dest.IP.To4())
			gw, ok2 := netip.AddrFromSlice(r.Router.To4())
			if !ok1 || !ok2 {
				continue
			}
			rt := Route{Dst: netip.PrefixFrom(dst, ones).Masked()}
			if !gw.IsUnspecified() {
				rt.Gateway = gw
			}
			if rt.Dst.Bits() == 0 && rt.Gateway.IsValid() && !l.Router.IsValid() {
				l.Router = rt.Gateway
			}
			l.Routes = append(l.Routes, rt)
		}
	}
	if len(l.Routes) == 0 {
		for _, r := range ack.Router() {
			if gw, ok := netip.AddrFromSlice(r.To4()); ok && !gw.IsUnspecified() {
				l.Router = gw
				l.Routes = []Route{{Dst: netip.PrefixFrom(netip.IPv4Unspecified(), 0), Gateway: gw}}
				break
			}
		}
	}

	if raw := ack.Options.Get(dhcpv4.OptionInterfaceMTU); raw != nil {
		if len(raw) != 2 {
			l.Warnings = append(l.Warnings, fmt.Sprintf("option 26: %d bytes, want 2", len(raw)))
		} else if mtu := int(binary.BigEndian.Uint16(raw)); mtu < 68 {
			l.Warnings = append(l.Warnings, fmt.Sprintf("option 26: MTU %d is below the IPv4 minimum 68", mtu))
		} else {
			l.MTU = mtu
		}
	}
	// What the server says about names ends up in resolv.conf and the
	// hostname, so it gets the same checks as user data; a bad entry is
	// dropped, the rest of the lease still applies.
	l.DNS = serverAddrs(ack.DNS(), "option 6: DNS server", &l.Warnings)
	l.NTP = serverAddrs(ack.NTPServers(), "option 42: NTP server", &l.Warnings)
	if d := ack.DomainName(); d != "" {
		if err := syntax.DNSName(d); err != nil {
			l.Warnings = append(l.Warnings, fmt.Sprintf("option 15: domain name dropped: %v", err))
		} else {
			l.Domain = d
		}
	}
	if s := ack.DomainSearch(); s != nil {
		l.Search = searchList(s.Labels, "option 119", &l.Warnings)
	}
	if h := ack.HostName(); h != "" {
		if err := checkHostname(h); err != nil {
			l.Warnings = append(l.Warnings, fmt.Sprintf("option 12: hostname dropped: %v", err))
		} else {
			l.Hostname = h
		}
	}

	l.Time = ack.IPAddressLeaseTime(defaultLeaseTime)
	if l.Time < time.Second {
		l.Warnings = append(l.Warnings, fmt.Sprintf("option 51: lease time %s, using 1s", l.Time))
		l.Time = time.Second
	}
	l.T1, l.T2 = timers(l.Time, ack.IPAddressRenewalTime(0), ack.IPAddressRebindingTime(0))
	return l, nil
}

// badServer says why a DNS server address from DHCP cannot be a
// nameserver, or "".
func badServer(a netip.Addr) string {
	switch {
	case a.IsUnspecified():
		return "is unspecified"
	case a.IsMulticast():
		return "is multicast"
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "is the broadcast address"
	}
	return ""
}

// searchList keeps the domains of a DHCP search list (option 119, or
// DHCPv6's option 24) that are DNS names; each other one is dropped with a
// warning naming option.
func searchList(domains []string, option string, warnings *[]string) []string {
	var out []string
	for _, d := range domains {
		if err := syntax.DNSName(d); err != nil {
			*warnings = append(*warnings, fmt.Sprintf("%s: search domain dropped: %v", option, err))
			continue
		}
		out = append(out, d)
	}
	return out
}

// timers applies RFC 2131 4.4.5: T1 defaults to half the lease and T2 to
// 7/8 of it, and 0 < T1 < T2 < lease must hold, else the defaults win.
func timers(lease, t1, t2 time.Duration) (time.Duration, time.Duration) {
	if lease >= Infinite {
		return Infinite, Infinite
	}
	// Divide first: lease times up to 2^32-2 s overflow time.Duration
	// when multiplied.
	if t2 <= 0 || t2 >= lease {
		t2 = lease / 8 * 7
	}
	if t1 <= 0 || t1 >= t2 {
		t1 = lease / 2
		if t1 >= t2 {
			t1 = t2 / 2
		}
	}
	return t1, t2
}

// Deadlines gives the wall-clock times to renew (T1), rebind (T2) and
// drop the address (expiry). Infinite leases give zero times.
func (l Lease) Deadlines() (t1, t2, expiry time.Time) {
	if l.Time >= Infinite {
		return time.Time{}, time.Time{}, time.Time{}
	}
	return l.Acquired.Add(l.T1), l.Acquired.Add(l.T2), l.Acquired.Add(l.Time)
}

// Lifetime is the valid lifetime left at now, rounded up to whole seconds
// for the kernel (0 = forever, for infinite leases).
func (l Lease) Lifetime(now time.Time) int {
	if l.Time >= Infinite {
		return 0
	}
	left := l.Acquired.Add(l.Time).Sub(now)
	s := int((left + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return s
}

// retryWait is how long to wait before the next attempt when the current
// phase ends at until: half the time left (RFC 2131 4.4.5), at least
// floor, but never past until.
func retryWait(now, until time.Time, floor time.Duration) time.Duration {
	left := until.Sub(now)
	if left <= 0 {
		return 0
	}
	w := left / 2
	if w < floor {
		w = floor
	}
	if w > left {
		w = left
	}
	return w
}

// backoff is the wait after the attempt-th failed DISCOVER once the lease
// is lost: 1 s doubling to a 60 s cap, so a returning server is found
// within a minute and a dead one is not hammered.
func backoff(attempt int) time.Duration {
	d := time.Second
	for i := 0; i < attempt && d < time.Minute; i++ {
		d *= 2
	}
	if d > time.Minute {
		d = time.Minute
	}
	return d
}

// classfulBits is the prefix length a lease without option 1 implies.
func classfulBits(ip netip.Addr) int {
	b := ip.As4()[0]
	switch {
	case b < 128:
		return 8
	case b < 192:
		return 16
	default:
		return 24
	}
}

// serverAddrs keeps the usable IPv4 server addresses of one lease option;
// each dropped one adds a warning that starts with what (e.g. "option 6:
// DNS server").
func serverAddrs(ips []net.IP, what string, warnings *[]string) []netip.Addr {
	var out []netip.Addr
	for _, d := range ips {
		a, ok := netip.AddrFromSlice(d.To4())
		if !ok {
			*warnings = append(*warnings, fmt.Sprintf("%s %q is not an IPv4 address; dropped", what, d.String()))
			continue
		}
		if msg := badServer(a); msg != "" {
			*warnings = append(*warnings, fmt.Sprintf("%s %q %s; dropped", what, a, msg))
			continue
		}
		out = append(out, a)
	}
	return out
}
