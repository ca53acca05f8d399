// Package vnet is the virtual network a cluster of QEMU nodes shares on
// one machine, in user space: an Ethernet switch the guests join over
// QEMU's stream protocol, and a gateway (a gVisor network stack, from
// github.com/containers/gvisor-tap-vsock) that gives them what an EC2
// subnet gives an instance:
//   - an address by DHCP, fixed per MAC, a gateway and a DNS server;
//   - 169.254.169.254:80 answered by that node's own instance metadata
//     (EC2 answers per instance; the gateway tells the nodes apart by the
//     source address, which a NAT to the host would lose);
//   - 169.254.169.123:123 answered as the Amazon Time Sync Service does;
//   - the host services the rig names (control plane, registry, AWS
//     stand-ins), each at a fixed virtual address on the subnet.
//
// Nothing a guest sends leaves the machine: the gateway forwards only to
// the named services, which must be on the host's loopback, and answers
// any other connection with a reset (each one recorded, see Refused). DNS
// answers only the rig's own names. Host-side code reaches a guest only
// through the gateway's stack (DialContext), never by routing the host's
// traffic to the guests' addresses. Guest-to-guest frames go through the
// switch as on a real L2 segment.
//
// The gateway's route table holds, besides the subnet, the routes a
// cloud's route controller makes (AddRoute: a node's pod CIDR via that
// node's address, as a VPC route table holds them), so that DialContext
// reaches a pod by its pod IP through the node that hosts it.
//
// It is test code: nothing that ships imports it.
package vnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/containers/gvisor-tap-vsock/pkg/services/dhcp"
	"github.com/containers/gvisor-tap-vsock/pkg/services/dns"
	"github.com/containers/gvisor-tap-vsock/pkg/tap"
	"github.com/containers/gvisor-tap-vsock/pkg/types"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/icmp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"

	"github.com/berth-node/berth/internal/safe"
	"github.com/berth-node/berth/network/timesync/ntptest"
)

// The link-local addresses EC2 serves on every subnet.
var (
	IMDSAddr     = netip.MustParseAddrPort("169.254.169.254:80")
	TimeSyncAddr = netip.MustParseAddrPort("169.254.169.123:123")
)

// DefaultSubnet is the nodes' subnet when Config.Subnet is unset; its
// first address is the gateway.
var DefaultSubnet = netip.MustParsePrefix("192.168.127.0/24")

// gatewayMAC is the gateway's MAC address, locally administered.
const gatewayMAC = "02:b3:27:00:00:01"

// mtu is an EC2 subnet's default outside jumbo frames.
const mtu = 1500

// maxRefusals bounds the refusals kept for Refused; the count goes on.
const maxRefusals = 256

// Config describes the network.
type Config struct {
	// Subnet is the nodes' subnet (DefaultSubnet when unset); the gateway,
	// DHCP and DNS server is its first address.
	Subnet netip.Prefix
	// Nodes are the guests the network knows: each gets its IP by DHCP
	// for its MAC, and its own IMDS. A MAC not listed gets a free address
	// and no IMDS.
	Nodes []Node
	// Services are the host services guests may reach.
	Services []Service
	// DNS are the names the gateway's DNS answers (A records), e.g.
	// "registry.berth.test"; any other name is answered NXDOMAIN.
	DNS map[string]netip.Addr
	// SearchDomain is given by DHCP, as EC2 gives its region's
	// "<region>.compute.internal"; empty gives none.
	SearchDomain string
	// TimeOffset is added to the host's clock by the time service.
	TimeOffset time.Duration
	Log        *slog.Logger
}

// Node is one guest.
type Node struct {
	Name string
	MAC  net.HardwareAddr
	IP   netip.Addr
	// IMDS answers the node's requests to 169.254.169.254 (an
	// imdsserver.Server); nil answers 404 as a network without IMDS would
	// not, so that a test sees the mistake.
	IMDS http.Handler
}

// Service is a host service the guests reach at Virtual (an address on
// the subnet that no node has) and the gateway forwards to Host.
type Service struct {
	Name    string
	Virtual netip.AddrPort
	// Host is where the gateway connects: an address on the host's
	// loopback, nothing else.
	Host netip.AddrPort
}

