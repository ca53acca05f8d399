package network

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/server4"
	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/dhcpv6/server6"
	"github.com/insomniacslk/dhcp/iana"
	"github.com/insomniacslk/dhcp/rfc1035label"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/net/ipv6"
)

// The test network: the server namespace holds srv0 with serverIP, the
// client namespace holds eth0, joined by a veth. Nothing else.
var (
	serverIP = net.IPv4(10, 99, 0, 1).To4()
	clientIP = net.IPv4(10, 99, 0, 2).To4()
)

type pair struct {
	client, server netns.NsHandle
	srvNL, cliNL   *netlink.Handle
}

// newPair makes the two namespaces and the veth. It fails when not root
// and skips, loudly, only when the kernel refuses network namespaces.
func newPair(t *testing.T) *pair {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("these tests configure network namespaces and need root (CI runs them as root)")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatalf("netns.Get: %v", err)
	}
	defer orig.Close()
	srv, err := netns.New()
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOSYS) {
		t.Skipf("!!! SKIPPED: THIS MACHINE HAS NO NETWORK NAMESPACE SUPPORT (unshare: %v); the DHCP/netlink host tests did NOT run !!!", err)
	}
	if err != nil {
		t.Fatalf("creating server netns: %v", err)
	}
	cli, err := netns.New()
	if err != nil {
		netns.Set(orig)
		t.Fatalf("creating client netns: %v", err)
	}
	if err := netns.Set(orig); err != nil {
		t.Fatalf("returning to the original netns: %v", err)
	}
	p := &pair{client: cli, server: srv}
	t.Cleanup(func() { cli.Close(); srv.Close() })
	if p.srvNL, err = netlink.NewHandleAt(srv); err != nil {
		t.Fatal(err)
	}
	if p.cliNL, err = netlink.NewHandleAt(cli); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.srvNL.Close(); p.cliNL.Close() })
	return p
}

// addVeth joins the namespaces: srv0 (up, serverIP/24) and eth0 in the
// client namespace, left down for Up to bring up.
func (p *pair) addVeth(t *testing.T) {
	t.Helper()
	if err := p.tryAddVeth(); err != nil {
		t.Fatal(err)
	}
}

func (p *pair) tryAddVeth() error {
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "srv0"}, PeerName: "eth0", PeerNamespace: netlink.NsFd(p.client)}
	if err := p.srvNL.LinkAdd(veth); err != nil {
		return fmt.Errorf("adding veth: %w", err)
	}
	srv0, err := p.srvNL.LinkByName("srv0")
	if err != nil {
		return err
	}
	if err := p.srvNL.AddrAdd(srv0, &netlink.Addr{IPNet: &net.IPNet{IP: serverIP, Mask: net.CIDRMask(24, 32)}}); err != nil {
		return fmt.Errorf("adding %s to srv0: %w", serverIP, err)
	}
	return p.srvNL.LinkSetUp(srv0)
}

// fakeServer is a DHCPv4 server with knobs: lease times, options, and a
// switch to stop answering.
type fakeServer struct {
	mu       sync.Mutex
	silent   bool
	nakRenew bool // NAK requests that carry ciaddr (renew/rebind)
	lease    time.Duration
	t1, t2   time.Duration
	opts     []dhcpv4.Option
	requests []seen
}

type seen struct {
	at     time.Time
	typ    dhcpv4.MessageType
	ciaddr net.IP
	peer   net.IP
}

func (s *fakeServer) setSilent(b bool) { s.mu.Lock(); s.silent = b; s.mu.Unlock() }

func (s *fakeServer) seen() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.requests...)
}

func (s *fakeServer) handle(conn net.PacketConn, peer net.Addr, m *dhcpv4.DHCPv4) {
	s.mu.Lock()
	silent := s.silent
	s.requests = append(s.requests, seen{time.Now(), m.MessageType(), m.ClientIPAddr, peer.(*net.UDPAddr).IP})
	lease, t1, t2, opts, nakRenew := s.lease, s.t1, s.t2, s.opts, s.nakRenew
	s.mu.Unlock()
	if silent {
		return
	}
	if nakRenew && m.MessageType() == dhcpv4.MessageTypeRequest && !m.ClientIPAddr.IsUnspecified() {
		nak, err := dhcpv4.NewReplyFromRequest(m, dhcpv4.WithMessageType(dhcpv4.MessageTypeNak),
			dhcpv4.WithOption(dhcpv4.OptServerIdentifier(serverIP)), dhcpv4.WithOption(dhcpv4.OptMessage("address taken")))
		if err == nil {
			conn.WriteTo(nak.ToBytes(), peer)
		}
		return
	}
	var typ dhcpv4.MessageType
	switch m.MessageType() {
	case dhcpv4.MessageTypeDiscover:
		typ = dhcpv4.MessageTypeOffer
	case dhcpv4.MessageTypeRequest:
		typ = dhcpv4.MessageTypeAck
	default:
		return
	}
	mods := []dhcpv4.Modifier{
		dhcpv4.WithMessageType(typ),
		dhcpv4.WithYourIP(clientIP),
		dhcpv4.WithServerIP(serverIP),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(serverIP)),
		dhcpv4.WithOption(dhcpv4.OptSubnetMask(net.CIDRMask(24, 32))),
		dhcpv4.WithOption(dhcpv4.OptIPAddressLeaseTime(lease)),
	}
	if t1 > 0 {
		mods = append(mods, dhcpv4.WithOption(dhcpv4.OptRenewTimeValue(t1)))
	}
	if t2 > 0 {
		mods = append(mods, dhcpv4.WithOption(dhcpv4.OptRebindingTimeValue(t2)))
	}
	for _, o := range opts {
		mods = append(mods, dhcpv4.WithOption(o))
	}
	reply, err := dhcpv4.NewReplyFromRequest(m, mods...)
	if err != nil {
		return
	}
	conn.WriteTo(reply.ToBytes(), peer)
}

