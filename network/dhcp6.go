package network

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/dhcpv6/nclient6"
	"github.com/insomniacslk/dhcp/iana"
	"github.com/vishvananda/netlink"
)

// Lease6 is a DHCPv6 Reply reduced to what berth applies: one IA_NA
// address (a /128; the on-link prefix and the default route come from
// router advertisements, as on EC2).
type Lease6 struct {
	Address   netip.Addr    `json:"address"`
	Preferred time.Duration `json:"preferred"`
	Valid     time.Duration `json:"valid"`
	T1        time.Duration `json:"t1"`
	T2        time.Duration `json:"t2"`
	Server    string        `json:"server"` // the server's DUID
	DNS       []netip.Addr  `json:"dns,omitempty"`
	Search    []string      `json:"search,omitempty"`
	Acquired  time.Time     `json:"acquired"`
	// Warnings are options berth ignored, and why.
	Warnings []string `json:"warnings,omitempty"`
	// NTP are option 56's server addresses (RFC 5908), for the time phase.
	NTP []netip.Addr `json:"ntp,omitempty"`
}

// Lease6FromReply picks the first usable IA_NA address of a Reply.
func Lease6FromReply(m *dhcpv6.Message, now time.Time) (Lease6, error) {
	if m == nil || m.MessageType != dhcpv6.MessageTypeReply {
		return Lease6{}, errors.New("not a DHCPv6 Reply")
	}
	if sc := m.Options.Status(); sc != nil && sc.StatusCode != iana.StatusSuccess {
		return Lease6{}, fmt.Errorf("DHCPv6 server says %s: %s", sc.StatusCode, sc.StatusMessage)
	}
	l := Lease6{Acquired: now}
	if id := m.Options.ServerID(); id != nil {
		l.Server = id.String()
	}
	for _, ia := range m.Options.IANA() {
		if sc := ia.Options.Status(); sc != nil && sc.StatusCode != iana.StatusSuccess {
			continue
		}
		for _, a := range ia.Options.Addresses() {
			ip, ok := netip.AddrFromSlice(a.IPv6Addr)
			if !ok || !ip.Is6() || ip.Is4In6() || !ip.IsGlobalUnicast() || a.ValidLifetime <= 0 || a.PreferredLifetime > a.ValidLifetime {
				continue
			}
			l.Address, l.Preferred, l.Valid = ip, a.PreferredLifetime, a.ValidLifetime
			// RFC 8415 21.4: T1/T2 of 0 leave the times to the client;
			// 0.5 and 0.8 of the preferred lifetime are its suggestion.
			l.T1, l.T2 = ia.T1, ia.T2
			if l.T1 <= 0 || l.T1 > l.Preferred {
				l.T1 = l.Preferred / 2
			}
			if l.T2 <= l.T1 || l.T2 > l.Valid {
				// Divide first: 2^32-1 s times 4 overflows time.Duration.
				l.T2 = l.Preferred / 5 * 4
			}
			// A deprecated address (preferred 0) must not make the renewer spin.
			l.T1 = max(l.T1, time.Second)
			l.T2 = max(l.T2, l.T1)
			break
		}
		if l.Address.IsValid() {
			break
		}
	}
	if !l.Address.IsValid() {
		return Lease6{}, errors.New("DHCPv6 Reply has no usable IA_NA address")
	}
	for _, d := range m.Options.DNS() {
		a, ok := netip.AddrFromSlice(d)
		if !ok {
			l.Warnings = append(l.Warnings, fmt.Sprintf("option 23: DNS server %q is not an IP address; dropped", d.String()))
			continue
		}
		a = a.Unmap()
		if msg := badServer(a); msg != "" {
			l.Warnings = append(l.Warnings, fmt.Sprintf("option 23: DNS server %q %s; dropped", a, msg))
			continue
		}
		l.DNS = append(l.DNS, a)
	}
	if s := m.Options.DomainSearchList(); s != nil {
		l.Search = searchList(s.Labels, "option 24", &l.Warnings)
	}
	for _, d := range m.Options.NTPServers() {
		a, ok := netip.AddrFromSlice(d)
		if msg := badServer(a.Unmap()); !ok || msg != "" {
			l.Warnings = append(l.Warnings, fmt.Sprintf("option 56: NTP server %q is not a unicast address; dropped", d.String()))
			continue
		}
		l.NTP = append(l.NTP, a.Unmap())
	}
	return l, nil
}

