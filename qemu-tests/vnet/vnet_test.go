package vnet

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/beevik/ntp"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/berth-node/berth/internal/safe"
	"github.com/berth-node/berth/network"
	"github.com/berth-node/berth/qemu-tests/imdsserver"
)

// guest is a stand-in for a QEMU guest that uses the kernel's own network
// stack: a network namespace whose eth0 is a TAP device, its frames
// carried to the switch in QEMU's stream protocol, as QEMU's
// `-netdev stream` carries a guest's.
type guest struct {
	t    testing.TB
	name string
	ns   netns.NsHandle
	mac  net.HardwareAddr
}

func newGuest(t *testing.T, n *Network, name string, mac net.HardwareAddr) *guest {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the network rig's tests make network namespaces and TAP devices and need root (CI runs them as root)")
	}
	g := &guest{t: t, name: name, mac: mac}
	var tapFile *os.File
	err := func() error {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		orig, err := netns.Get()
		if err != nil {
			return fmt.Errorf("netns.Get: %w", err)
		}
		defer orig.Close()
		// No skip: CI runs as root on a kernel with network namespaces and
		// /dev/net/tun, and a rig test that does not run checks nothing.
		ns, err := netns.New()
		if err != nil {
			return fmt.Errorf("making the guest's network namespace (needs root and CONFIG_NET_NS): %w", err)
		}
		g.ns = ns
		defer func() {
			if err := netns.Set(orig); err != nil {
				panic(fmt.Sprintf("returning to the test's netns: %v", err))
			}
		}()
		la := netlink.NewLinkAttrs()
		la.Name = "eth0"
		tap := &netlink.Tuntap{LinkAttrs: la, Mode: netlink.TUNTAP_MODE_TAP, Flags: netlink.TUNTAP_NO_PI | netlink.TUNTAP_ONE_QUEUE, Queues: 1}
		if err := netlink.LinkAdd(tap); err != nil {
			return fmt.Errorf("adding the guest's TAP device (needs /dev/net/tun): %w", err)
		}
		if len(tap.Fds) != 1 {
			return fmt.Errorf("TAP device: %d queues, want 1", len(tap.Fds))
		}
		tapFile = tap.Fds[0]
		link, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetHardwareAddr(link, mac); err != nil {
			return fmt.Errorf("setting eth0's MAC: %w", err)
		}
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(lo)
	}()
	if g.ns != 0 {
		t.Cleanup(func() { g.ns.Close() })
	}
	if err != nil {
		t.Fatal(err)
	}

	// The guest's side of the link: one frame per read of the TAP device,
	// length-prefixed on the stream, as QEMU writes them.
	sw, wire := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	attached := make(chan error, 1)
	spawn(t, "switch link", func() { attached <- n.Attach(ctx, sw) })
	spawn(t, "TAP to switch", func() {
		buf := make([]byte, 4+65536)
		for {
			k, err := tapFile.Read(buf[4:])
			if err != nil {
				return
			}
			binary.BigEndian.PutUint32(buf, uint32(k))
			if _, err := wire.Write(buf[:4+k]); err != nil {
				return
			}
		}
	})
	spawn(t, "switch to TAP", func() {
		r := bufio.NewReader(wire)
		var hdr [4]byte
		buf := make([]byte, 65536)
		for {
			if _, err := io.ReadFull(r, hdr[:]); err != nil {
				return
			}
			k := binary.BigEndian.Uint32(hdr[:])
			if k > uint32(len(buf)) {
				return
			}
			if _, err := io.ReadFull(r, buf[:k]); err != nil {
				return
			}
			// A TAP device that is down refuses frames (EIO); QEMU drops
			// a frame its guest's NIC cannot take and reads on, and so must
			// this side, or the switch, which writes to every link in
			// turn, would wait on this one.
			_, _ = tapFile.Write(buf[:k])
		}
	})
	t.Cleanup(func() {
		cancel()
		wire.Close()
		tapFile.Close()
		select {
		case <-attached:
		case <-time.After(5 * time.Second):
			t.Errorf("guest %s: the switch did not let go of its link within 5 s", name)
		}
	})
	return g
}

// do runs fn on a thread inside the guest's namespace: the sockets it
// makes stay there.
func (g *guest) do(fn func()) {
	done := make(chan struct{})
	spawn(g.t, "in "+g.name+"'s namespace", func() {
		defer close(done)
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			panic(err)
		}
		defer orig.Close()
		if err := netns.Set(g.ns); err != nil {
			panic(err)
		}
		fn()
		if err := netns.Set(orig); err == nil {
			runtime.UnlockOSThread()
		}
	})
	<-done
}

