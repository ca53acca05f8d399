package controlplane

// The API server reaching kubelets. A QEMU guest on the user network cannot
// be dialled from the host except through a hostfwd port, and every guest's
// InternalIP is 10.0.2.15, so the address alone cannot tell two nodes
// apart. kube-apiserver is given an egress selector whose "cluster" egress
// (kubelet logs, exec, attach, port-forward, the proxy subresources and
// webhooks reached by Service) is an HTTP CONNECT proxy, as
// konnectivity-style clusters reach nodes they cannot dial. The proxy runs
// in the test process and maps each CONNECT target to the hostfwd port the
// test registered for that node (Cluster.RouteKubelet).
//
// The proxy listens on a Unix socket: kube-apiserver's TCP transport for
// HTTPConnect always speaks TLS to the proxy with a client certificate
// (egressselector's getTLSConfig is called even for an http:// URL), the UDS
// transport is plain, and a socket in the 0700 state directory needs no port.
//
// The same egress carries the apiserver's connections to pods: the
// pods/<p>/proxy and services/<s>/proxy subresources, and admission and
// CRD conversion webhooks and aggregated APIs, which the apiserver dials
// by endpoint, a pod IP, under --enable-aggregator-routing. A CONNECT to
// an IP inside a registered pod network (Cluster.RoutePodsVia) is dialled
// through that network's dial function, the virtual network's gateway,
// whose route table sends each node's pod CIDR to that node
// (noderoutes.go), as a VPC's route table does.
//
// --kubelet-preferred-address-types=Hostname makes the apiserver CONNECT to
// "<hostname>:10250": berth nodes report their hostname (the node name,
// from IMDS local-hostname) as the Hostname address, and that is what
// names a node; the InternalIP 10.0.2.15 would not.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/berth-node/berth/internal/safe"
)

// KubeletPort is the port kubelet serves on, and so the port of every
// CONNECT target the apiserver sends for a node.
const KubeletPort = 10250

// egressSelectorConfig renders kube-apiserver's
// --egress-selector-config-file: the "cluster" egress through an HTTP
// CONNECT proxy on the Unix socket udsPath; the others stay direct.
func egressSelectorConfig(udsPath string) ([]byte, error) {
	cfg := map[string]any{
		"apiVersion": "apiserver.k8s.io/v1beta1",
		"kind":       "EgressSelectorConfiguration",
		"egressSelections": []any{map[string]any{
			"name": "cluster",
			"connection": map[string]any{
				"proxyProtocol": "HTTPConnect",
				"transport":     map[string]any{"uds": map[string]any{"udsName": udsPath}},
			},
		}},
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding egress selector config: %w", err)
	}
	return b, nil
}

// maxUnixPath is the longest socket path Linux's sockaddr_un holds (108
// bytes with the NUL).
const maxUnixPath = 107

// kubeletProxy is the HTTP CONNECT proxy kube-apiserver's cluster egress
// goes through.
type kubeletProxy struct {
	log *slog.Logger
	// dialTimeout bounds the dial of a route's host port.
	dialTimeout time.Duration

	mu     sync.Mutex
	routes map[string]kubeletRoute // by CONNECT target "host:port"
	// nets are the pod networks: a CONNECT to an IP in one is dialled,
	// as it is, through its dial.
	nets   map[netip.Prefix]DialFunc
	ln     net.Listener
	conns  map[net.Conn]bool // open client and upstream connections, closed by close
	wg     sync.WaitGroup
	closed bool
}

// DialFunc dials addr ("host:port") on a network the host has no route
// to, such as a virtual network's gateway stack (vnet.Network.DialContext).
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// kubeletRoute is where a node's kubelet is: addr, dialled by dial (the
// host's own network when nil).
type kubeletRoute struct {
	addr string
	dial DialFunc
}

func newKubeletProxy(log *slog.Logger) *kubeletProxy {
	return &kubeletProxy{log: log, dialTimeout: 10 * time.Second, routes: map[string]kubeletRoute{}, nets: map[netip.Prefix]DialFunc{}, conns: map[net.Conn]bool{}}
}

// route registers the kubelet of node as reachable at 127.0.0.1:hostPort
// (its VM's hostfwd to the guest's 10250). A later call for the same node
// replaces the earlier.
func (p *kubeletProxy) route(node string, hostPort int) error {
	if hostPort <= 0 || hostPort > 65535 {
		return fmt.Errorf("routing the kubelet of %s: host port %d out of range", node, hostPort)
	}
	return p.routeVia(node, net.JoinHostPort("127.0.0.1", strconv.Itoa(hostPort)), nil)
}

