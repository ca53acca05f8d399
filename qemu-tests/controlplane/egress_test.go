package controlplane

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
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-node/berth/internal/safe"
)

func TestEgressSelectorConfigGolden(t *testing.T) {
	got, err := egressSelectorConfig(layout{dir: "/state"}.egressSocket())
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "egress-selector.yaml")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("reading %s (go test -update creates it): %v", golden, err)
	}
	if string(got) != string(want) {
		t.Errorf("egress selector config differs from %s (go test -update to accept):\n%s", golden, got)
	}
}

// startTestProxy runs the proxy on a Unix socket in a temporary directory,
// as Start does, and stops it when the test ends.
func startTestProxy(t *testing.T) (*kubeletProxy, string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "egress.sock")
	p, err := startKubeletProxy(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.close(); err != nil {
			t.Errorf("closing the proxy: %v", err)
		}
	})
	return p, sock
}

// echoServer is a stand-in kubelet on loopback: it answers each line with
// its name and the line.
func echoServer(t *testing.T, name string) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	spawn(t, name+" accepting", func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			spawn(t, name+" answering", func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					fmt.Fprintf(c, "%s:%s\n", name, sc.Text())
				}
			})
		}
	})
	return ln.Addr().(*net.TCPAddr).Port
}

// spawn starts fn through safe.Go, as every goroutine in the project
// starts; a panic fails the test by name.
func spawn(t testing.TB, name string, fn func()) {
	safe.Go(slog.Default(), name, fn, func(p *safe.Panic) { t.Errorf("goroutine %s: %v", name, p) })
}

// connect sends CONNECT target over the socket as kube-apiserver does
// (egressselector's tunnelHTTPConnect) and returns the response and the
// connection, tunnelled when the status is 200.
func connect(t *testing.T, sock, target string) (*http.Response, net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, "127.0.0.1")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("CONNECT %s: reading the response: %v", target, err)
	}
	return resp, c, br
}

func TestProxyRoutesByNode(t *testing.T) {
	p, sock := startTestProxy(t)
	for _, n := range []string{"node-a", "node-b"} {
		if err := p.route(n, echoServer(t, n)); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"node-a", "node-b"} {
		resp, c, br := connect(t, sock, n+":10250")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("CONNECT %s:10250: %s", n, resp.Status)
		}
		fmt.Fprintf(c, "hello\n")
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line != n+":hello\n" {
			t.Errorf("through the tunnel to %s: %q", n, line)
		}
	}
}

// A node on a network the host has no route to (vnet): the proxy dials
// the node's own address through the dial function it was given, and
// the tunnel carries the bytes both ways.
func TestProxyRoutesVia(t *testing.T) {
	p, sock := startTestProxy(t)
	port := echoServer(t, "node-a")
	var asked []string
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		asked = append(asked, network+" "+addr)
		// The "virtual network" here is the host's loopback.
		return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	}
	if err := p.routeVia("ip-192-168-127-10.us-west-2.compute.internal", "192.168.127.10:10250", dial); err != nil {
		t.Fatal(err)
	}
	resp, c, br := connect(t, sock, "ip-192-168-127-10.us-west-2.compute.internal:10250")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT: %s", resp.Status)
	}
	fmt.Fprintf(c, "hello\n")
	if line, err := br.ReadString('\n'); err != nil || line != "node-a:hello\n" {
		t.Errorf("through the tunnel: %q, %v", line, err)
	}
	if len(asked) != 1 || asked[0] != "tcp 192.168.127.10:10250" {
		t.Errorf("the dial function was asked %q; want once, for tcp 192.168.127.10:10250", asked)
	}
	if err := p.routeVia("node-b", "no-port", dial); err == nil || !strings.Contains(err.Error(), "no-port") {
		t.Errorf("routeVia with an address without a port: %v", err)
	}
}