// serve starts s on srv0 in the server namespace. The socket is bound to
// srv0 and to port 67 of that namespace (INADDR_ANY there, whose only
// address is serverIP: broadcasts only reach wildcard-bound sockets).
func (p *pair) serve(t *testing.T, s *fakeServer) {
	t.Helper()
	srv, err := p.tryServe(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
}

func (p *pair) tryServe(s *fakeServer) (*server4.Server, error) {
	e := &env{ns: p.server}
	var conn *net.UDPConn
	if err := e.do(func() (err error) {
		conn, err = server4.NewIPv4UDPConn("srv0", &net.UDPAddr{Port: dhcpv4.ServerPort})
		return err
	}); err != nil {
		return nil, fmt.Errorf("DHCP server socket: %w", err)
	}
	srv, err := server4.NewServer("", nil, s.handle, server4.WithConn(conn))
	if err != nil {
		return nil, err
	}
	go srv.Serve()
	return srv, nil
}

// logBuf collects JSON slog records from the code under test.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }

func (l *logBuf) records() []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(l.b.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

func (l *logBuf) find(level, msgPart string) map[string]any {
	for _, r := range l.records() {
		if r["level"] == level && strings.Contains(r["msg"].(string), msgPart) {
			return r
		}
	}
	return nil
}

func newLog(t *testing.T) (*slog.Logger, *logBuf) {
	lb := &logBuf{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log of the code under test:\n%s", lb.b.String())
		}
	})
	return slog.New(slog.NewJSONHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug})), lb
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *pair) clientAddr(t *testing.T) *netlink.Addr {
	t.Helper()
	l, err := p.cliNL.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := p.cliNL.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	for i := range addrs {
		if addrs[i].IP.Equal(clientIP) {
			return &addrs[i]
		}
	}
	return nil
}

func (p *pair) routes(t *testing.T) map[string]string {
	t.Helper()
	rs, err := p.cliNL.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, r := range rs {
		dst := "default"
		if r.Dst != nil && !(r.Dst.IP.IsUnspecified() && r.Dst.Mask != nil && net.IPMask(r.Dst.Mask).String() == "00000000") {
			dst = r.Dst.String()
		}
		m[dst] = r.Gw.String()
	}
	return m
}

func baseConfig(p *pair, dir string, hostnames *[]string) Config {
	return Config{
		Mode:           ModeDHCP,
		Interface:      "eth0",
		NetNS:          p.client,
		ResolvConfPath: filepath.Join(dir, "resolv.conf"),
		SetHostname:    func(n string) error { *hostnames = append(*hostnames, n); return nil },
		Timeout:        10 * time.Second,
		LinkTimeout:    3 * time.Second,
	}
}

func TestUpDHCPAppliesLease(t *testing.T) {
	p := newPair(t)
	p.addVeth(t)
	search := &rfc1035label.Labels{Labels: []string{"a.example", "b.example"}}
	s := &fakeServer{lease: 600 * time.Second, opts: []dhcpv4.Option{
		dhcpv4.OptRouter(net.IPv4(10, 99, 0, 99)), // must lose to option 121
		dhcpv4.OptClasslessStaticRoute(
			&dhcpv4.Route{Dest: &net.IPNet{IP: net.IPv4(192, 168, 50, 0).To4(), Mask: net.CIDRMask(24, 32)}, Router: net.IPv4(10, 99, 0, 254).To4()},
			&dhcpv4.Route{Dest: &net.IPNet{IP: net.IPv4(172, 16, 0, 0).To4(), Mask: net.CIDRMask(12, 32)}, Router: net.IPv4zero.To4()},
			&dhcpv4.Route{Dest: &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}, Router: serverIP},
		),
		dhcpv4.OptGeneric(dhcpv4.OptionInterfaceMTU, []byte{0x05, 0x78}), // 1400
		dhcpv4.OptDNS(net.IPv4(10, 99, 0, 53)),
		dhcpv4.OptDomainName("test.internal"),
		dhcpv4.OptDomainSearch(search),
		dhcpv4.OptHostName("ip-10-99-0-2"),
	}}
	p.serve(t, s)
	log, _ := newLog(t)
	var hostnames []string
	dir := t.TempDir()
	cfg := baseConfig(p, dir, &hostnames)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	res, h, err := Up(ctx, log, cfg)
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	if h == nil {
		t.Fatal("Up returned no handle for DHCP")
	}
	t.Logf("FIGURES Up() in netns: total %.1f ms = link wait %.1f ms + DHCP %.1f ms + apply %.1f ms (DHCP share %.0f%%)",
		res.Steps.Total, res.Steps.LinkWait, res.Steps.DHCP, res.Steps.Apply, 100*res.Steps.DHCPShare)

	a := p.clientAddr(t)
	if a == nil {
		t.Fatalf("address %s/24 not on eth0", clientIP)
	}
	if ones, _ := a.Mask.Size(); ones != 24 {
		t.Errorf("prefix /%d, want /24", ones)
	}
	if a.ValidLft < 590 || a.ValidLft > 600 {
		t.Errorf("valid lifetime %d s, want the lease's ~600 s", a.ValidLft)
	}
	routes := p.routes(t)
	for dst, gw := range map[string]string{"default": "10.99.0.1", "192.168.50.0/24": "10.99.0.254", "172.16.0.0/12": "<nil>"} {
		if routes[dst] != gw {
			t.Errorf("route %s via %q, want via %q (all: %v)", dst, routes[dst], gw, routes)
		}
	}
	for dst, gw := range routes {
		if gw == "10.99.0.99" {
			t.Errorf("route %s uses option 3's router although option 121 was given", dst)
		}
	}
	l, _ := p.cliNL.LinkByName("eth0")
	if l.Attrs().MTU != 1400 || res.MTU != 1400 {
		t.Errorf("MTU link %d result %d, want 1400 from option 26", l.Attrs().MTU, res.MTU)
	}
	rc, err := os.ReadFile(cfg.ResolvConfPath)
	if err != nil {
		t.Fatal(err)
	}
	if want := "nameserver 10.99.0.53\nsearch test.internal a.example b.example\n"; !strings.HasSuffix(string(rc), want) {
		t.Errorf("resolv.conf:\n%s\nwant it to end with:\n%s", rc, want)
	}
	if len(hostnames) != 1 || hostnames[0] != "ip-10-99-0-2" {
		t.Errorf("hostname set to %v, want [ip-10-99-0-2] from option 12", hostnames)
	}
	if res.Interface != "eth0" || res.DHCPServer != "10.99.0.1" || res.Gateway != "10.99.0.1" ||
		res.LeaseTime != 600000 || res.T1 != 300000 || res.T2 != 525000 || len(res.Addresses) != 1 || res.Addresses[0] != "10.99.0.2/24" {
		t.Errorf("result: %+v", res)
	}
	if _, err := json.Marshal(res); err != nil {
		t.Errorf("result does not marshal: %v", err)
	}
	cancel()
	select {
	case <-h.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("renewer did not stop within 5s of ctx ending")
	}
}