// Refusal is a guest's attempt to reach something the network does not
// forward.
type Refusal struct {
	From  netip.Addr
	To    netip.AddrPort
	Proto string // "tcp" or "udp"
	At    time.Time
}

func (r Refusal) String() string {
	return fmt.Sprintf("%s %s -> %s", r.Proto, r.From, r.To)
}

// Network is a running network.
type Network struct {
	cfg     Config
	log     *slog.Logger
	gateway netip.Addr
	sw      *tap.Switch
	stack   *stack.Stack
	byIP    map[netip.Addr]*Node

	mu       sync.Mutex
	routes   map[netip.Prefix]netip.Addr // AddRoute's, by destination
	refusals []Refusal
	refused  int
	// imdsMisses are the requests to 169.254.169.254 from guests with no
	// IMDS (machines off EC2 must send none), bounded as refusals are.
	imdsMisses []string
	closers    []io.Closer
	closed     bool
	listeners  []net.Listener
	conns      map[net.Conn]struct{}
	wg         sync.WaitGroup
}

// New starts the network's gateway: DHCP, DNS, IMDS, time and the
// services' forwarders. Close stops it.
func New(cfg Config) (_ *Network, err error) {
	if !cfg.Subnet.IsValid() {
		cfg.Subnet = DefaultSubnet
	}
	if !cfg.Subnet.Addr().Is4() || cfg.Subnet.Bits() > 30 {
		return nil, fmt.Errorf("vnet: subnet %s: want an IPv4 subnet of /30 or wider", cfg.Subnet)
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	cfg.Subnet = cfg.Subnet.Masked()
	n := &Network{
		cfg:     cfg,
		log:     cfg.Log,
		gateway: cfg.Subnet.Addr().Next(),
		byIP:    map[netip.Addr]*Node{},
		routes:  map[netip.Prefix]netip.Addr{},
		conns:   map[net.Conn]struct{}{},
	}
	if err := n.check(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()

	// ARP answers for the services' virtual addresses; the link-local ones
	// are reached through the gateway, as on EC2.
	var virtual []string
	for _, s := range cfg.Services {
		virtual = append(virtual, s.Virtual.Addr().String())
	}
	link, err := tap.NewLinkEndpoint(false, mtu, gatewayMAC, n.gateway.String(), virtual)
	if err != nil {
		return nil, fmt.Errorf("vnet: gateway link: %w", err)
	}
	n.sw = tap.NewSwitch(false)
	link.Connect(n.sw)
	n.sw.Connect(link)

	if err := n.newStack(link); err != nil {
		return nil, err
	}
	if err := n.startDHCP(); err != nil {
		return nil, err
	}
	if err := n.startDNS(); err != nil {
		return nil, err
	}
	if err := n.startIMDS(); err != nil {
		return nil, err
	}
	if err := n.startTime(); err != nil {
		return nil, err
	}
	for _, s := range cfg.Services {
		if err := n.startService(s); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// check refuses a config that would leak, collide or confuse.
func (n *Network) check() error {
	host := func(a netip.Addr) bool {
		return n.cfg.Subnet.Contains(a) && a != n.cfg.Subnet.Addr() && a != lastAddr(n.cfg.Subnet)
	}
	macs := map[string]string{}
	for i := range n.cfg.Nodes {
		nd := &n.cfg.Nodes[i]
		who := fmt.Sprintf("node %q", nd.Name)
		if len(nd.MAC) != 6 {
			return fmt.Errorf("vnet: %s: MAC %q is not an Ethernet address", who, nd.MAC)
		}
		if other, ok := macs[nd.MAC.String()]; ok {
			return fmt.Errorf("vnet: %s: MAC %s is already %s's", who, nd.MAC, other)
		}
		macs[nd.MAC.String()] = who
		if !host(nd.IP) || nd.IP == n.gateway {
			return fmt.Errorf("vnet: %s: address %s is not a free host address of the subnet %s (the gateway is %s)", who, nd.IP, n.cfg.Subnet, n.gateway)
		}
		if other, ok := n.byIP[nd.IP]; ok {
			return fmt.Errorf("vnet: %s: address %s is already node %q's", who, nd.IP, other.Name)
		}
		n.byIP[nd.IP] = nd
	}
	// Services may share an address (the gateway's too), not a port.
	ports := map[netip.AddrPort]string{}
	for _, s := range n.cfg.Services {
		who := fmt.Sprintf("service %q", s.Name)
		if !s.Host.Addr().IsLoopback() {
			return fmt.Errorf("vnet: %s: host address %s is not on the loopback: the network forwards to this machine's loopback only", who, s.Host)
		}
		a := s.Virtual.Addr()
		if !host(a) {
			return fmt.Errorf("vnet: %s: virtual address %s is not a host address of the subnet %s", who, a, n.cfg.Subnet)
		}
		if nd, ok := n.byIP[a]; ok {
			return fmt.Errorf("vnet: %s: virtual address %s is node %q's", who, a, nd.Name)
		}
		if a == n.gateway && s.Virtual.Port() == 53 {
			return fmt.Errorf("vnet: %s: %s is the gateway's DNS", who, s.Virtual)
		}
		if other, ok := ports[s.Virtual]; ok {
			return fmt.Errorf("vnet: %s: %s is already %s's", who, s.Virtual, other)
		}
		ports[s.Virtual] = who
	}
	for name, a := range n.cfg.DNS {
		if strings.Count(strings.Trim(name, "."), ".") < 1 {
			return fmt.Errorf("vnet: DNS name %q: want a name with a domain (name.domain)", name)
		}
		if !a.Is4() {
			return fmt.Errorf("vnet: DNS name %q: address %s is not IPv4", name, a)
		}
	}
	return nil
}

func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3]) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func tcpipAddr(a netip.Addr) tcpip.Address { return tcpip.AddrFrom4(a.As4()) }

func tcpipSubnet(p netip.Prefix) (tcpip.Subnet, error) {
	return tcpip.NewSubnet(tcpipAddr(p.Addr()), tcpip.MaskFromBytes(net.CIDRMask(p.Bits(), 32)))
}

// newStack is the gateway's stack: IPv4 only, promiscuous so that it sees
// every packet a guest sends it (for the link-local services, and to
// refuse the rest with a reset instead of silence), spoofing so that it
// answers from those addresses.
func (n *Network) newStack(link stack.LinkEndpoint) error {
	s := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, arp.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol, icmp.NewProtocol4},
	})
	n.stack = s
	if err := s.CreateNIC(1, link); err != nil {
		return fmt.Errorf("vnet: gateway NIC: %s", err)
	}
	addrs := []netip.Addr{n.gateway, IMDSAddr.Addr(), TimeSyncAddr.Addr()}
	for _, sv := range n.cfg.Services {
		addrs = append(addrs, sv.Virtual.Addr())
	}
	seen := map[netip.Addr]bool{}
	for _, a := range addrs {
		if seen[a] {
			continue
		}
		seen[a] = true
		if err := s.AddProtocolAddress(1, tcpip.ProtocolAddress{
			Protocol:          ipv4.ProtocolNumber,
			AddressWithPrefix: tcpipAddr(a).WithPrefix(),
		}, stack.AddressProperties{}); err != nil {
			return fmt.Errorf("vnet: gateway address %s: %s", a, err)
		}
	}
	if err := s.SetSpoofing(1, true); err != nil {
		return fmt.Errorf("vnet: gateway spoofing: %s", err)
	}
	if err := s.SetPromiscuousMode(1, true); err != nil {
		return fmt.Errorf("vnet: gateway promiscuous mode: %s", err)
	}
	subnet, err := tcpipSubnet(n.cfg.Subnet)
	if err != nil {
		return fmt.Errorf("vnet: subnet route: %w", err)
	}
	s.SetRouteTable([]tcpip.Route{{Destination: subnet, NIC: 1}})

	// What no listener takes: a TCP connection gets a reset, a UDP
	// datagram is dropped; both are recorded.
	refuseTCP := tcp.NewForwarder(s, 0, 64, func(r *tcp.ForwarderRequest) {
		id := r.ID()
		n.refuse("tcp", id)
		r.Complete(true)
	})
	s.SetTransportProtocolHandler(tcp.ProtocolNumber, refuseTCP.HandlePacket)
	s.SetTransportProtocolHandler(udp.ProtocolNumber, func(id stack.TransportEndpointID, _ *stack.PacketBuffer) bool {
		to := addrOf(id.LocalAddress)
		if to.IsMulticast() || to == netip.AddrFrom4([4]byte{255, 255, 255, 255}) || to == lastAddr(n.cfg.Subnet) {
			return true // broadcasts and multicasts are for the segment, not for a service
		}
		n.refuse("udp", id)
		return true
	})
	return nil
}

