package network

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/insomniacslk/dhcp/dhcpv4/server4"
)

// requestOpts asks for the options berth uses (parameter request list).
func requestOpts() dhcpv4.Modifier {
	return dhcpv4.WithRequestedOptions(
		dhcpv4.OptionSubnetMask,
		dhcpv4.OptionRouter,
		dhcpv4.OptionDomainNameServer,
		dhcpv4.OptionHostName,
		dhcpv4.OptionDomainName,
		dhcpv4.OptionInterfaceMTU,
		dhcpv4.OptionBroadcastAddress,
		dhcpv4.OptionIPAddressLeaseTime,
		dhcpv4.OptionRenewTimeValue,
		dhcpv4.OptionRebindingTimeValue,
		dhcpv4.OptionDNSDomainSearchList,
		dhcpv4.OptionClasslessStaticRoute,
		dhcpv4.OptionNTPServers,
	)
}

// tryTimeout is the wait for an answer to one DISCOVER or REQUEST: 0.5 s
// doubling to 4 s. RFC 2131 suggests 4 s first, but QEMU's and EC2's
// servers answer in milliseconds, and a NIC that just got carrier may drop
// the first frame (QEMU's e1000 does), so a short first wait keeps boot fast.
func tryTimeout(try int) time.Duration {
	return 500 * time.Millisecond << min(try, 3)
}

// neverTimeout leaves every wait to the contexts berth passes in.
const neverTimeout = 24 * time.Hour

// rawClient is a client for an interface without an address: a packet
// socket that sends link-layer broadcasts.
func (e *env) rawClient(ifname string, mac net.HardwareAddr) (*nclient4.Client, error) {
	var c *nclient4.Client
	err := e.do(func() error {
		conn, err := nclient4.NewRawUDPConn(ifname, nclient4.ClientPort)
		if err != nil {
			return fmt.Errorf("opening a DHCP packet socket on %s: %w", ifname, err)
		}
		c, err = nclient4.NewWithConn(conn, mac, nclient4.WithTimeout(neverTimeout), nclient4.WithRetry(1))
		if err != nil {
			conn.Close()
			return fmt.Errorf("starting the DHCP client on %s: %w", ifname, err)
		}
		return nil
	})
	return c, err
}

// udpClient is a client for a bound lease: a UDP socket on the leased
// address and port 68, tied to the interface, sending to server (unicast
// renew) or to 255.255.255.255 (rebind).
func (e *env) udpClient(ifname string, mac net.HardwareAddr, local netip.Addr, server *net.UDPAddr) (*nclient4.Client, error) {
	var c *nclient4.Client
	err := e.do(func() error {
		conn, err := server4.NewIPv4UDPConn(ifname, &net.UDPAddr{IP: local.AsSlice(), Port: nclient4.ClientPort})
		if err != nil {
			return fmt.Errorf("opening a DHCP socket on %s %s:68: %w", ifname, local, err)
		}
		opts := []nclient4.ClientOpt{nclient4.WithTimeout(neverTimeout), nclient4.WithRetry(1)}
		if server != nil {
			opts = append(opts, nclient4.WithServerAddr(server))
		}
		c, err = nclient4.NewWithConn(conn, mac, opts...)
		if err != nil {
			conn.Close()
			return fmt.Errorf("starting the DHCP client on %s: %w", ifname, err)
		}
		return nil
	})
	return c, err
}

// dora runs DISCOVER-OFFER-REQUEST-ACK until a lease comes or ctx ends.
func (e *env) dora(ctx context.Context, log *slog.Logger, ifname string, mac net.HardwareAddr) (*nclient4.Lease, error) {
	c, err := e.rawClient(ifname, mac)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	start := time.Now()
	var last error
	for try := 0; ; try++ {
		tctx, cancel := context.WithTimeout(ctx, tryTimeout(try))
		sent := time.Now()
		l, err := c.Request(tctx, requestOpts())
		cancel()
		if err == nil {
			// The lease runs from when the request went out, not from the
			// ACK (RFC 2131 4.4.1): never believe it lasts longer than it does.
			l.CreationTime = sent
			return l, nil
		}
		var nak *nclient4.ErrNak
		switch {
		case errors.As(err, &nak):
			last = fmt.Errorf("server %v refused the request: %w", nak.Nak.ServerIdentifier(), err)
			log.Warn("DHCP NAK", "interface", ifname, "server", nak.Nak.ServerIdentifier(), "server_message", nak.Nak.Message())
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
			last = fmt.Errorf("no answer")
		default:
			last = err
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("DHCPv4 on %s (%s): no lease after %s and %d attempts (DISCOVER broadcast, %v): %w",
				ifname, mac, time.Since(start).Round(time.Millisecond), try+1, last, ctx.Err())
		}
		log.Debug("DHCP attempt failed", "interface", ifname, "try", try+1, "err", err)
	}
}

// renew sends a REQUEST for the bound lease: unicast to its server in
// RENEWING, broadcast in REBINDING (RFC 2131 4.4.5), until ctx ends.
func (e *env) renew(ctx context.Context, ifname string, mac net.HardwareAddr, cur *nclient4.Lease, addr, server netip.Addr, rebind bool) (*nclient4.Lease, error) {
	var dst *net.UDPAddr
	if !rebind {
		dst = &net.UDPAddr{IP: server.AsSlice(), Port: nclient4.ServerPort}
	}
	c, err := e.udpClient(ifname, mac, addr, dst)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	sent := time.Now()
	if !rebind {
		l, err := c.Renew(ctx, cur, requestOpts())
		if err != nil {
			return nil, err
		}
		l.CreationTime = sent
		return l, nil
	}
	req, err := dhcpv4.NewRenewFromAck(cur.ACK, requestOpts())
	if err != nil {
		return nil, fmt.Errorf("building the rebind request: %w", err)
	}
	resp, err := c.SendAndRead(ctx, c.RemoteAddr(), req, nclient4.IsMessageType(dhcpv4.MessageTypeAck, dhcpv4.MessageTypeNak))
	if err != nil {
		return nil, err
	}
	if resp.MessageType() == dhcpv4.MessageTypeNak {
		return nil, &nclient4.ErrNak{Offer: cur.Offer, Nak: resp}
	}
	return &nclient4.Lease{Offer: resp, ACK: resp, CreationTime: sent}, nil
}
