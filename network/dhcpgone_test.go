package network

import (
	"context"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// The fault suite's "DHCP server gone": after the node got its lease the
// DHCP server goes away altogether (its socket is closed, so unicast
// renewals and broadcast rebinds find nobody; QEMU's user network cannot
// do this, hence a host test). The address must be kept for as long as
// the lease lasts, not a moment less; the loss must be reported when the
// lease runs out (an ERROR naming interface, address and server; the
// Handle no longer bound; the address gone from the interface); and when
// a server is back the lease must be regained without any help.
func TestDHCPServerGone(t *testing.T) {
	const leaseTime = 8 * time.Second // T1 4 s, T2 7 s (RFC 2131 defaults)
	p := newPair(t)
	p.addVeth(t)
	s := &fakeServer{lease: leaseTime}
	srv, err := p.tryServe(s)
	if err != nil {
		t.Fatal(err)
	}
	log, lb := newLog(t)
	var hn []string
	cfg := baseConfig(p, t.TempDir(), &hn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, h, err := Up(ctx, log, cfg)
	if err != nil {
		srv.Close()
		t.Fatalf("Up: %v", err)
	}
	if res.DHCPServer != serverIP.String() || time.Duration(res.LeaseTime)*time.Millisecond != leaseTime {
		t.Errorf("Up's result: server %q, lease %v ms; want %s and %s", res.DHCPServer, res.LeaseTime, serverIP, leaseTime)
	}
	first, bound := h.Lease()
	if !bound {
		t.Fatal("Up returned a handle that is not bound")
	}
	_, t2, expiry := first.Deadlines()

	// The server goes away.
	if err := srv.Close(); err != nil {
		t.Fatalf("stopping the DHCP server: %v", err)
	}
	goneAt := time.Now()

	// Kept through RENEWING and REBINDING, to the end of the lease. The
	// kernel's valid lifetime is the lease's, so the kernel too drops the
	// address no earlier than the lease ends.
	for time.Now().Before(expiry.Add(-400 * time.Millisecond)) {
		a := p.clientAddr(t)
		if a == nil {
			t.Fatalf("address dropped %s before the lease expired (server gone %s ago)",
				time.Until(expiry).Round(time.Millisecond), time.Since(goneAt).Round(time.Millisecond))
		}
		if left := time.Until(expiry); a.ValidLft <= 0 || time.Duration(a.ValidLft)*time.Second > left+2*time.Second {
			t.Errorf("address valid_lft %d s with %s of lease left", a.ValidLft, left.Round(time.Millisecond))
		}
		if _, bound := h.Lease(); !bound {
			t.Fatalf("handle says unbound %s before the lease expired", time.Until(expiry).Round(time.Millisecond))
		}
		if lb.find("ERROR", "LEASE LOST") != nil {
			t.Fatalf("lease reported lost %s before it expired", time.Until(expiry).Round(time.Millisecond))
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Lost when it expires, loudly, naming interface, address and server.
	var rec map[string]any
	eventually(t, expiry.Add(3*time.Second).Sub(time.Now()), "an ERROR log for the lost lease", func() bool {
		rec = lb.find("ERROR", "LEASE LOST")
		return rec != nil
	})
	lostAt := time.Now()
	if early := expiry.Sub(lostAt); early > 300*time.Millisecond {
		t.Errorf("lease reported lost %s before it expired", early)
	}
	if rec["interface"] != "eth0" || rec["address"] != "10.99.0.2/24" || rec["server"] != serverIP.String() {
		t.Errorf("loss log does not name interface, address and server: %v", rec)
	}
	eventually(t, 2*time.Second, "the address to go", func() bool { return p.clientAddr(t) == nil })
	keptFor := time.Since(goneAt)
	if _, bound := h.Lease(); bound {
		t.Error("handle still says bound after the lease expired")
	}
	renewalsBefore := h.Renewals()

	// The silence was noticed while the address was kept: unanswered
	// renewals (unicast, T1 to T2) and rebinds (broadcast, T2 to expiry;
	// the last one's warning comes as the lease runs out).
	var renews, rebinds int
	for _, r := range lb.records() {
		if r["level"] == "WARN" && r["msg"] == "DHCP renewal got no answer" {
			if rb, _ := r["rebind"].(bool); rb {
				rebinds++
			} else {
				renews++
			}
		}
	}
	if renews == 0 || rebinds == 0 {
		t.Errorf("unanswered renewals logged: %d renewing, %d rebinding (T2 at +%s); want both",
			renews, rebinds, t2.Sub(first.Acquired))
	}

	// Nobody there for a while: it keeps asking (DISCOVER), and says so.
	time.Sleep(3 * time.Second)
	if p.clientAddr(t) != nil {
		t.Fatal("an address came back with no server")
	}

	// The server is back (a new process on the same port): the lease is
	// regained by itself.
	srv2, err := p.tryServe(s)
	if err != nil {
		t.Fatalf("restarting the DHCP server: %v", err)
	}
	t.Cleanup(func() { srv2.Close() })
	backAt := time.Now()
	eventually(t, 20*time.Second, "the lease to be regained once the server is back", func() bool {
		_, bound := h.Lease()
		return bound && p.clientAddr(t) != nil
	})
	regainedIn := time.Since(backAt)
	if lb.find("INFO", "DHCP lease regained") == nil {
		t.Error("no 'DHCP lease regained' log")
	}
	again, _ := h.Lease()
	if again.Address.String() != "10.99.0.2/24" || !again.Acquired.After(backAt.Add(-time.Second)) {
		t.Errorf("regained lease: %+v (server back at %s)", again, backAt.Format(time.RFC3339Nano))
	}
	if h.Renewals() <= renewalsBefore {
		t.Errorf("renewal count %d did not grow on the regained lease", h.Renewals())
	}
	var discovers int
	for _, r := range s.seen() {
		if r.at.After(backAt) && r.typ == dhcpv4.MessageTypeDiscover {
			discovers++
		}
	}
	if discovers == 0 {
		t.Errorf("the server saw no DISCOVER after it came back: %+v", s.seen())
	}
	t.Logf("figure: FAULT | fault=DHCP server gone after the lease (%s lease) | action=address kept %.1f s after the server went, to the lease's end (%d renew, %d rebind tries), LEASE LOST logged %+.1f s from expiry, address removed, DISCOVER until a server answers | recover=%.1f s after the server came back | lost=IPv4 address while no server (expected: the lease had run out)",
		leaseTime, keptFor.Seconds(), renews, rebinds, lostAt.Sub(expiry).Seconds(), regainedIn.Seconds())
}