func TestProxyUnknownTarget(t *testing.T) {
	p, sock := startTestProxy(t)
	if err := p.route("node-a", echoServer(t, "node-a")); err != nil {
		t.Fatal(err)
	}
	// A node never routed, and a routed node on a port other than
	// kubelet's: both are refused with the target named.
	for _, target := range []string{"node-z:10250", "node-a:8080", "10.0.2.15:10250"} {
		resp, _, _ := connect(t, sock, target)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "no route for CONNECT "+target) ||
			!strings.Contains(string(body), "RouteKubelet") {
			t.Errorf("CONNECT %s: %s %q, want 502 naming the target and RouteKubelet", target, resp.Status, body)
		}
	}
}

func TestProxyRefusedPort(t *testing.T) {
	p, sock := startTestProxy(t)
	// A port that was free a moment ago: nothing listens there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	if err := p.route("node-a", port); err != nil {
		t.Fatal(err)
	}
	resp, _, _ := connect(t, sock, "node-a:10250")
	body, _ := io.ReadAll(resp.Body)
	want := "dialing 127.0.0.1:" + strconv.Itoa(port) + " for CONNECT node-a:10250"
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), want) || !strings.Contains(string(body), "refused") {
		t.Errorf("CONNECT to a refusing port: %s %q, want 502 with %q", resp.Status, body, want)
	}
}

func TestProxyNotConnect(t *testing.T) {
	_, sock := startTestProxy(t)
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET through the proxy: %s, want 405", resp.Status)
	}
}

