package network

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/vishvananda/netlink"
)

// Handle is the running DHCPv4 client of the primary link. It renews the
// lease until the ctx given to Up ends.
type Handle struct {
	e        *env
	link     netlink.Link
	mac      net.HardwareAddr
	mtu      int // static override of option 26
	minRetry time.Duration
	dns      *dnsState // resolv.conf upkeep (resolv.go)
	done     chan struct{}

	mu       sync.Mutex
	lease    Lease
	bound    bool
	renewals int
}

// Lease is the current lease and whether one is held.
func (h *Handle) Lease() (Lease, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lease, h.bound
}

// Renewals counts the leases extended or regained since Up.
func (h *Handle) Renewals() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.renewals
}

// Done is closed when the renewer has stopped (its ctx ended).
func (h *Handle) Done() <-chan struct{} { return h.done }

func (h *Handle) set(l Lease, bound, renewed bool) {
	h.mu.Lock()
	h.lease, h.bound = l, bound
	if renewed {
		h.renewals++
	}
	h.mu.Unlock()
}

func (h *Handle) addressing(l Lease, now time.Time) Addressing {
	mtu := l.MTU
	if h.mtu > 0 {
		mtu = h.mtu
	}
	return Addressing{Address: l.Address, ValidLft: l.Lifetime(now), Routes: l.Routes, MTU: mtu}
}

// run keeps the lease for as long as ctx lives: renew at T1 (unicast),
// rebind at T2 (broadcast), and when the lease runs out, say so loudly and
// go back to DISCOVER with backoff, forever.
func (h *Handle) run(ctx context.Context, log *slog.Logger, raw *nclient4.Lease, cur Lease) {
	defer close(h.done)
	defer h.e.close()
	ifname := h.link.Attrs().Name
	for ctx.Err() == nil {
		func() {
			// PID 1 must not die of a bug here; log it and start over.
			defer func() {
				if r := recover(); r != nil {
					log.Error("DHCP renewer panicked; restarting it", "interface", ifname, "panic", fmt.Sprint(r))
					_ = sleepCtx(ctx, time.Second)
				}
			}()
			raw, cur = h.keep(ctx, log, raw, cur)
		}()
	}
}

// keep holds one lease through RENEWING and REBINDING; when it expires it
// gets a new one (INIT) and returns that.
func (h *Handle) keep(ctx context.Context, log *slog.Logger, raw *nclient4.Lease, cur Lease) (*nclient4.Lease, Lease) {
	ifname := h.link.Attrs().Name
	t1, t2, expiry := cur.Deadlines()
	if t1.IsZero() {
		<-ctx.Done() // infinite lease
		return raw, cur
	}
	if sleepCtx(ctx, time.Until(t1)) != nil {
		return raw, cur
	}
	for _, phase := range []struct {
		rebind bool
		until  time.Time
	}{{false, t2}, {true, expiry}} {
		for time.Now().Before(phase.until) {
			start := time.Now()
			wait := retryWait(start, phase.until, h.minRetry)
			actx, cancel := context.WithTimeout(ctx, wait)
			nraw, err := h.e.renew(actx, ifname, h.mac, raw, cur.Address.Addr(), cur.Server, phase.rebind)
			cancel()
			if ctx.Err() != nil {
				return raw, cur
			}
			if err == nil {
				if l, ok := h.take(log, nraw, cur.Address); ok {
					log.Info("DHCP lease renewed", "interface", ifname, "address", l.Address, "server", l.Server,
						"lease", l.Time, "rebind", phase.rebind)
					return nraw, l
				}
			} else {
				var nak *nclient4.ErrNak
				if errors.As(err, &nak) {
					log.Error("DHCP server refused to extend the lease; dropping the address", "interface", ifname,
						"address", cur.Address, "server", cur.Server, "server_message", nak.Nak.Message())
					return h.reacquire(ctx, log, cur)
				}
				log.Warn("DHCP renewal got no answer", "interface", ifname, "address", cur.Address, "server", cur.Server,
					"rebind", phase.rebind, "err", err)
			}
			_ = sleepCtx(ctx, time.Until(start.Add(wait)))
		}
	}
	log.Error("DHCP LEASE LOST: no server extended it before it expired; the node has no IPv4 address, retrying",
		"interface", ifname, "address", cur.Address, "server", cur.Server, "expired", expiry.UTC().Format(time.RFC3339))
	return h.reacquire(ctx, log, cur)
}

// take applies a fresh ACK; false if it is unusable or applying failed.
func (h *Handle) take(log *slog.Logger, raw *nclient4.Lease, old netip.Prefix) (Lease, bool) {
	ifname := h.link.Attrs().Name
	l, err := LeaseFromACK(raw.ACK, raw.CreationTime)
	if err != nil {
		log.Error("DHCP ACK unusable", "interface", ifname, "err", err)
		return Lease{}, false
	}
	for _, w := range l.Warnings {
		log.Warn("DHCP option ignored", "interface", ifname, "why", w)
	}
	if err := h.e.apply(log, h.link, h.addressing(l, time.Now()), old); err != nil {
		log.Error("applying the DHCP lease failed", "interface", ifname, "address", l.Address, "err", err)
		return Lease{}, false
	}
	if h.dns != nil {
		h.dns.leased(log, l)
	}
	h.set(l, true, true)
	return l, true
}

// reacquire drops the lost lease and runs DISCOVER with backoff until a
// new lease is applied or ctx ends.
func (h *Handle) reacquire(ctx context.Context, log *slog.Logger, lost Lease) (*nclient4.Lease, Lease) {
	ifname := h.link.Attrs().Name
	h.set(lost, false, false)
	if err := h.e.unapply(h.link, lost.Address); err != nil {
		log.Warn("removing the lost lease", "interface", ifname, "err", err)
	}
	for attempt := 0; ctx.Err() == nil; attempt++ {
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		raw, err := h.e.dora(actx, log, ifname, h.mac)
		cancel()
		if err == nil {
			if l, ok := h.take(log, raw, netip.Prefix{}); ok {
				log.Info("DHCP lease regained", "interface", ifname, "address", l.Address, "server", l.Server, "lease", l.Time)
				return raw, l
			}
		} else if ctx.Err() == nil {
			log.Error("DHCP: still no lease", "interface", ifname, "lost", lost.Address, "server", lost.Server,
				"attempt", attempt+1, "err", err)
		}
		_ = sleepCtx(ctx, backoff(attempt))
	}
	return nil, lost
}