func (g *guest) dial(ctx context.Context, network, addr string) (c net.Conn, err error) {
	g.do(func() { c, err = (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, network, addr) })
	return c, err
}

func (g *guest) listen(addr string) (ln net.Listener, err error) {
	g.do(func() { ln, err = net.Listen("tcp4", addr) })
	return ln, err
}

// up takes the guest's address by DHCP with berth's own network code, as
// the node does at boot.
func (g *guest) up(t *testing.T) *network.Result {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	res, h, err := network.Up(ctx, slog.New(slog.DiscardHandler), network.Config{
		Mode: network.ModeDHCP, Interface: "eth0", NetNS: g.ns,
		Timeout: 60 * time.Second, ResolvConfPath: resolv,
	})
	if err != nil {
		t.Fatalf("guest %s: network.Up: %v", g.name, err)
	}
	if h == nil {
		t.Fatalf("guest %s: network.Up gave no DHCP handle", g.name)
	}
	b, err := os.ReadFile(resolv)
	if err != nil {
		t.Fatal(err)
	}
	res.ResolvConf = string(b)
	return res
}

// imds asks the instance metadata at 169.254.169.254 for path, the IMDSv2
// way (a token first).
func (g *guest) imds(t *testing.T, path string) string {
	t.Helper()
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DialContext: g.dial}}
	req, _ := http.NewRequest(http.MethodPut, "http://169.254.169.254/latest/api/token", nil)
	req.Header.Set("X-aws-ec2-metadata-token-ttl-seconds", "60")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("guest %s: IMDS token: %v", g.name, err)
	}
	tok, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("guest %s: IMDS token: %s: %s", g.name, resp.Status, tok)
	}
	req, _ = http.NewRequest(http.MethodGet, "http://169.254.169.254/latest/"+path, nil)
	req.Header.Set("X-aws-ec2-metadata-token", string(tok))
	resp, err = c.Do(req)
	if err != nil {
		t.Fatalf("guest %s: IMDS %s: %v", g.name, path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("guest %s: IMDS %s: %s: %s", g.name, path, resp.Status, body)
	}
	return string(body)
}

func mac(last byte) net.HardwareAddr { return net.HardwareAddr{0x52, 0x54, 0x00, 0xb3, 0x27, last} }

func imdsFor(t *testing.T, id, ip string) http.Handler {
	t.Helper()
	in := imdsserver.DefaultInstance()
	in.InstanceID = id
	in.LocalIPv4 = ip
	in.LocalHostname = "ip-" + strings.ReplaceAll(ip, ".", "-") + ".us-west-2.compute.internal"
	s, err := imdsserver.New(imdsserver.Config{Instance: in, UserData: []byte("user data of " + id)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// answer serves ln until it closes: each connection's first line is
// answered with "NAME from REMOTE: LINE", so the client sees who answered
// and from where its connection arrived.
func answer(t testing.TB, ln net.Listener, name string) {
	spawn(t, name+" accepting", func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			spawn(t, name+" answering", func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				fmt.Fprintf(c, "%s from %s: %s", name, c.RemoteAddr(), line)
			})
		}
	})
}

// spawn starts fn as every goroutine in the project starts, through
// safe.Go; a panic fails the test by name.
func spawn(t testing.TB, name string, fn func()) {
	safe.Go(slog.Default(), name, fn, func(p *safe.Panic) { t.Errorf("goroutine %s: %v", name, p) })
}

// echoOnLoopback is a host service on the loopback.
func echoOnLoopback(t *testing.T) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	answer(t, ln, "host")
	return netip.MustParseAddrPort(ln.Addr().String())
}

func roundTrip(c net.Conn, line string) (string, error) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