func addrOf(a tcpip.Address) netip.Addr {
	if a.Len() == 4 {
		return netip.AddrFrom4(a.As4())
	}
	b, _ := netip.AddrFromSlice(a.AsSlice())
	return b
}

func (n *Network) refuse(proto string, id stack.TransportEndpointID) {
	r := Refusal{
		From:  addrOf(id.RemoteAddress),
		To:    netip.AddrPortFrom(addrOf(id.LocalAddress), id.LocalPort),
		Proto: proto,
		At:    time.Now(),
	}
	n.mu.Lock()
	n.refused++
	first := true
	for _, o := range n.refusals {
		if o.From == r.From && o.To == r.To && o.Proto == r.Proto {
			first = false
			break
		}
	}
	if first && len(n.refusals) < maxRefusals {
		n.refusals = append(n.refusals, r)
	}
	n.mu.Unlock()
	if first {
		n.log.Info("vnet: refused a guest's connection: the network forwards only to the rig's services", "proto", proto, "from", r.From, "to", r.To, "node", n.nodeName(r.From))
	}
}

// Refused returns the distinct (from, to, proto) attempts the gateway
// refused, first seen first (at most 256), and how many packets or
// connections were refused in all.
func (n *Network) Refused() ([]Refusal, int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]Refusal(nil), n.refusals...), n.refused
}