func TestProxyConcurrentTunnels(t *testing.T) {
	p, sock := startTestProxy(t)
	nodes := []string{"node-a", "node-b", "node-c"}
	for _, n := range nodes {
		if err := p.route(n, echoServer(t, n)); err != nil {
			t.Fatal(err)
		}
	}
	const perNode = 10
	var wg sync.WaitGroup
	errs := make(chan error, len(nodes)*perNode)
	for _, n := range nodes {
		for i := range perNode {
			wg.Add(1)
			spawn(t, "tunnel", func() {
				defer wg.Done()
				errs <- tunnelRoundTrips(sock, n, i)
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// tunnelRoundTrips opens one tunnel to node and checks several exchanges
// come back from that node, in order.
func tunnelRoundTrips(sock, node string, id int) error {
	c, err := net.Dial("unix", sock)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "CONNECT %s:10250 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", node)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return fmt.Errorf("tunnel %s/%d: %w", node, id, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("tunnel %s/%d: %s", node, id, resp.Status)
	}
	for j := range 5 {
		msg := fmt.Sprintf("m%d-%d", id, j)
		fmt.Fprintf(c, "%s\n", msg)
		line, err := br.ReadString('\n')
		if err != nil {
			return fmt.Errorf("tunnel %s/%d: %w", node, id, err)
		}
		if want := node + ":" + msg + "\n"; line != want {
			return fmt.Errorf("tunnel %s/%d: got %q, want %q", node, id, line, want)
		}
	}
	return nil
}

// Close ends tunnels still open, so Stop never waits on a hung kubectl
// exec.
func TestProxyCloseEndsTunnels(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "egress.sock")
	p, err := startKubeletProxy(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), sock)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.route("node-a", echoServer(t, "node-a")); err != nil {
		t.Fatal(err)
	}
	resp, c, br := connect(t, sock, "node-a:10250")
	if resp.StatusCode != http.StatusOK {
		t.Fatal(resp.Status)
	}
	done := make(chan error, 1)
	spawn(t, "close", func() { done <- p.close() })
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("close did not return with a tunnel open")
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadString('\n'); err == nil {
		t.Error("the tunnel still reads after close")
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket %s left after close: %v", sock, err)
	}
}

func TestProxyRouteRejects(t *testing.T) {
	p := newKubeletProxy(slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := p.route("", 1234); err == nil {
		t.Error("empty node name accepted")
	}
	for _, port := range []int{0, -1, 70000} {
		if err := p.route("n", port); err == nil || !strings.Contains(err.Error(), strconv.Itoa(port)) {
			t.Errorf("port %d: %v, want an error naming it", port, err)
		}
	}
}

func TestProxySocketPathTooLong(t *testing.T) {
	long := "/" + strings.Repeat("d", 120) + "/egress.sock"
	_, err := startKubeletProxy(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), long)
	if err == nil || !strings.Contains(err.Error(), "shorter state directory") {
		t.Errorf("a %d-byte socket path: %v", len(long), err)
	}
}

// A CONNECT to a pod IP (pods/services proxy, a webhook or aggregated API
// dialled by endpoint) goes through the pod network's dial function, to
// the target as it is; of two pod networks holding the IP, the longer
// prefix wins; a kubelet route still goes where it went.
func TestProxyRoutesPods(t *testing.T) {
	p, sock := startTestProxy(t)
	podPort := echoServer(t, "pod")
	kubeletPort := echoServer(t, "kubelet")
	var mu sync.Mutex
	var asked []string
	via := func(name string) DialFunc {
		return func(ctx context.Context, network, addr string) (net.Conn, error) {
			mu.Lock()
			asked = append(asked, name+" "+network+" "+addr)
			mu.Unlock()
			// The "pod network" here is the host's loopback.
			return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort("127.0.0.1", strconv.Itoa(podPort)))
		}
	}
	if err := p.routeNet(netip.MustParsePrefix("10.244.0.0/16"), via("cluster")); err != nil {
		t.Fatal(err)
	}
	if err := p.routeNet(netip.MustParsePrefix("10.244.1.0/24"), via("node-b")); err != nil {
		t.Fatal(err)
	}
	if err := p.route("192.168.127.10", kubeletPort); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ target, want string }{
		{"10.244.0.5:8443", "pod:hello\n"},
		{"10.244.1.7:443", "pod:hello\n"},
		{"192.168.127.10:10250", "kubelet:hello\n"},
	} {
		resp, conn, br := connect(t, sock, c.target)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("CONNECT %s: %s", c.target, resp.Status)
		}
		fmt.Fprintf(conn, "hello\n")
		if line, err := br.ReadString('\n'); err != nil || line != c.want {
			t.Errorf("through the tunnel to %s: %q, %v; want %q", c.target, line, err, c.want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"cluster tcp 10.244.0.5:8443", "node-b tcp 10.244.1.7:443"}; strings.Join(asked, "|") != strings.Join(want, "|") {
		t.Errorf("the pod networks were asked %q; want %q", asked, want)
	}
}

// A CONNECT to an IP in no pod network, or to a name that is no routed
// kubelet, is refused with a 502 naming the target and what is routed.
func TestProxyUnroutedPod(t *testing.T) {
	p, sock := startTestProxy(t)
	dial := func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("the pod network must not be asked")
	}
	if err := p.routeNet(netip.MustParsePrefix("10.244.0.0/16"), dial); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"10.245.0.5:443", "10.96.0.1:443", "pod.example:443"} {
		resp, _, _ := connect(t, sock, target)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "no route for CONNECT "+target) ||
			!strings.Contains(string(body), "pod networks: [10.244.0.0/16]") || !strings.Contains(string(body), "RoutePodsVia") {
			t.Errorf("CONNECT %s: %s %q; want 502 naming the target, the pod networks and RoutePodsVia", target, resp.Status, body)
		}
	}
	// A pod network whose dial fails: 502 with the dial's error.
	resp, _, _ := connect(t, sock, "10.244.3.4:443")
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "dialing 10.244.3.4:443 for CONNECT 10.244.3.4:443: the pod network must not be asked") {
		t.Errorf("CONNECT through a failing pod network: %s %q; want 502 with the dial's error", resp.Status, body)
	}
}

func TestProxyRouteNetRejects(t *testing.T) {
	p := newKubeletProxy(slog.New(slog.NewTextHandler(io.Discard, nil)))
	dial := func(context.Context, string, string) (net.Conn, error) { return nil, errors.New("unused") }
	for _, c := range []struct {
		prefix netip.Prefix
		dial   DialFunc
		want   string
	}{
		{netip.Prefix{}, dial, "is not a network prefix"},
		{netip.MustParsePrefix("10.244.1.5/16"), dial, "10.244.1.5/16 is not a network prefix"},
		{netip.MustParsePrefix("10.244.0.0/16"), nil, "routing the pod network 10.244.0.0/16: no dial function"},
	} {
		if err := p.routeNet(c.prefix, c.dial); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("routeNet(%s): %v; want an error with %q", c.prefix, err, c.want)
		}
	}
}