// Two guests on one network, each taking its lease with berth's DHCP
// client: each gets its own address, the gateway, the DNS; each reads its
// own instance's metadata at 169.254.169.254; both get the time from
// 169.254.169.123; they reach each other directly, and a host service at
// its virtual address; anything else gets a reset and is recorded.
func TestTwoGuests(t *testing.T) {
	svc := echoOnLoopback(t)
	n, err := New(Config{
		Nodes: []Node{
			{Name: "node-a", MAC: mac(0x0a), IP: netip.MustParseAddr("192.168.127.10"), IMDS: imdsFor(t, "i-0aaaaaaaaaaaaaaa1", "192.168.127.10")},
			{Name: "node-b", MAC: mac(0x0b), IP: netip.MustParseAddr("192.168.127.11"), IMDS: imdsFor(t, "i-0bbbbbbbbbbbbbbb2", "192.168.127.11")},
		},
		Services:     []Service{{Name: "echo", Virtual: netip.MustParseAddrPort("192.168.127.254:7000"), Host: svc}},
		DNS:          map[string]netip.Addr{"registry.berth.test": netip.MustParseAddr("192.168.127.254")},
		SearchDomain: "us-west-2.compute.internal",
		TimeOffset:   -42 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	a := newGuest(t, n, "node-a", mac(0x0a))
	b := newGuest(t, n, "node-b", mac(0x0b))

	for _, c := range []struct {
		g      *guest
		ip, id string
	}{{a, "192.168.127.10/24", "i-0aaaaaaaaaaaaaaa1"}, {b, "192.168.127.11/24", "i-0bbbbbbbbbbbbbbb2"}} {
		res := c.g.up(t)
		if len(res.Addresses) != 1 || res.Addresses[0] != c.ip {
			t.Errorf("%s: DHCP addresses %v, want [%s] (the static lease for its MAC)", c.g.name, res.Addresses, c.ip)
		}
		if res.Gateway != "192.168.127.1" || res.DHCPServer != "192.168.127.1" {
			t.Errorf("%s: gateway %q, DHCP server %q; want 192.168.127.1 for both", c.g.name, res.Gateway, res.DHCPServer)
		}
		if res.MTU != 1500 {
			t.Errorf("%s: MTU %d, want 1500", c.g.name, res.MTU)
		}
		if !strings.Contains(res.ResolvConf, "nameserver 192.168.127.1") || !strings.Contains(res.ResolvConf, "search us-west-2.compute.internal") {
			t.Errorf("%s: resolv.conf %q: want the gateway as nameserver and the region's search domain", c.g.name, res.ResolvConf)
		}
		if got := c.g.imds(t, "meta-data/instance-id"); got != c.id {
			t.Errorf("%s: IMDS instance-id %q, want %q: 169.254.169.254 must answer for the asking node", c.g.name, got, c.id)
		}
		if got := c.g.imds(t, "user-data"); got != "user data of "+c.id {
			t.Errorf("%s: IMDS user-data %q", c.g.name, got)
		}
	}

	t.Run("time", func(t *testing.T) {
		var resp *ntp.Response
		var err error
		a.do(func() {
			resp, err = ntp.QueryWithOptions(TimeSyncAddr.Addr().String(), ntp.QueryOptions{Timeout: 10 * time.Second})
		})
		if err != nil {
			t.Fatalf("NTP from 169.254.169.123: %v", err)
		}
		if resp.Stratum != 3 {
			t.Errorf("stratum %d, want 3", resp.Stratum)
		}
		if off := resp.ClockOffset; off > -40*time.Second || off < -44*time.Second {
			t.Errorf("clock offset %v, want about -42s (the network's TimeOffset)", off)
		}
	})

	t.Run("dns", func(t *testing.T) {
		r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return a.dial(ctx, network, "192.168.127.1:53")
		}}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		ips, err := r.LookupNetIP(ctx, "ip4", "registry.berth.test")
		if err != nil || len(ips) != 1 || ips[0] != netip.MustParseAddr("192.168.127.254") {
			t.Errorf("registry.berth.test: %v, %v; want [192.168.127.254]", ips, err)
		}
		_, err = r.LookupNetIP(ctx, "ip4", "example.com")
		var dnsErr *net.DNSError
		if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
			t.Errorf("example.com: %v; want not found (the network resolves only its own names)", err)
		}
	})

	t.Run("guest to guest", func(t *testing.T) {
		ln, err := b.listen("192.168.127.11:8080")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		answer(t, ln, "node-b")
		c, err := a.dial(context.Background(), "tcp4", "192.168.127.11:8080")
		if err != nil {
			t.Fatal(err)
		}
		got, err := roundTrip(c, "hi")
		if err != nil || got != "node-b from 192.168.127.10:"+strings.Split(c.LocalAddr().String(), ":")[1]+": hi\n" {
			t.Errorf("node-a to node-b: %q, %v; want node-b to see node-a's own address", got, err)
		}
	})

	t.Run("host to guest", func(t *testing.T) {
		ln, err := a.listen("0.0.0.0:10250")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		answer(t, ln, "kubelet")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c, err := n.DialContext(ctx, "tcp", "192.168.127.10:10250")
		if err != nil {
			t.Fatal(err)
		}
		// The node sees the gateway's address, not the host's.
		if got, err := roundTrip(c, "logs"); err != nil || !strings.HasPrefix(got, "kubelet from 192.168.127.1:") || !strings.HasSuffix(got, ": logs\n") {
			t.Errorf("the host through the gateway to node-a: %q, %v; want the kubelet stand-in to see the gateway 192.168.127.1", got, err)
		}
		if _, err := n.DialContext(ctx, "tcp", "10.1.2.3:10250"); err == nil {
			t.Error("DialContext to an address off the subnet succeeded")
		}
	})

	t.Run("service", func(t *testing.T) {
		c, err := b.dial(context.Background(), "tcp4", "192.168.127.254:7000")
		if err != nil {
			t.Fatal(err)
		}
		if got, err := roundTrip(c, "ping"); err != nil || !strings.HasPrefix(got, "host from 127.0.0.1:") || !strings.HasSuffix(got, ": ping\n") {
			t.Errorf("node-b to the echo service: %q, %v; want the host service on the loopback to answer", got, err)
		}
	})

	t.Run("outside refused", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for _, to := range []string{"203.0.113.7:443", "192.168.127.254:7001", "169.254.169.254:8080", "127.0.0.1:" + fmt.Sprint(svc.Port())} {
			start := time.Now()
			c, err := a.dial(ctx, "tcp4", to)
			if err == nil {
				c.Close()
				t.Errorf("node-a reached %s: the network must forward only the rig's services", to)
				continue
			}
			if !errors.Is(err, syscall.ECONNREFUSED) && !strings.HasPrefix(to, "127.") {
				t.Errorf("node-a to %s: %v after %v; want a reset (connection refused), not silence", to, err, time.Since(start).Round(time.Millisecond))
			}
		}
		// A datagram to the outside: dropped, and recorded.
		var werr error
		a.do(func() {
			c, err := net.Dial("udp4", "198.51.100.9:53")
			if err != nil {
				werr = err
				return
			}
			defer c.Close()
			_, werr = c.Write([]byte("hello"))
		})
		if werr != nil {
			t.Fatal(werr)
		}
		want := []string{"tcp 192.168.127.10 -> 203.0.113.7:443", "tcp 192.168.127.10 -> 192.168.127.254:7001", "tcp 192.168.127.10 -> 169.254.169.254:8080", "udp 192.168.127.10 -> 198.51.100.9:53"}
		deadline := time.Now().Add(10 * time.Second)
		for {
			refused, count := n.Refused()
			var got []string
			for _, r := range refused {
				got = append(got, r.String())
			}
			missing := ""
			for _, w := range want {
				if !strings.Contains(strings.Join(got, "\n"), w) {
					missing = w
					break
				}
			}
			if missing == "" {
				if count < len(want) {
					t.Errorf("refusal count %d < %d distinct refusals", count, len(want))
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("refusals %q (count %d): missing %q", got, count, missing)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// A MAC the network does not know still gets an address, and no instance
// metadata: 169.254.169.254 says there is no instance there.
func TestUnknownGuest(t *testing.T) {
	n, err := New(Config{Nodes: []Node{{Name: "node-a", MAC: mac(0x0a), IP: netip.MustParseAddr("192.168.127.2"), IMDS: imdsFor(t, "i-a", "192.168.127.2")}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	g := newGuest(t, n, "stranger", mac(0x99))
	res := g.up(t)
	if len(res.Addresses) != 1 || res.Addresses[0] == "192.168.127.2/24" || res.Addresses[0] == "192.168.127.1/24" {
		t.Fatalf("stranger's addresses %v: want one free address, not node-a's or the gateway's", res.Addresses)
	}
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DialContext: g.dial}}
	resp, err := c.Get("http://169.254.169.254/latest/meta-data/instance-id")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "no instance at") {
		t.Errorf("IMDS for an unknown guest: %s %q; want 404 naming no instance", resp.Status, body)
	}
	if m := n.IMDSMisses(); len(m) != 1 || !strings.HasSuffix(m[0], " GET /latest/meta-data/instance-id") {
		t.Errorf("IMDSMisses = %q: want the stranger's one request", m)
	}
}

// A config that would leak to the outside, or collide, is refused with
// what is wrong and where.
func TestConfigRefused(t *testing.T) {
	host := netip.MustParseAddrPort("127.0.0.1:6443")
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"service off loopback", Config{Services: []Service{{Name: "api", Virtual: netip.MustParseAddrPort("192.168.127.254:6443"), Host: netip.MustParseAddrPort("10.0.0.5:6443")}}},
			`service "api": host address 10.0.0.5:6443 is not on the loopback`},
		{"service off subnet", Config{Services: []Service{{Name: "api", Virtual: netip.MustParseAddrPort("10.9.9.9:6443"), Host: host}}},
			`service "api": virtual address 10.9.9.9 is not a host address of the subnet 192.168.127.0/24`},
		{"service port twice", Config{Services: []Service{{Name: "a", Virtual: netip.MustParseAddrPort("192.168.127.254:6443"), Host: host}, {Name: "b", Virtual: netip.MustParseAddrPort("192.168.127.254:6443"), Host: host}}},
			`service "b": 192.168.127.254:6443 is already service "a"'s`},
		{"service on the DNS port", Config{Services: []Service{{Name: "dns", Virtual: netip.MustParseAddrPort("192.168.127.1:53"), Host: host}}},
			`service "dns": 192.168.127.1:53 is the gateway's DNS`},
		{"node on the gateway", Config{Nodes: []Node{{Name: "a", MAC: mac(1), IP: netip.MustParseAddr("192.168.127.1")}}},
			`node "a": address 192.168.127.1 is not a free host address`},
		{"node on broadcast", Config{Nodes: []Node{{Name: "a", MAC: mac(1), IP: netip.MustParseAddr("192.168.127.255")}}},
			`node "a": address 192.168.127.255 is not a free host address`},
		{"two nodes one IP", Config{Nodes: []Node{{Name: "a", MAC: mac(1), IP: netip.MustParseAddr("192.168.127.5")}, {Name: "b", MAC: mac(2), IP: netip.MustParseAddr("192.168.127.5")}}},
			`node "b": address 192.168.127.5 is already node "a"'s`},
		{"two nodes one MAC", Config{Nodes: []Node{{Name: "a", MAC: mac(1), IP: netip.MustParseAddr("192.168.127.5")}, {Name: "b", MAC: mac(1), IP: netip.MustParseAddr("192.168.127.6")}}},
			`node "b": MAC 52:54:00:b3:27:01 is already node "a"'s`},
		{"service on a node", Config{Nodes: []Node{{Name: "a", MAC: mac(1), IP: netip.MustParseAddr("192.168.127.5")}}, Services: []Service{{Name: "api", Virtual: netip.MustParseAddrPort("192.168.127.5:6443"), Host: host}}},
			`service "api": virtual address 192.168.127.5 is node "a"'s`},
		{"bad MAC", Config{Nodes: []Node{{Name: "a", IP: netip.MustParseAddr("192.168.127.5")}}},
			`node "a": MAC "" is not an Ethernet address`},
		{"IPv6 subnet", Config{Subnet: netip.MustParsePrefix("fd00::/64")}, `subnet fd00::/64: want an IPv4 subnet`},
		{"bare DNS name", Config{DNS: map[string]netip.Addr{"registry": netip.MustParseAddr("192.168.127.254")}}, `DNS name "registry": want a name with a domain`},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, err := New(c.cfg)
			if err == nil {
				n.Close()
				t.Fatalf("New accepted it; want an error with %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q; want it to contain %q", err, c.want)
			}
		})
	}
}