func (n *Network) nodeName(a netip.Addr) string {
	if nd, ok := n.byIP[a]; ok {
		return nd.Name
	}
	return ""
}

func (n *Network) gatewayConfig() *types.Configuration {
	c := &types.Configuration{
		Subnet:            n.cfg.Subnet.String(),
		GatewayIP:         n.gateway.String(),
		GatewayMacAddress: gatewayMAC,
		MTU:               mtu,
	}
	if n.cfg.SearchDomain != "" {
		c.DNSSearchDomains = []string{n.cfg.SearchDomain}
	}
	return c
}

func (n *Network) startDHCP() error {
	_, ipnet, err := net.ParseCIDR(n.cfg.Subnet.String())
	if err != nil {
		return fmt.Errorf("vnet: subnet: %w", err)
	}
	pool := tap.NewIPPool(ipnet)
	pool.Reserve(net.IP(n.gateway.AsSlice()), gatewayMAC)
	for _, nd := range n.cfg.Nodes {
		pool.Reserve(net.IP(nd.IP.AsSlice()), nd.MAC.String())
	}
	// A virtual address is never leased; the "MAC" that holds it is none.
	for _, s := range n.cfg.Services {
		if s.Virtual.Addr() != n.gateway {
			pool.Reserve(net.IP(s.Virtual.Addr().AsSlice()), "service:"+s.Name)
		}
	}
	pool.Reserve(net.IP(lastAddr(n.cfg.Subnet).AsSlice()), "broadcast")
	srv, err := dhcp.New(n.gatewayConfig(), n.stack, pool)
	if err != nil {
		return fmt.Errorf("vnet: DHCP server: %w", err)
	}
	n.goServe("DHCP", srv.Serve)
	return nil
}

// noUpstream answers every name the rig does not know as not found:
// gvisor-tap-vsock's DNS would otherwise ask the host's resolver, which
// asks the outside world.
type noUpstream struct{}

var errNotHere = &net.DNSError{Err: "no such host on the berth test network", IsNotFound: true}

func (noUpstream) LookupIPAddr(context.Context, string) ([]net.IPAddr, error) { return nil, errNotHere }
func (noUpstream) LookupCNAME(context.Context, string) (string, error)        { return "", errNotHere }
func (noUpstream) LookupMX(context.Context, string) ([]*net.MX, error)        { return nil, errNotHere }
func (noUpstream) LookupNS(context.Context, string) ([]*net.NS, error)        { return nil, errNotHere }
func (noUpstream) LookupSRV(context.Context, string, string, string) (string, []*net.SRV, error) {
	return "", nil, errNotHere
}
func (noUpstream) LookupTXT(context.Context, string) ([]string, error) { return nil, errNotHere }