func TestRenewalExtendsLease(t *testing.T) {
	p := newPair(t)
	p.addVeth(t)
	s := &fakeServer{lease: 4 * time.Second, t1: 2 * time.Second, t2: 3 * time.Second}
	p.serve(t, s)
	log, lb := newLog(t)
	var hn []string
	cfg := baseConfig(p, t.TempDir(), &hn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, h, err := Up(ctx, log, cfg)
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	first, _ := h.Lease()
	s.mu.Lock()
	s.opts = []dhcpv4.Option{dhcpv4.OptDNS(net.IPv4(10, 99, 0, 54))} // the renewal brings a new DNS server
	s.mu.Unlock()
	eventually(t, 4*time.Second, "a renewal", func() bool { return h.Renewals() >= 1 })
	if rc, _ := os.ReadFile(cfg.ResolvConfPath); !strings.Contains(string(rc), "nameserver 10.99.0.54\n") {
		t.Errorf("resolv.conf not updated with the renewed lease's DNS server:\n%s", rc)
	}
	renewed, bound := h.Lease()
	if !bound || !renewed.Acquired.After(first.Acquired.Add(1500*time.Millisecond)) {
		t.Errorf("renewed lease acquired %v, first %v: want it near T1 (2 s) later", renewed.Acquired, first.Acquired)
	}
	// The renewal went to the server from the leased address (unicast,
	// RENEWING), with ciaddr filled in.
	var renewReq *seen
	for _, r := range s.seen() {
		if r.typ == dhcpv4.MessageTypeRequest && r.ciaddr.Equal(clientIP) {
			renewReq = &r
			break
		}
	}
	if renewReq == nil || !renewReq.peer.Equal(clientIP) {
		t.Fatalf("no renewal REQUEST from %s with ciaddr set; server saw %+v", clientIP, s.seen())
	}
	if d := renewReq.at.Sub(first.Acquired); d < 1900*time.Millisecond || d > 2600*time.Millisecond {
		t.Errorf("renewal sent %s after the lease, want at T1 = 2s", d)
	}
	// The kernel's lifetime was pushed out: past the first lease's expiry
	// the address is still there, with most of a new lease left.
	time.Sleep(time.Until(first.Acquired.Add(4500 * time.Millisecond)))
	a := p.clientAddr(t)
	if a == nil {
		t.Fatal("address gone after the first lease's expiry although it was renewed")
	}
	if a.ValidLft < 1 || a.ValidLft > 4 {
		t.Errorf("valid lifetime %d s, want 1..4 s of a renewed 4 s lease", a.ValidLft)
	}
	if lb.find("INFO", "DHCP lease renewed") == nil {
		t.Error("no 'DHCP lease renewed' log")
	}
	if r := lb.find("ERROR", "LEASE LOST"); r != nil {
		t.Errorf("lease reported lost although the server answered: %v", r)
	}
}

// TestRenewalResolvConf: a renewal whose lease brings new DNS options
// (option 6 server, option 15 domain) rewrites resolv.conf with them,
// except where PID 1 set a DNS override from the NodeConfig: the
// override's nameservers and search list survive the renewal, field by
// field, and a renewal that changes nothing the file says leaves the file
// alone.
func TestRenewalResolvConf(t *testing.T) {
	for _, tc := range []struct {
		name        string
		nameservers []string // override, set right after Up
		search      []string
		want        string // resolv.conf after the renewal, less the header
	}{
		{name: "no override follows the lease",
			want: "nameserver 10.99.0.54\nsearch new.example\n"},
		{name: "override kept", nameservers: []string{"10.99.0.153", "10.99.0.154"}, search: []string{"corp.example"},
			want: "nameserver 10.99.0.153\nnameserver 10.99.0.154\nsearch corp.example\n"},
		{name: "nameservers only: search follows the lease", nameservers: []string{"10.99.0.153"},
			want: "nameserver 10.99.0.153\nsearch new.example\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t)
			p.addVeth(t)
			s := &fakeServer{lease: 4 * time.Second, t1: 2 * time.Second, t2: 3 * time.Second, opts: []dhcpv4.Option{
				dhcpv4.OptDNS(net.IPv4(10, 99, 0, 53)), dhcpv4.OptDomainName("old.example")}}
			p.serve(t, s)
			log, lb := newLog(t)
			var hn []string
			cfg := baseConfig(p, t.TempDir(), &hn)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			_, h, err := Up(ctx, log, cfg)
			if err != nil {
				t.Fatalf("Up: %v", err)
			}
			read := func() string {
				t.Helper()
				b, err := os.ReadFile(cfg.ResolvConfPath)
				if err != nil {
					t.Fatal(err)
				}
				return string(b)
			}
			if rc := read(); !strings.HasSuffix(rc, "nameserver 10.99.0.53\nsearch old.example\n") {
				t.Fatalf("resolv.conf after Up:\n%s", rc)
			}
			override := len(tc.nameservers) > 0 || len(tc.search) > 0
			header := "# Written by berth at boot from DHCP"
			if override {
				header = "# Written by berth from spec.instance.network.\n"
				if err := h.SetDNSOverride(tc.nameservers, tc.search); err != nil {
					t.Fatalf("SetDNSOverride: %v", err)
				}
				// The file says the override at once, as the plan's
				// /etc/resolv.conf does.
				rc := read()
				for _, ns := range tc.nameservers {
					if !strings.Contains(rc, "nameserver "+ns+"\n") {
						t.Errorf("right after SetDNSOverride, resolv.conf lacks nameserver %s:\n%s", ns, rc)
					}
				}
				if len(tc.search) > 0 && !strings.Contains(rc, "search "+strings.Join(tc.search, " ")+"\n") {
					t.Errorf("right after SetDNSOverride, resolv.conf lacks the search list %v:\n%s", tc.search, rc)
				}
				if err := h.SetDNSOverride([]string{"not-an-address"}, nil); err == nil {
					t.Error("SetDNSOverride took a nameserver that is not an IP address")
				}
				if again := read(); again != rc {
					t.Errorf("a refused override changed resolv.conf:\n%s\nwas:\n%s", again, rc)
				}
			}
			ino := func() uint64 {
				st, err := os.Stat(cfg.ResolvConfPath)
				if err != nil {
					t.Fatal(err)
				}
				return st.Sys().(*syscall.Stat_t).Ino
			}
			before := ino()
			s.mu.Lock()
			s.opts = []dhcpv4.Option{dhcpv4.OptDNS(net.IPv4(10, 99, 0, 54)), dhcpv4.OptDomainName("new.example")}
			s.mu.Unlock()
			eventually(t, 4*time.Second, "a renewal", func() bool { return h.Renewals() >= 1 })
			// The renewal did bring the new options: what the file says is
			// the override's doing, not a stale lease.
			if l, _ := h.Lease(); len(l.DNS) != 1 || l.DNS[0] != netip.MustParseAddr("10.99.0.54") || l.Domain != "new.example" {
				t.Fatalf("renewed lease DNS %v domain %q, want the server's new 10.99.0.54 and new.example", l.DNS, l.Domain)
			}
			rc := read()
			if !strings.HasPrefix(rc, header) || !strings.HasSuffix(rc, "\n"+tc.want) || strings.Count(rc, "\n") != strings.Count(tc.want, "\n")+1 {
				t.Errorf("resolv.conf after the renewal:\n%s\nwant %q then:\n%s", rc, header, tc.want)
			}
			if ino() == before && !override {
				t.Error("resolv.conf not rewritten for the renewal's new DNS")
			}
			if override && len(tc.search) > 0 && ino() != before {
				t.Error("resolv.conf rewritten by a renewal that changed nothing it says")
			}
			if r := lb.find("ERROR", "resolv.conf"); r != nil {
				t.Errorf("resolv.conf error logged: %v", r)
			}
		})
	}
	var none *Handle // static and off modes
	if err := none.SetDNSOverride([]string{"10.0.0.2"}, nil); err != nil {
		t.Errorf("SetDNSOverride on a nil Handle: %v", err)
	}
}