// The DNS zones: every name in its zone, the longest zone first (the
// server takes the first zone whose suffix matches).
func TestZones(t *testing.T) {
	n := &Network{cfg: Config{DNS: map[string]netip.Addr{
		"registry.berth.test":          netip.MustParseAddr("192.168.127.254"),
		"api.berth.test.":              netip.MustParseAddr("192.168.127.253"),
		"ecr.us-west-2.aws.berth.test": netip.MustParseAddr("192.168.127.252"),
	}}}
	var got []string
	for _, z := range n.zones() {
		for _, r := range z.Records {
			got = append(got, r.Name+" "+z.Name+" "+r.IP.String())
		}
	}
	want := []string{"ecr us-west-2.aws.berth.test. 192.168.127.252", "api berth.test. 192.168.127.253", "registry berth.test. 192.168.127.254"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("zones:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// pod is a network namespace behind a guest, as a pod is behind its node:
// a veth pair, the node's end (cni0) holding the first address of the
// node's pod CIDR, the pod's end its own address with its default route
// via the node; the node forwards between its eth0 and cni0 as berth's
// net.ipv4.ip_forward=1 makes a node do.
func (g *guest) pod(t *testing.T, podCIDR netip.Prefix, ip netip.Addr) *guest {
	t.Helper()
	p := &guest{t: t, name: g.name + "'s pod " + ip.String()}
	var err error
	func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		orig, gerr := netns.Get()
		if gerr != nil {
			err = gerr
			return
		}
		defer orig.Close()
		p.ns, err = netns.New()
		if serr := netns.Set(orig); serr != nil {
			panic(fmt.Sprintf("returning to the test's netns: %v", serr))
		}
	}()
	if p.ns != 0 {
		t.Cleanup(func() { p.ns.Close() })
	}
	if err != nil {
		t.Fatalf("%s: its network namespace: %v", p.name, err)
	}
	hostSide := netip.PrefixFrom(podCIDR.Addr().Next(), podCIDR.Bits())
	g.do(func() {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "cni0"}, PeerName: "eth0", PeerNamespace: netlink.NsFd(p.ns)}
		if err = netlink.LinkAdd(veth); err != nil {
			err = fmt.Errorf("adding the veth pair: %w", err)
			return
		}
		if err = setUp("cni0", hostSide, netip.Addr{}); err != nil {
			return
		}
		err = os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1\n"), 0o644)
	})
	if err != nil {
		t.Fatalf("%s: the node's side: %v", p.name, err)
	}
	p.do(func() {
		if err = setUp("lo", netip.Prefix{}, netip.Addr{}); err == nil {
			err = setUp("eth0", netip.PrefixFrom(ip, podCIDR.Bits()), hostSide.Addr())
		}
	})
	if err != nil {
		t.Fatalf("%s: the pod's side: %v", p.name, err)
	}
	return p
}