func (n *Network) zones() []types.Zone {
	byZone := map[string][]types.Record{}
	for name, a := range n.cfg.DNS {
		name = strings.ToLower(strings.Trim(name, "."))
		host, zone, _ := strings.Cut(name, ".")
		byZone[zone+"."] = append(byZone[zone+"."], types.Record{Name: host, IP: net.IP(a.AsSlice())})
	}
	var zs []types.Zone
	for z, rs := range byZone {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Name < rs[j].Name })
		zs = append(zs, types.Zone{Name: z, Records: rs})
	}
	// The longest zone first: gvisor-tap-vsock takes the first zone whose
	// suffix matches, and a shorter one would hide a longer one's names.
	sort.Slice(zs, func(i, j int) bool {
		if len(zs[i].Name) != len(zs[j].Name) {
			return len(zs[i].Name) > len(zs[j].Name)
		}
		return zs[i].Name < zs[j].Name
	})
	return zs
}

func (n *Network) startDNS() error {
	at := tcpip.FullAddress{NIC: 1, Addr: tcpipAddr(n.gateway), Port: 53}
	udpConn, err := gonet.DialUDP(n.stack, &at, nil, ipv4.ProtocolNumber)
	if err != nil {
		return fmt.Errorf("vnet: DNS on %s:53/udp: %w", n.gateway, err)
	}
	n.addCloser(udpConn)
	tcpLn, err := gonet.ListenTCP(n.stack, at, ipv4.ProtocolNumber)
	if err != nil {
		return fmt.Errorf("vnet: DNS on %s:53/tcp: %w", n.gateway, err)
	}
	n.addCloser(tcpLn)
	srv, err := dns.NewWithUpstreamResolver(udpConn, tcpLn, n.zones(), noUpstream{})
	if err != nil {
		return fmt.Errorf("vnet: DNS server: %w", err)
	}
	n.goServe("DNS over UDP", srv.Serve)
	n.goServe("DNS over TCP", srv.ServeTCP)
	return nil
}

type nodeKey struct{}

// startIMDS serves 169.254.169.254:80 inside the stack, so that each
// request's source address says which node asks.
func (n *Network) startIMDS() error {
	ln, err := gonet.ListenTCP(n.stack, tcpip.FullAddress{NIC: 1, Addr: tcpipAddr(IMDSAddr.Addr()), Port: IMDSAddr.Port()}, ipv4.ProtocolNumber)
	if err != nil {
		return fmt.Errorf("vnet: IMDS on %s: %w", IMDSAddr, err)
	}
	srv := &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			from, _ := netip.ParseAddrPort(c.RemoteAddr().String())
			return context.WithValue(ctx, nodeKey{}, n.byIP[from.Addr()])
		},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			nd, _ := r.Context().Value(nodeKey{}).(*Node)
			if nd == nil || nd.IMDS == nil {
				n.mu.Lock()
				if len(n.imdsMisses) < maxRefusals {
					n.imdsMisses = append(n.imdsMisses, r.RemoteAddr+" "+r.Method+" "+r.URL.Path)
				}
				n.mu.Unlock()
				http.Error(w, "no instance at "+r.RemoteAddr+" on the berth test network", http.StatusNotFound)
				return
			}
			nd.IMDS.ServeHTTP(w, r)
		}),
	}
	n.addCloser(srv)
	n.goServe("IMDS", func() error { return srv.Serve(ln) })
	return nil
}

// IMDSMisses are the requests to 169.254.169.254 from guests that have no
// IMDS, each "address method path": a machine off EC2 should send none.
func (n *Network) IMDSMisses() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.imdsMisses)
}

// startTime answers NTP at 169.254.169.123 with the host's clock (plus
// TimeOffset), stratum 3 as the Amazon Time Sync Service says.
func (n *Network) startTime() error {
	conn, err := gonet.DialUDP(n.stack, &tcpip.FullAddress{NIC: 1, Addr: tcpipAddr(TimeSyncAddr.Addr()), Port: TimeSyncAddr.Port()}, nil, ipv4.ProtocolNumber)
	if err != nil {
		return fmt.Errorf("vnet: time service on %s: %w", TimeSyncAddr, err)
	}
	n.addCloser(conn)
	n.goServe("time service", func() error {
		buf := make([]byte, 512)
		for {
			k, peer, err := conn.ReadFrom(buf)
			if err != nil {
				return err
			}
			recv := time.Now().Add(n.cfg.TimeOffset)
			reply, err := ntptest.Answer(buf[:k], 3, recv, time.Now().Add(n.cfg.TimeOffset))
			if err != nil {
				continue // not a client request: a real server ignores it too
			}
			if _, err := conn.WriteTo(reply, peer); err != nil {
				return err
			}
		}
	})
	return nil
}