// TestRenewalKeepsDHCPv6DNS: a DHCPv4 renewal that rewrites resolv.conf
// keeps the DHCPv6 server's nameserver that Up wrote beside the lease's.
func TestRenewalKeepsDHCPv6DNS(t *testing.T) {
	p := newPair(t)
	if err := (&env{ns: p.server}).writeSysctl("/proc/sys/net/ipv6/conf/default/accept_dad", "0"); err != nil {
		t.Fatal(err)
	}
	p.addVeth(t)
	s4 := &fakeServer{lease: 4 * time.Second, t1: 2 * time.Second, t2: 3 * time.Second, opts: []dhcpv4.Option{
		dhcpv4.OptDNS(net.IPv4(10, 99, 0, 53))}}
	p.serve(t, s4)
	p.serve6(t)
	log, _ := newLog(t)
	var hn []string
	cfg := baseConfig(p, t.TempDir(), &hn)
	cfg.IPv6, cfg.DHCPv6, cfg.IPv6Timeout = true, true, 8*time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, _, err := Up(ctx, log, cfg)
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	if res.DHCPv6Server == "" {
		t.Fatalf("no DHCPv6 lease: %+v", res)
	}
	s4.mu.Lock()
	s4.opts = []dhcpv4.Option{dhcpv4.OptDNS(net.IPv4(10, 99, 0, 54))}
	s4.mu.Unlock()
	var rc []byte
	eventually(t, 6*time.Second, "a renewal writing the new DHCPv4 DNS server", func() bool {
		rc, _ = os.ReadFile(cfg.ResolvConfPath)
		return strings.Contains(string(rc), "nameserver 10.99.0.54\n")
	})
	if !strings.HasSuffix(string(rc), "\nnameserver 10.99.0.54\nnameserver 2001:db8:2::53\n") {
		t.Errorf("resolv.conf after the renewal lost or misplaced the DHCPv6 nameserver:\n%s", rc)
	}
}