// setUp brings the link up in the calling thread's namespace, with addr
// when valid and a default route via gw when valid.
func setUp(name string, addr netip.Prefix, gw netip.Addr) error {
	link, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if addr.IsValid() {
		a := &netlink.Addr{IPNet: &net.IPNet{IP: addr.Addr().AsSlice(), Mask: net.CIDRMask(addr.Bits(), 32)}}
		if err := netlink.AddrAdd(link, a); err != nil {
			return fmt.Errorf("%s: adding %s: %w", name, addr, err)
		}
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("%s: up: %w", name, err)
	}
	if gw.IsValid() {
		if err := netlink.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Gw: gw.AsSlice()}); err != nil {
			return fmt.Errorf("%s: default route via %s: %w", name, gw, err)
		}
	}
	return nil
}

// The control plane reaches a pod by its pod IP as a VPC's route table
// makes it reachable: the gateway routes each node's pod CIDR via that
// node's address, the node forwards to its pod, and the pod's answer comes
// back through the node's default route. Each node's pods are reached
// through that node, not the other; an address behind no route is refused
// by name.
func TestRoutedPods(t *testing.T) {
	n, err := New(Config{Nodes: []Node{
		{Name: "node-a", MAC: mac(0x0a), IP: netip.MustParseAddr("192.168.127.10")},
		{Name: "node-b", MAC: mac(0x0b), IP: netip.MustParseAddr("192.168.127.11")},
		{Name: "node-c", MAC: mac(0x0c), IP: netip.MustParseAddr("192.168.127.12")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	a := newGuest(t, n, "node-a", mac(0x0a))
	b := newGuest(t, n, "node-b", mac(0x0b))
	a.up(t)
	b.up(t)
	pods := []struct {
		node   *guest
		via    string
		cidr   string
		ip     string
		answer string
	}{
		{a, "192.168.127.10", "10.244.0.0/24", "10.244.0.5", "pod-a"},
		{b, "192.168.127.11", "10.244.1.0/24", "10.244.1.7", "pod-b"},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, p := range pods {
		ns := p.node.pod(t, netip.MustParsePrefix(p.cidr), netip.MustParseAddr(p.ip))
		ln, err := ns.listen(p.ip + ":8080")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		answer(t, ln, p.answer)
		// Before the route: no way there, said by name.
		if c, err := n.DialContext(ctx, "tcp", p.ip+":8080"); err == nil {
			c.Close()
			t.Errorf("dialed %s before any route to it", p.ip)
		} else if !strings.Contains(err.Error(), "dialing "+p.ip+":8080: not on the subnet 192.168.127.0/24 nor behind a route") {
			t.Errorf("dialing %s before its route: %v; want it named as behind no route", p.ip, err)
		}
		if err := n.AddRoute(netip.MustParsePrefix(p.cidr), netip.MustParseAddr(p.via)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pods {
		c, err := n.DialContext(ctx, "tcp", p.ip+":8080")
		if err != nil {
			t.Fatalf("dialing %s through %s: %v", p.ip, p.via, err)
		}
		// The pod sees the gateway's own address (no NAT on the way) and
		// its answer reaches it: the return path works.
		got, err := roundTrip(c, "hi")
		if err != nil || !strings.HasPrefix(got, p.answer+" from 192.168.127.1:") || !strings.HasSuffix(got, ": hi\n") {
			t.Errorf("the gateway to %s via %s: %q, %v; want %s to answer the gateway 192.168.127.1", p.ip, p.via, got, err, p.answer)
		}
	}
	if got := n.Routes(); len(got) != 2 || got[netip.MustParsePrefix("10.244.1.0/24")] != netip.MustParseAddr("192.168.127.11") {
		t.Errorf("Routes() = %v; want both pod CIDRs, 10.244.1.0/24 via 192.168.127.11", got)
	}
	if c, err := n.DialContext(ctx, "tcp", "10.245.0.5:8080"); err == nil {
		c.Close()
		t.Error("dialed 10.245.0.5, which no route covers")
	} else if !strings.Contains(err.Error(), "10.245.0.5:8080: not on the subnet 192.168.127.0/24 nor behind a route") || !strings.Contains(err.Error(), "10.244.0.0/24:192.168.127.10") {
		t.Errorf("dialing an unrouted address: %v; want it named, with the routes there are", err)
	}

	// node-b is gone and its pod CIDR goes to its replacement, node-c,
	// at another address: node-b's route is removed, the prefix is
	// unrouted, and the new route, refused while the old stood, sends the
	// gateway to node-c's pod, not to node-b.
	b1 := netip.MustParsePrefix("10.244.1.0/24")
	if err := n.RemoveRoute(b1, netip.MustParseAddr("192.168.127.12")); err == nil || !strings.Contains(err.Error(), "10.244.1.0/24 is routed via 192.168.127.11") {
		t.Errorf("removing node-b's route as node-c's: %v; want it refused, naming node-b's next hop", err)
	}
	if err := n.AddRoute(b1, netip.MustParseAddr("192.168.127.12")); err == nil {
		t.Error("routing node-b's pod CIDR via node-c while node-b's route stands")
	}
	for range 2 { // the second is a no-op
		if err := n.RemoveRoute(b1, netip.MustParseAddr("192.168.127.11")); err != nil {
			t.Fatal(err)
		}
	}
	if c, err := n.DialContext(ctx, "tcp", "10.244.1.7:8080"); err == nil {
		c.Close()
		t.Error("dialed node-b's pod after its route was removed")
	} else if !strings.Contains(err.Error(), "not on the subnet 192.168.127.0/24 nor behind a route") {
		t.Errorf("dialing node-b's pod after its route was removed: %v; want it named as behind no route", err)
	}
	c := newGuest(t, n, "node-c", mac(0x0c))
	c.up(t)
	ns := c.pod(t, b1, netip.MustParseAddr("10.244.1.9"))
	ln, err := ns.listen("10.244.1.9:8080")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	answer(t, ln, "pod-c")
	if err := n.AddRoute(b1, netip.MustParseAddr("192.168.127.12")); err != nil {
		t.Fatal(err)
	}
	conn, err := n.DialContext(ctx, "tcp", "10.244.1.9:8080")
	if err != nil {
		t.Fatalf("dialing node-c's pod: %v", err)
	}
	if got, err := roundTrip(conn, "hi"); err != nil || !strings.HasPrefix(got, "pod-c from 192.168.127.1:") {
		t.Errorf("the gateway to 10.244.1.9, now via node-c: %q, %v; want pod-c to answer", got, err)
	}
}

// AddRoute refuses a route that would shadow the subnet or the gateway's
// own services, send traffic to something that is no node, or contradict
// a route already there, and says which; the same route again is
// accepted, so a controller may repeat itself.
func TestAddRouteRefused(t *testing.T) {
	host := netip.MustParseAddrPort("127.0.0.1:6443")
	n, err := New(Config{
		Nodes:    []Node{{Name: "node-a", MAC: mac(0x0a), IP: netip.MustParseAddr("192.168.127.10")}},
		Services: []Service{{Name: "api", Virtual: netip.MustParseAddrPort("192.168.127.254:6443"), Host: host}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	pfx, ip := netip.MustParsePrefix, netip.MustParseAddr
	if err := n.AddRoute(pfx("10.244.0.0/24"), ip("192.168.127.10")); err != nil {
		t.Fatal(err)
	}
	if err := n.AddRoute(pfx("10.244.0.0/24"), ip("192.168.127.10")); err != nil {
		t.Errorf("the same route again: %v; want it accepted", err)
	}
	for _, c := range []struct {
		name   string
		prefix netip.Prefix
		via    netip.Addr
		want   string
	}{
		{"via off the subnet", pfx("10.244.1.0/24"), ip("10.0.0.5"), "route 10.244.1.0/24 via 10.0.0.5: the next hop is not a host address of the subnet 192.168.127.0/24"},
		{"via the broadcast", pfx("10.244.1.0/24"), ip("192.168.127.255"), "the next hop is not a host address of the subnet"},
		{"via the gateway", pfx("10.244.1.0/24"), ip("192.168.127.1"), "the next hop is the gateway itself"},
		{"via a service", pfx("10.244.1.0/24"), ip("192.168.127.254"), `the next hop is service "api"'s virtual address`},
		{"overlaps the subnet", pfx("192.168.0.0/16"), ip("192.168.127.10"), "overlaps the subnet 192.168.127.0/24"},
		{"default route", pfx("0.0.0.0/0"), ip("192.168.127.10"), "overlaps the subnet 192.168.127.0/24"},
		{"link-local", pfx("169.254.169.0/24"), ip("192.168.127.10"), "overlaps 169.254.0.0/16, the gateway's own link-local services"},
		{"loopback", pfx("127.0.0.0/16"), ip("192.168.127.10"), "overlaps 127.0.0.0/8, which no node holds"},
		{"another via", pfx("10.244.0.0/24"), ip("192.168.127.11"), "route 10.244.0.0/24 via 192.168.127.11: 10.244.0.0/24 is already routed via 192.168.127.10"},
		{"overlaps a route", pfx("10.244.0.0/16"), ip("192.168.127.11"), "overlaps the route 10.244.0.0/24 via 192.168.127.10"},
		{"host bits", pfx("10.244.1.5/24"), ip("192.168.127.10"), "host bits set (the prefix is 10.244.1.0/24)"},
		{"IPv6", pfx("fd00::/64"), ip("192.168.127.10"), "want an IPv4 prefix"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := n.AddRoute(c.prefix, c.via)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("AddRoute(%s, %s) = %v; want an error with %q", c.prefix, c.via, err, c.want)
			}
		})
	}
	if got := n.Routes(); len(got) != 1 || got[pfx("10.244.0.0/24")] != ip("192.168.127.10") {
		t.Errorf("Routes() after the refusals = %v; want only 10.244.0.0/24 via 192.168.127.10", got)
	}
}

// Concurrent AddRoute calls, as a route controller's and a test's may be:
// for one prefix exactly one next hop wins and every other is refused by
// name; distinct prefixes all land.
func TestAddRouteConcurrent(t *testing.T) {
	n, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	const k = 16
	errs := make(chan error, 2*k)
	for i := range k {
		spawn(t, "AddRoute", func() {
			errs <- n.AddRoute(netip.MustParsePrefix("10.244.200.0/24"), netip.AddrFrom4([4]byte{192, 168, 127, byte(10 + i)}))
		})
		spawn(t, "AddRoute", func() {
			errs <- n.AddRoute(netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(i), 0}), 24), netip.AddrFrom4([4]byte{192, 168, 127, byte(10 + i)}))
		})
	}
	won := 0
	for range 2 * k {
		err := <-errs
		switch {
		case err == nil:
			won++
		case !strings.Contains(err.Error(), "10.244.200.0/24 is already routed via 192.168.127."):
			t.Errorf("a losing AddRoute: %v; want it to name the route that won", err)
		}
	}
	if won != k+1 {
		t.Errorf("%d AddRoute calls succeeded; want %d (every distinct prefix, one next hop for the shared one)", won, k+1)
	}
	if got := len(n.Routes()); got != k+1 {
		t.Errorf("%d routes; want %d", got, k+1)
	}
}