// startService forwards the service's virtual address to its host
// address, one host connection per guest connection.
func (n *Network) startService(s Service) error {
	ln, err := gonet.ListenTCP(n.stack, tcpip.FullAddress{NIC: 1, Addr: tcpipAddr(s.Virtual.Addr()), Port: s.Virtual.Port()}, ipv4.ProtocolNumber)
	if err != nil {
		return fmt.Errorf("vnet: service %q on %s: %w", s.Name, s.Virtual, err)
	}
	n.addCloser(ln)
	n.goServe("service "+s.Name, func() error {
		for {
			c, err := ln.Accept()
			if err != nil {
				return err
			}
			n.wg.Add(1)
			safe.Go(n.log, "vnet: service "+s.Name+" connection", func() {
				defer n.wg.Done()
				n.forward(s, c)
			}, nil)
		}
	})
	return nil
}

func (n *Network) forward(s Service, guest net.Conn) {
	if !n.track(guest) {
		return
	}
	defer n.untrack(guest)
	var d net.Dialer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	host, err := d.DialContext(ctx, "tcp", s.Host.String())
	cancel()
	if err != nil {
		n.log.Warn("vnet: service unreachable on the host", "service", s.Name, "host", s.Host, "from", guest.RemoteAddr().String(), "err", err)
		return
	}
	if !n.track(host) {
		return
	}
	defer n.untrack(host)
	splice(n.log, guest, host)
}

// splice copies both ways until both directions end, passing on each
// half-close.
func splice(log *slog.Logger, a, b net.Conn) {
	done := make(chan struct{}, 2)
	half := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
		done <- struct{}{}
	}
	safe.Go(log, "vnet: splice", func() { half(a, b) }, nil)
	safe.Go(log, "vnet: splice", func() { half(b, a) }, nil)
	<-done
	<-done
}

func (n *Network) track(c net.Conn) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		c.Close()
		return false
	}
	n.conns[c] = struct{}{}
	return true
}

func (n *Network) untrack(c net.Conn) {
	n.mu.Lock()
	delete(n.conns, c)
	n.mu.Unlock()
	c.Close()
}

func (n *Network) addCloser(c io.Closer) {
	n.mu.Lock()
	n.closers = append(n.closers, c)
	n.mu.Unlock()
}

// goServe runs a server loop; its end is logged unless the network is
// closing.
func (n *Network) goServe(what string, serve func() error) {
	n.wg.Add(1)
	safe.Go(n.log, "vnet: "+what, func() {
		defer n.wg.Done()
		err := serve()
		n.mu.Lock()
		closed := n.closed
		n.mu.Unlock()
		if !closed && err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("vnet: server stopped", "server", what, "err", err)
		}
	}, nil)
}

// Attach joins one guest to the switch over conn, which speaks QEMU's
// stream protocol (a 32-bit big-endian length before each frame:
// `-netdev stream` or `-netdev socket`), until conn or ctx ends.
func (n *Network) Attach(ctx context.Context, conn net.Conn) error {
	if !n.track(conn) {
		return errors.New("vnet: network closed")
	}
	defer n.untrack(conn)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	return n.sw.Accept(ctx, conn, types.QemuProtocol)
}

// Listen accepts guests on a unix socket at path, for QEMU's
// `-netdev stream,id=...,server=off,addr.type=unix,addr.path=PATH`
// (qemu.NIC's Stream), until the network is closed.
func (n *Network) Listen(path string) error {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("vnet: listening for guests on %s: %w", path, err)
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		ln.Close()
		return errors.New("vnet: network closed")
	}
	n.listeners = append(n.listeners, ln)
	n.mu.Unlock()
	n.goServe("guest socket "+path, func() error {
		for {
			c, err := ln.Accept()
			if err != nil {
				return err
			}
			n.wg.Add(1)
			safe.Go(n.log, "vnet: guest link", func() {
				defer n.wg.Done()
				if err := n.Attach(context.Background(), c); err != nil && !n.isClosed() {
					n.log.Debug("vnet: guest link ended", "err", err)
				}
			}, nil)
		}
	})
	return nil
}