func TestServerStopsAnswering(t *testing.T) {
	p := newPair(t)
	p.addVeth(t)
	s := &fakeServer{lease: 4 * time.Second} // T1 2 s, T2 3.5 s
	p.serve(t, s)
	log, lb := newLog(t)
	var hn []string
	cfg := baseConfig(p, t.TempDir(), &hn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, h, err := Up(ctx, log, cfg)
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	first, _ := h.Lease()
	s.setSilent(true)

	// Kept through RENEWING and REBINDING...
	time.Sleep(time.Until(first.Acquired.Add(3700 * time.Millisecond)))
	if p.clientAddr(t) == nil {
		t.Fatal("address dropped before the lease expired")
	}
	if lb.find("ERROR", "LEASE LOST") != nil {
		t.Fatal("lease reported lost before it expired")
	}
	var renews, rebinds int
	for _, r := range s.seen() {
		if r.typ == dhcpv4.MessageTypeRequest && r.ciaddr.Equal(clientIP) {
			if r.at.Before(first.Acquired.Add(3500 * time.Millisecond)) {
				renews++
			} else {
				rebinds++
			}
		}
	}
	if renews == 0 || rebinds == 0 {
		t.Errorf("renew attempts %d (T1..T2), rebind attempts %d (T2..expiry): want both", renews, rebinds)
	}
	// ...then lost, loudly, naming interface, address and server.
	var rec map[string]any
	eventually(t, 2*time.Second, "an ERROR log for the lost lease", func() bool {
		rec = lb.find("ERROR", "LEASE LOST")
		return rec != nil
	})
	if rec["interface"] != "eth0" || rec["address"] != "10.99.0.2/24" || rec["server"] != "10.99.0.1" {
		t.Errorf("loss log does not name interface, address and server: %v", rec)
	}
	eventually(t, time.Second, "the address to go", func() bool { return p.clientAddr(t) == nil })
	if _, bound := h.Lease(); bound {
		t.Error("handle still says bound")
	}
	// It keeps trying: when the server is back, the lease comes back.
	s.setSilent(false)
	eventually(t, 8*time.Second, "the lease to be regained", func() bool {
		_, bound := h.Lease()
		return bound && p.clientAddr(t) != nil
	})
	if lb.find("INFO", "DHCP lease regained") == nil {
		t.Error("no 'DHCP lease regained' log")
	}
}

func TestServerNeverAnswers(t *testing.T) {
	p := newPair(t)
	p.addVeth(t)
	s := &fakeServer{lease: time.Hour, silent: true}
	p.serve(t, s)
	log, _ := newLog(t)
	var hn []string
	cfg := baseConfig(p, t.TempDir(), &hn)
	cfg.Timeout = 3 * time.Second
	start := time.Now()
	res, h, err := Up(context.Background(), log, cfg)
	took := time.Since(start)
	if err == nil || h != nil {
		t.Fatalf("Up with a silent server: err %v, handle %v; want an error and no handle", err, h)
	}
	if took < 3*time.Second || took > 4*time.Second {
		t.Errorf("Up gave up after %s, want at the 3 s deadline", took)
	}
	for _, want := range []string{"DHCPv4 on eth0", "no lease after", "context deadline exceeded"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if len(s.seen()) < 2 {
		t.Errorf("server saw %d DISCOVERs, want retries", len(s.seen()))
	}
	if res.Steps.DHCP < 2900 {
		t.Errorf("result says DHCP took %.0f ms, want ~3000", res.Steps.DHCP)
	}
}

func TestUpStatic(t *testing.T) {
	p := newPair(t)
	p.addVeth(t)
	log, _ := newLog(t)
	var hn []string
	dir := t.TempDir()
	cfg, problems := ParseConfig(mapGet(map[string]string{
		"berth.ip": "10.99.0.7/24", "berth.gw": "10.99.0.1", "berth.dns": "10.99.0.53,10.99.0.54",
		"berth.mtu": "1450", "berth.iface": "eth0", "berth.hostname": "static-node",
	}))
	if problems != nil {
		t.Fatal(problems)
	}
	cfg.NetNS = p.client
	cfg.ResolvConfPath = filepath.Join(dir, "resolv.conf")
	cfg.SetHostname = func(n string) error { hn = append(hn, n); return nil }
	res, h, err := Up(context.Background(), log, cfg)
	if err != nil || h != nil {
		t.Fatalf("Up static: %v (handle %v)", err, h)
	}
	l, _ := p.cliNL.LinkByName("eth0")
	addrs, _ := p.cliNL.AddrList(l, netlink.FAMILY_V4)
	if len(addrs) != 1 || addrs[0].IPNet.String() != "10.99.0.7/24" {
		t.Errorf("addresses %v, want 10.99.0.7/24", addrs)
	}
	if addrs[0].ValidLft != 0 && uint32(addrs[0].ValidLft) != 0xffffffff {
		t.Errorf("static address has lifetime %d, want forever", addrs[0].ValidLft)
	}
	if got := p.routes(t)["default"]; got != "10.99.0.1" {
		t.Errorf("default route via %q, want 10.99.0.1", got)
	}
	if l.Attrs().MTU != 1450 {
		t.Errorf("MTU %d, want 1450", l.Attrs().MTU)
	}
	rc, _ := os.ReadFile(cfg.ResolvConfPath)
	if !strings.Contains(string(rc), "nameserver 10.99.0.53\nnameserver 10.99.0.54\n") {
		t.Errorf("resolv.conf:\n%s", rc)
	}
	if len(hn) != 1 || hn[0] != "static-node" || res.Hostname != "static-node" {
		t.Errorf("hostname calls %v, result %q", hn, res.Hostname)
	}
	// Reachability through what was applied: the server answers ping-free
	// UDP? Keep it to netlink: the on-link route to the subnet exists.
	if _, ok := p.routes(t)["10.99.0.0/24"]; !ok {
		t.Errorf("no subnet route: %v", p.routes(t))
	}
}

func TestUpWaitsForLateLink(t *testing.T) {
	p := newPair(t)
	s := &fakeServer{lease: time.Hour}
	log, _ := newLog(t)
	var hn []string
	cfg := baseConfig(p, t.TempDir(), &hn)
	type served struct {
		srv *server4.Server
		err error
	}
	ready := make(chan served, 1)
	go func() {
		time.Sleep(300 * time.Millisecond) // the NIC driver loads late
		if err := p.tryAddVeth(); err != nil {
			ready <- served{err: err}
			return
		}
		srv, err := p.tryServe(s)
		ready <- served{srv, err}
	}()
	res, _, err := Up(context.Background(), log, cfg)
	sv := <-ready
	if sv.err != nil {
		t.Fatalf("setting up the late link: %v", sv.err)
	}
	defer sv.srv.Close()
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	if res.Steps.LinkWait < 250 {
		t.Errorf("link wait %.0f ms, want it to include the 300 ms until eth0 appeared", res.Steps.LinkWait)
	}
}

func TestUpLinkNeverAppears(t *testing.T) {
	p := newPair(t)
	log, _ := newLog(t)
	var hn []string
	cfg := baseConfig(p, t.TempDir(), &hn)
	cfg.LinkTimeout = 500 * time.Millisecond
	start := time.Now()
	_, _, err := Up(context.Background(), log, cfg)
	if err == nil || !strings.Contains(err.Error(), `no link named "eth0"`) || !strings.Contains(err.Error(), "waiting for the primary link") {
		t.Fatalf("error %v, want it to say it waited for eth0", err)
	}
	if took := time.Since(start); took > 1500*time.Millisecond {
		t.Errorf("took %s, want ~500ms", took)
	}
}

func TestUpOff(t *testing.T) {
	p := newPair(t)
	log, _ := newLog(t)
	res, h, err := Up(context.Background(), log, Config{Mode: ModeOff, NetNS: p.client})
	if err != nil || h != nil || res.Mode != ModeOff {
		t.Fatalf("Up off: %v %v %+v", err, h, res)
	}
	lo, _ := p.cliNL.LinkByName("lo")
	if lo.Attrs().Flags&net.FlagUp == 0 {
		t.Error("lo not up")
	}
}

func mapGet(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// A static setup's extra routes go into the kernel through their
// gateways, and its search domains into resolv.conf (a NoCloud seed's
// network-config gives both).
func TestUpStaticRoutesAndSearch(t *testing.T) {
	p := newPair(t)
	p.addVeth(t)
	log, _ := newLog(t)
	rc := filepath.Join(t.TempDir(), "resolv.conf")
	cfg := Config{Mode: ModeStatic, Interface: "eth0", Address: netip.MustParsePrefix("10.99.0.7/24"),
		Gateway: netip.MustParseAddr("10.99.0.1"), NetNS: p.client, ResolvConfPath: rc,
		Routes: []Route{{Dst: netip.MustParsePrefix("172.16.0.0/12"), Gateway: netip.MustParseAddr("10.99.0.254")}},
		DNS:    []netip.Addr{netip.MustParseAddr("10.99.0.1")}, Search: []string{"lab.example"}}
	res, _, err := Up(context.Background(), log, cfg)
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	if len(res.Routes) != 2 || res.Routes[1] != cfg.Routes[0] || !slices.Equal(res.Search, []string{"lab.example"}) {
		t.Errorf("result routes %v search %v: want the default route and 172.16.0.0/12 via 10.99.0.254, search lab.example", res.Routes, res.Search)
	}
	eth0, err := p.cliNL.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	routes, err := p.cliNL.RouteList(eth0, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range routes {
		got = append(got, fmt.Sprintf("%v via %v", r.Dst, r.Gw))
	}
	if !slices.Contains(got, "172.16.0.0/12 via 10.99.0.254") || !slices.Contains(got, "0.0.0.0/0 via 10.99.0.1") {
		t.Errorf("kernel routes on eth0: %q: want 172.16.0.0/12 via 10.99.0.254 and the default via 10.99.0.1", got)
	}
	b, err := os.ReadFile(rc)
	if err != nil || !strings.Contains(string(b), "search lab.example") {
		t.Errorf("resolv.conf: %v %q: want search lab.example", err, b)
	}
}

func TestUpIPv6AbsentIsBounded(t *testing.T) {
	p := newPair(t)
	p.addVeth(t)
	log, lb := newLog(t)
	cfg := Config{Mode: ModeStatic, Interface: "eth0", Address: netip.MustParsePrefix("10.99.0.7/24"),
		NetNS: p.client, IPv6: true, IPv6Timeout: 500 * time.Millisecond}
	start := time.Now()
	res, _, err := Up(context.Background(), log, cfg)
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	if took := time.Since(start); took > 1500*time.Millisecond || res.Steps.IPv6 < 450 {
		t.Errorf("Up took %s (IPv6 wait %.0f ms), want the 500 ms IPv6 bound and no more", took, res.Steps.IPv6)
	}
	if lb.find("WARN", "no IPv6 address") == nil {
		t.Error("no warning about the missing IPv6 address")
	}
	var ra string
	if err := (&env{ns: p.client}).do(func() error {
		b, err := os.ReadFile("/proc/sys/net/ipv6/conf/eth0/accept_ra")
		ra = strings.TrimSpace(string(b))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if ra != "2" {
		t.Errorf("accept_ra = %q, want 2 (RAs accepted even with forwarding on)", ra)
	}
}

// sendRAs has the server namespace advertise 2001:db8:1::/64 (SLAAC) on
// srv0 every 200 ms until stop is closed. srv0 gets its link-local address
// only once eth0 is up (carrier), so that wait is inside; errors go to errc.
func (p *pair) sendRAs(stop <-chan struct{}, errc chan<- error) {
	ra := []byte{
		134, 0, 0, 0, // type RA, code, checksum (the kernel fills it in)
		64, 0, 0x07, 0x08, // hop limit, flags, router lifetime 1800 s
		0, 0, 0, 0, 0, 0, 0, 0, // reachable, retrans
		3, 4, 64, 0xc0, // prefix information: len 4 (32 bytes), /64, on-link + autonomous
		0, 0, 0x0e, 0x10, 0, 0, 0x0e, 0x10, // valid, preferred 3600 s
		0, 0, 0, 0,
		0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	}
	srv0, err := p.srvNL.LinkByName("srv0")
	if err != nil {
		errc <- err
		return
	}
	var src net.IP
	for deadline := time.Now().Add(10 * time.Second); src == nil; {
		addrs, _ := p.srvNL.AddrList(srv0, netlink.FAMILY_V6)
		for _, a := range addrs {
			if a.IP.IsLinkLocalUnicast() && a.Flags&0x40 == 0 { // not IFA_F_TENTATIVE
				src = a.IP
			}
		}
		if time.Now().After(deadline) {
			errc <- fmt.Errorf("srv0 got no usable link-local address")
			return
		}
		select {
		case <-stop:
			errc <- nil
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
	e := &env{ns: p.server}
	var conn net.PacketConn
	if err := e.do(func() (err error) {
		conn, err = net.ListenPacket("ip6:58", src.String()+"%srv0")
		if err != nil {
			return err
		}
		return ipv6.NewPacketConn(conn).SetMulticastHopLimit(255)
	}); err != nil {
		errc <- fmt.Errorf("RA socket: %w", err)
		return
	}
	defer conn.Close()
	idx := strconv.Itoa(srv0.Attrs().Index)
	for {
		if err := e.do(func() error {
			_, err := conn.WriteTo(ra, &net.IPAddr{IP: net.ParseIP("ff02::1"), Zone: idx})
			return err
		}); err != nil {
			errc <- fmt.Errorf("sending RA: %w", err)
			return
		}
		select {
		case <-stop:
			errc <- nil
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func TestUpIPv6SLAAC(t *testing.T) {
	p := newPair(t)
	// No DAD in the server namespace, so srv0's link-local address can
	// send RAs at once.
	if err := (&env{ns: p.server}).writeSysctl("/proc/sys/net/ipv6/conf/default/accept_dad", "0"); err != nil {
		t.Fatal(err)
	}
	p.addVeth(t)
	stop, errc := make(chan struct{}), make(chan error, 1)
	go p.sendRAs(stop, errc)
	defer func() {
		close(stop)
		if err := <-errc; err != nil {
			t.Errorf("RA sender: %v", err)
		}
	}()
	log, _ := newLog(t)
	cfg := Config{Mode: ModeStatic, Interface: "eth0", Address: netip.MustParsePrefix("10.99.0.7/24"),
		NetNS: p.client, IPv6: true, IPv6Timeout: 8 * time.Second}
	res, _, err := Up(context.Background(), log, cfg)
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	var v6 string
	for _, a := range res.Addresses {
		if strings.HasPrefix(a, "2001:db8:1:0:") && strings.HasSuffix(a, "/64") {
			v6 = a
		}
	}
	if v6 == "" {
		t.Fatalf("no SLAAC address in 2001:db8:1::/64 in %v", res.Addresses)
	}
	t.Logf("SLAAC address %s after %.0f ms (includes DAD)", v6, res.Steps.IPv6)
	rs, _ := p.cliNL.RouteList(nil, netlink.FAMILY_V6)
	var def bool
	for _, r := range rs {
		if (r.Dst == nil || r.Dst.String() == "::/0") && r.Gw != nil && r.Gw.IsLinkLocalUnicast() {
			def = true
		}
	}
	if !def {
		t.Errorf("no IPv6 default route from the RA: %v", rs)
	}
}

// dhcp6Server answers Solicit (with or without rapid commit) and Request
// with one IA_NA address, lifetimes from its fields.
type dhcp6Server struct {
	mu        sync.Mutex
	exchanges []time.Time
	zone      string // srv0's index: replies go out on it
	e         *env
}

var v6Addr = net.ParseIP("2001:db8:2::10")

func (s *dhcp6Server) handle(conn net.PacketConn, peer net.Addr, d dhcpv6.DHCPv6) {
	m, ok := d.(*dhcpv6.Message)
	if !ok {
		return
	}
	ia := &dhcpv6.OptIANA{T1: 2 * time.Second, T2: 3 * time.Second, Options: dhcpv6.IdentityOptions{Options: []dhcpv6.Option{
		&dhcpv6.OptIAAddress{IPv6Addr: v6Addr, PreferredLifetime: 4 * time.Second, ValidLifetime: 6 * time.Second}}}}
	if req := m.Options.OneIANA(); req != nil {
		ia.IaId = req.IaId
	}
	mods := []dhcpv6.Modifier{
		dhcpv6.WithServerID(&dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: mac("02:00:00:00:00:01")}),
		func(d dhcpv6.DHCPv6) { d.UpdateOption(ia) },
		dhcpv6.WithDNS(net.ParseIP("2001:db8:2::53")),
	}
	var reply *dhcpv6.Message
	var err error
	switch {
	case m.MessageType == dhcpv6.MessageTypeSolicit && m.GetOneOption(dhcpv6.OptionRapidCommit) == nil:
		reply, err = dhcpv6.NewAdvertiseFromSolicit(m, mods...)
	default:
		reply, err = dhcpv6.NewReplyFromMessage(m, mods...)
		s.mu.Lock()
		s.exchanges = append(s.exchanges, time.Now())
		s.mu.Unlock()
	}
	if err != nil {
		return
	}
	up := *peer.(*net.UDPAddr)
	up.Zone = s.zone
	s.e.do(func() error { _, err := conn.WriteTo(reply.ToBytes(), &up); return err })
}

func (s *dhcp6Server) count() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.exchanges) }

// serve6 starts a dhcp6Server on srv0 in the server namespace (addVeth
// first, with accept_dad off there).
func (p *pair) serve6(t *testing.T) *dhcp6Server {
	t.Helper()
	srv0, _ := p.srvNL.LinkByName("srv0")
	s := &dhcp6Server{zone: strconv.Itoa(srv0.Attrs().Index), e: &env{ns: p.server}}
	var conn *net.UDPConn
	if err := s.e.do(func() (err error) {
		conn, err = server6.NewIPv6UDPConn("srv0", &net.UDPAddr{IP: net.IPv6unspecified, Port: dhcpv6.DefaultServerPort})
		if err != nil {
			return err
		}
		ifc, err := net.InterfaceByName("srv0")
		if err != nil {
			return err
		}
		return ipv6.NewPacketConn(conn).JoinGroup(ifc, &net.UDPAddr{IP: dhcpv6.AllDHCPRelayAgentsAndServers})
	}); err != nil {
		t.Fatalf("DHCPv6 server socket: %v", err)
	}
	srv, err := server6.NewServer("", nil, s.handle, server6.WithConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	t.Cleanup(func() { srv.Close() })
	return s
}

func TestUpDHCPv6(t *testing.T) {
	p := newPair(t)
	if err := (&env{ns: p.server}).writeSysctl("/proc/sys/net/ipv6/conf/default/accept_dad", "0"); err != nil {
		t.Fatal(err)
	}
	p.addVeth(t)
	s := p.serve6(t)

	log, lb := newLog(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var hn []string
	cfg := baseConfig(p, t.TempDir(), &hn)
	cfg.Mode, cfg.Address = ModeStatic, netip.MustParsePrefix("10.99.0.7/24")
	cfg.IPv6, cfg.DHCPv6, cfg.IPv6Timeout = true, true, 8*time.Second
	res, _, err := Up(ctx, log, cfg)
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	if len(res.Addresses) != 2 || res.Addresses[1] != "2001:db8:2::10/128" || res.DHCPv6Server == "" {
		t.Fatalf("result addresses %v server %q, want 2001:db8:2::10/128 from DHCPv6", res.Addresses, res.DHCPv6Server)
	}
	t.Logf("DHCPv6 address after %.0f ms (includes the link-local DAD)", res.Steps.IPv6)
	rc, _ := os.ReadFile(cfg.ResolvConfPath)
	if !strings.Contains(string(rc), "nameserver 2001:db8:2::53\n") {
		t.Errorf("resolv.conf lacks the DHCPv6 DNS server:\n%s", rc)
	}
	got := func() *netlink.Addr {
		l, _ := p.cliNL.LinkByName("eth0")
		addrs, _ := p.cliNL.AddrList(l, netlink.FAMILY_V6)
		for i := range addrs {
			if addrs[i].IP.Equal(v6Addr) {
				return &addrs[i]
			}
		}
		return nil
	}
	a := got()
	if a == nil || a.ValidLft > 6 || a.ValidLft < 5 || a.PreferedLft > 4 {
		t.Fatalf("DHCPv6 address on eth0: %+v, want valid ~6 s, preferred ~4 s", a)
	}
	start := time.Now()
	eventually(t, 5*time.Second, "a DHCPv6 renewal at T1", func() bool { return s.count() >= 2 })
	time.Sleep(time.Until(start.Add(6500 * time.Millisecond)))
	if a := got(); a == nil || a.ValidLft < 2 {
		t.Errorf("after the first valid lifetime the address is %+v, want it renewed", a)
	}
	if lb.find("INFO", "DHCPv6 lease renewed") == nil {
		t.Error("no 'DHCPv6 lease renewed' log")
	}
}

func TestRenewalNAKRediscovers(t *testing.T) {
	p := newPair(t)
	p.addVeth(t)
	s := &fakeServer{lease: 4 * time.Second, t1: time.Second, t2: 3 * time.Second}
	p.serve(t, s)
	log, lb := newLog(t)
	var hn []string
	cfg := baseConfig(p, t.TempDir(), &hn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, h, err := Up(ctx, log, cfg)
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	s.mu.Lock()
	s.nakRenew = true
	s.mu.Unlock()
	var rec map[string]any
	eventually(t, 3*time.Second, "an ERROR log for the NAK", func() bool {
		rec = lb.find("ERROR", "refused to extend the lease")
		return rec != nil
	})
	if rec["server_message"] != "address taken" || rec["interface"] != "eth0" || rec["address"] != "10.99.0.2/24" {
		t.Errorf("NAK log: %v", rec)
	}
	// After a NAK the client goes back to DISCOVER, which the server
	// answers: the lease comes back well before the old one would expire.
	eventually(t, 3*time.Second, "the lease to be regained after the NAK", func() bool {
		return lb.find("INFO", "DHCP lease regained") != nil
	})
	if _, bound := h.Lease(); !bound || p.clientAddr(t) == nil {
		t.Error("no lease after rediscovery")
	}
}