// routeVia registers the kubelet of node as reachable at addr through
// dial (nil: the host's network).
func (p *kubeletProxy) routeVia(node, addr string, dial DialFunc) error {
	if node == "" {
		return errors.New("routing a kubelet: empty node name")
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("routing the kubelet of %s: address %q: %w", node, addr, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.routes[net.JoinHostPort(node, strconv.Itoa(KubeletPort))] = kubeletRoute{addr: addr, dial: dial}
	return nil
}

// routeNet registers a pod network: a CONNECT to an IP:port inside
// prefix is dialled through dial. A later call for the same prefix
// replaces the earlier; of overlapping prefixes the longest wins, as in a
// route table.
func (p *kubeletProxy) routeNet(prefix netip.Prefix, dial DialFunc) error {
	if !prefix.IsValid() || prefix != prefix.Masked() {
		return fmt.Errorf("routing a pod network: %s is not a network prefix", prefix)
	}
	if dial == nil {
		return fmt.Errorf("routing the pod network %s: no dial function (the host has no route to pods)", prefix)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nets[prefix] = dial
	return nil
}

// errNoRoute is a CONNECT target no test registered.
var errNoRoute = errors.New("no route")

// lookup decides where a CONNECT target goes: a kubelet registered by
// name, else the pod network with the longest prefix holding the
// target's IP.
func (p *kubeletProxy) lookup(target string) (kubeletRoute, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.routes[target]; ok {
		return r, nil
	}
	if ap, err := netip.ParseAddrPort(target); err == nil {
		ip := ap.Addr().Unmap()
		var best netip.Prefix
		for pfx := range p.nets {
			if pfx.Contains(ip) && (!best.IsValid() || pfx.Bits() > best.Bits()) {
				best = pfx
			}
		}
		if best.IsValid() {
			return kubeletRoute{addr: netip.AddrPortFrom(ip, ap.Port()).String(), dial: p.nets[best]}, nil
		}
	}
	known := make([]string, 0, len(p.routes))
	for t := range p.routes {
		known = append(known, t)
	}
	slices.Sort(known)
	nets := make([]string, 0, len(p.nets))
	for pfx := range p.nets {
		nets = append(nets, pfx.String())
	}
	slices.Sort(nets)
	return kubeletRoute{}, fmt.Errorf("%w for CONNECT %s (routes: %v; pod networks: %v; a test registers a node's kubelet with Cluster.RouteKubelet and a pod network with Cluster.RoutePodsVia)", errNoRoute, target, known, nets)
}

// serve accepts CONNECT requests on ln until close.
func (p *kubeletProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	for {
		c, err := ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				p.log.Error("egress proxy: accepting", "addr", ln.Addr(), "err", err)
			}
			return
		}
		if !p.track(c) {
			c.Close()
			return
		}
		p.wg.Add(1)
		safe.Go(p.log, "egress proxy: connection", func() {
			defer p.wg.Done()
			defer p.untrack(c)
			p.handle(c)
		}, nil)
	}
}

// track records an open connection so close can end it; false once closed.
func (p *kubeletProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = true
	return true
}

func (p *kubeletProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// handle serves one client connection: one CONNECT, then bytes both ways.
func (p *kubeletProxy) handle(c net.Conn) {
	// The apiserver writes the CONNECT at once; a peer that does not is
	// not one.
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		p.log.Warn("egress proxy: reading the request", "err", err)
		reply(c, http.StatusBadRequest, "reading the CONNECT request: "+err.Error())
		return
	}
	if req.Method != http.MethodConnect {
		reply(c, http.StatusMethodNotAllowed, "only CONNECT is served, not "+req.Method)
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	target := req.RequestURI
	r, err := p.lookup(target)
	if err != nil {
		p.log.Warn("egress proxy: refused", "target", target, "err", err)
		reply(c, http.StatusBadGateway, err.Error())
		return
	}
	addr := r.addr
	var up net.Conn
	if r.dial != nil {
		ctx, cancel := context.WithTimeout(context.Background(), p.dialTimeout)
		up, err = r.dial(ctx, "tcp", addr)
		cancel()
	} else {
		up, err = net.DialTimeout("tcp", addr, p.dialTimeout)
	}
	if err != nil {
		err = fmt.Errorf("dialing %s for CONNECT %s: %w", addr, target, err)
		p.log.Warn("egress proxy: dial failed", "target", target, "err", err)
		reply(c, http.StatusBadGateway, err.Error())
		return
	}
	if !p.track(up) {
		up.Close()
		return
	}
	defer p.untrack(up)
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	p.log.Debug("egress proxy: tunnel", "target", target, "addr", addr)
	// The client may have sent its first bytes (a TLS hello) along with
	// the CONNECT: they are in br.
	done := make(chan struct{})
	safe.Go(p.log, "egress proxy: tunnel upstream", func() {
		defer close(done)
		_, _ = io.Copy(up, br)
		closeWrite(up)
	}, nil)
	_, _ = io.Copy(c, up)
	closeWrite(c)
	<-done
}

// reply writes a complete HTTP response with a text body and ends the
// exchange.
func reply(c net.Conn, code int, msg string) {
	body := msg + "\n"
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, http.StatusText(code), len(body), body)
}

// closeWrite half-closes a connection, so the far side sees EOF while the
// reverse direction drains.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// close stops accepting, ends every open tunnel and waits for their
// goroutines.
func (p *kubeletProxy) close() error {
	p.mu.Lock()
	p.closed = true
	var err error
	if p.ln != nil {
		err = p.ln.Close()
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// startKubeletProxy listens on the Unix socket path and serves until close.
func startKubeletProxy(ctx context.Context, log *slog.Logger, path string) (*kubeletProxy, error) {
	if len(path) > maxUnixPath {
		return nil, fmt.Errorf("egress proxy socket %s: %d bytes, longer than a Unix socket path may be (%d): use a shorter state directory", path, len(path), maxUnixPath)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("egress proxy: listening on %s: %w", path, err)
	}
	p := newKubeletProxy(log)
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	safe.Go(log, "egress proxy: accepting", func() { p.serve(ln) }, nil)
	return p, nil
}