func (n *Network) isClosed() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.closed
}

// linkLocal is where EC2's own services live (IMDS, time): never behind
// a node.
var linkLocal = netip.MustParsePrefix("169.254.0.0/16")

// notRoutable are destinations no node's pods hold: "this network",
// loopback, multicast and the limited broadcast.
var notRoutable = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("255.255.255.255/32"),
}

// Subnet is the nodes' subnet.
func (n *Network) Subnet() netip.Prefix { return n.cfg.Subnet }

// AddRoute routes prefix via a node's address on the subnet, as a cloud's
// route controller adds a node's pod CIDR to a VPC route table: the
// gateway then sends what it dials in prefix (DialContext) to via's MAC,
// and the node forwards it to its pods. Adding a route that is already
// there is a no-op, so a controller may repeat itself; a route for the
// same prefix via another address, a prefix overlapping the subnet, the
// link-local services or another route, and a via that is not a host
// address of the subnet, or is the gateway's or a service's, are refused
// with what is wrong. It is safe for concurrent use.
func (n *Network) AddRoute(prefix netip.Prefix, via netip.Addr) error {
	if !prefix.IsValid() || !prefix.Addr().Is4() {
		return fmt.Errorf("vnet: route %s via %s: want an IPv4 prefix", prefix, via)
	}
	if prefix != prefix.Masked() {
		return fmt.Errorf("vnet: route %s via %s: host bits set (the prefix is %s)", prefix, via, prefix.Masked())
	}
	if !via.Is4() || !n.cfg.Subnet.Contains(via) || via == n.cfg.Subnet.Addr() || via == lastAddr(n.cfg.Subnet) {
		return fmt.Errorf("vnet: route %s via %s: the next hop is not a host address of the subnet %s", prefix, via, n.cfg.Subnet)
	}
	if via == n.gateway {
		return fmt.Errorf("vnet: route %s via %s: the next hop is the gateway itself", prefix, via)
	}
	for _, s := range n.cfg.Services {
		if s.Virtual.Addr() == via {
			return fmt.Errorf("vnet: route %s via %s: the next hop is service %q's virtual address, not a node", prefix, via, s.Name)
		}
	}
	if prefix.Overlaps(n.cfg.Subnet) {
		return fmt.Errorf("vnet: route %s via %s: overlaps the subnet %s, which the gateway reaches directly", prefix, via, n.cfg.Subnet)
	}
	if prefix.Overlaps(linkLocal) {
		return fmt.Errorf("vnet: route %s via %s: overlaps %s, the gateway's own link-local services (IMDS %s, time %s)", prefix, via, linkLocal, IMDSAddr.Addr(), TimeSyncAddr.Addr())
	}
	for _, p := range notRoutable {
		if prefix.Overlaps(p) {
			return fmt.Errorf("vnet: route %s via %s: overlaps %s, which no node holds", prefix, via, p)
		}
	}
	dest, err := tcpipSubnet(prefix)
	if err != nil {
		return fmt.Errorf("vnet: route %s via %s: %w", prefix, via, err)
	}
	if added, err := n.claimRoute(prefix, via); err != nil || !added {
		return err
	}
	// Outside n.mu: the stack's own lock guards its table, and the stack
	// calls back into the network (refuse) under its locks.
	//
	// SourceHint: the gateway's address, not one of the service or
	// link-local addresses the NIC also holds, is what a node's pods see
	// and answer to.
	n.stack.AddRoute(tcpip.Route{Destination: dest, Gateway: tcpipAddr(via), NIC: 1, SourceHint: tcpipAddr(n.gateway)})
	n.log.Info("vnet: route added", "prefix", prefix, "via", via, "node", n.nodeName(via))
	return nil
}