// dhcp6 gets a DHCPv6 address: it waits for the link-local address to
// pass DAD (the client socket binds to it), then Solicit (rapid commit
// accepted) / Advertise / Request / Reply, until ctx ends. The client ID is
// a DUID-LL so the node gets the same binding on every exchange and boot.
func (e *env) dhcp6(ctx context.Context, log *slog.Logger, ifname string, mac net.HardwareAddr) (*dhcpv6.Message, error) {
	var conn net.PacketConn
	for {
		err := e.do(func() (err error) {
			conn, err = nclient6.NewIPv6UDPConn(ifname, dhcpv6.DefaultClientPort)
			return err
		})
		if err == nil {
			break
		}
		if sleepCtx(ctx, 50*time.Millisecond) != nil {
			return nil, fmt.Errorf("DHCPv6 on %s: no usable link-local address: %w", ifname, err)
		}
	}
	c, err := nclient6.NewWithConn(conn, mac, nclient6.WithTimeout(neverTimeout), nclient6.WithRetry(1))
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("DHCPv6 on %s: starting the client: %w", ifname, err)
	}
	defer c.Close()
	id := dhcpv6.WithClientID(&dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: mac})
	start := time.Now()
	for try := 0; ; try++ {
		tctx, cancel := context.WithTimeout(ctx, tryTimeout(try))
		m, err := c.RapidSolicit(tctx, id, dhcpv6.WithRequestedOptions(dhcpv6.OptionNTPServer))
		cancel()
		if err == nil {
			return m, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("DHCPv6 on %s (%s): no lease after %s and %d attempts: %w",
				ifname, mac, time.Since(start).Round(time.Millisecond), try+1, ctx.Err())
		}
		log.Debug("DHCPv6 attempt failed", "interface", ifname, "try", try+1, "err", err)
	}
}

func (e *env) apply6(link netlink.Link, l Lease6, now time.Time) error {
	left := func(d time.Duration) int {
		s := int((l.Acquired.Add(d).Sub(now) + time.Second - 1) / time.Second)
		return max(s, 1)
	}
	a := &netlink.Addr{IPNet: &net.IPNet{IP: l.Address.AsSlice(), Mask: net.CIDRMask(128, 128)},
		ValidLft: left(l.Valid), PreferedLft: min(left(l.Preferred), left(l.Valid))}
	if err := e.nl.AddrReplace(link, a); err != nil {
		return fmt.Errorf("adding DHCPv6 address %s/128 to %s: %w", l.Address, link.Attrs().Name, err)
	}
	return nil
}

// keep6 keeps the DHCPv6 address for as long as ctx lives: a new exchange
// at T1 (the same DUID and IAID get the same binding), retried with
// backoff; past the valid lifetime the kernel drops the address and berth
// says so loudly, then keeps trying.
func keep6(ctx context.Context, log *slog.Logger, e *env, link netlink.Link, l Lease6) {
	defer e.close()
	ifname, mac := link.Attrs().Name, link.Attrs().HardwareAddr
	lost := false
	for attempt := 0; ctx.Err() == nil; {
		if attempt == 0 && sleepCtx(ctx, time.Until(l.Acquired.Add(l.T1))) != nil {
			return
		}
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		m, err := e.dhcp6(actx, log, ifname, mac)
		cancel()
		if err == nil {
			var nl Lease6
			nl, err = Lease6FromReply(m, time.Now())
			if err == nil {
				for _, w := range nl.Warnings {
					log.Warn("DHCPv6 option ignored", "interface", ifname, "why", w)
				}
				err = e.apply6(link, nl, time.Now())
			}
			if err == nil {
				if nl.Address != l.Address && !lost {
					_ = e.nl.AddrDel(link, &netlink.Addr{IPNet: &net.IPNet{IP: l.Address.AsSlice(), Mask: net.CIDRMask(128, 128)}})
				}
				log.Info("DHCPv6 lease renewed", "interface", ifname, "address", nl.Address, "valid", nl.Valid)
				l, attempt, lost = nl, 0, false
				continue
			}
		}
		if ctx.Err() != nil {
			return
		}
		if !lost && time.Now().After(l.Acquired.Add(l.Valid)) {
			lost = true
			log.Error("DHCPv6 LEASE LOST: no server extended it before its valid lifetime ended; retrying",
				"interface", ifname, "address", l.Address, "server", l.Server)
		} else {
			log.Warn("DHCPv6 renewal failed", "interface", ifname, "address", l.Address, "err", err)
		}
		_ = sleepCtx(ctx, backoff(attempt))
		attempt++
	}
}