// claimRoute records prefix via via, unless a route for it (or
// overlapping it) is already there: added is false for the same route
// again, which is no error.
func (n *Network) claimRoute(prefix netip.Prefix, via netip.Addr) (added bool, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return false, fmt.Errorf("vnet: route %s via %s: network closed", prefix, via)
	}
	if old, ok := n.routes[prefix]; ok {
		if old == via {
			return false, nil
		}
		return false, fmt.Errorf("vnet: route %s via %s: %s is already routed via %s", prefix, via, prefix, old)
	}
	for p, v := range n.routes {
		if p.Overlaps(prefix) {
			return false, fmt.Errorf("vnet: route %s via %s: overlaps the route %s via %s", prefix, via, p, v)
		}
	}
	n.routes[prefix] = via
	return true, nil
}

// RemoveRoute takes back AddRoute's route for prefix via via, as a
// cloud's route controller deletes a route once its node is gone: the
// prefix may then be routed via another node (the pod CIDR a replacement
// node is given). Removing a route that is not there is a no-op, so a
// controller may repeat itself; one for prefix via another address is
// refused, naming it: that route is another node's. It is safe for
// concurrent use.
func (n *Network) RemoveRoute(prefix netip.Prefix, via netip.Addr) error {
	dest, err := tcpipSubnet(prefix)
	if err != nil {
		return fmt.Errorf("vnet: removing route %s via %s: %w", prefix, via, err)
	}
	n.mu.Lock()
	old, ok := n.routes[prefix]
	switch {
	case !ok:
		n.mu.Unlock()
		return nil
	case old != via:
		n.mu.Unlock()
		return fmt.Errorf("vnet: removing route %s via %s: %s is routed via %s", prefix, via, prefix, old)
	}
	delete(n.routes, prefix)
	n.mu.Unlock()
	// Outside n.mu, as in AddRoute. A dial between the two sees the
	// prefix as unrouted (routed) and is refused by name.
	gw := tcpipAddr(via)
	n.stack.RemoveRoutes(func(r tcpip.Route) bool { return r.Destination == dest && r.Gateway == gw })
	n.log.Info("vnet: route removed", "prefix", prefix, "via", via, "node", n.nodeName(via))
	return nil
}

// Routes returns AddRoute's routes: destination to next hop.
func (n *Network) Routes() map[netip.Prefix]netip.Addr {
	n.mu.Lock()
	defer n.mu.Unlock()
	return maps.Clone(n.routes)
}

// routed says whether a is on the subnet or behind one of AddRoute's
// routes.
func (n *Network) routed(a netip.Addr) bool {
	if n.cfg.Subnet.Contains(a) {
		return true
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for p := range n.routes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// DialContext connects from the gateway to a guest's TCP port: how
// host-side code (the API server's egress proxy, a test) reaches a node,
// or a pod behind a node (AddRoute), without a route from the host to
// the guests' addresses.
func (n *Network) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if network != "tcp" && network != "tcp4" {
		return nil, fmt.Errorf("vnet: dialing %s %s: only tcp reaches the guests", network, address)
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return nil, fmt.Errorf("vnet: dialing %s: want IPv4:port: %w", address, err)
	}
	if !n.routed(ap.Addr()) {
		return nil, fmt.Errorf("vnet: dialing %s: not on the subnet %s nor behind a route (routes: %v)", address, n.cfg.Subnet, n.Routes())
	}
	c, err := gonet.DialContextTCP(ctx, n.stack, tcpip.FullAddress{NIC: 1, Addr: tcpipAddr(ap.Addr()), Port: ap.Port()}, ipv4.ProtocolNumber)
	if err != nil {
		return nil, fmt.Errorf("vnet: dialing %s through the gateway: %w", address, err)
	}
	return c, nil
}

// Close stops the gateway and drops every guest link.
func (n *Network) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	closers := n.closers
	lns := n.listeners
	conns := make([]net.Conn, 0, len(n.conns))
	for c := range n.conns {
		conns = append(conns, c)
	}
	n.mu.Unlock()
	for _, l := range lns {
		l.Close()
	}
	for _, c := range conns {
		c.Close()
	}
	for _, c := range closers {
		c.Close()
	}
	if n.stack != nil {
		n.stack.Close()
	}
	done := make(chan struct{})
	safe.Go(n.log, "vnet: close", func() { n.wg.Wait(); close(done) }, nil)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		// The DHCP server (insomniacslk's server4) has no way to stop its
		// loop but its conn, which the stack's close ends; anything still
		// running after that is abandoned, not waited for forever.
	}
	return nil
}
