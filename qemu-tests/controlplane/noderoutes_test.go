package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/berth-node/berth/internal/syncbuf"
)

// nodesJSON is GET /api/v1/nodes as the apiserver answers it, for nodes
// given as name, pod CIDRs and InternalIP ("" for none).
func nodesJSON(t *testing.T, nodes ...[3]string) nodeList {
	t.Helper()
	var items []map[string]any
	for _, n := range nodes {
		item := map[string]any{"metadata": map[string]any{"name": n[0]}, "spec": map[string]any{}}
		if n[1] != "" {
			cidrs := strings.Split(n[1], ",")
			item["spec"] = map[string]any{"podCIDR": cidrs[0], "podCIDRs": cidrs}
		}
		addrs := []map[string]string{{"type": "Hostname", "address": "ip-" + n[0]}}
		if n[2] != "" {
			addrs = append(addrs, map[string]string{"type": "InternalIP", "address": n[2]})
		}
		item["status"] = map[string]any{"addresses": addrs}
		items = append(items, item)
	}
	b, err := json.Marshal(map[string]any{"kind": "NodeList", "items": items})
	if err != nil {
		t.Fatal(err)
	}
	var l nodeList
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatal(err)
	}
	return l
}

func TestNodeRoutes(t *testing.T) {
	got, errs := nodeRoutes(nodesJSON(t,
		[3]string{"a", "10.244.0.0/24", "192.168.127.10"},
		[3]string{"b", "10.244.1.0/24,fd00:1::/64", "192.168.127.11"}, // dual stack: the IPv4 one
		[3]string{"c", "", "192.168.127.12"},                          // no pod CIDR yet
		[3]string{"d", "10.244.3.0/24", ""},                           // no InternalIP yet
		[3]string{"e", "10.244.4.0/24", "not-an-ip"},
		[3]string{"f", "10.244.5.0/33", "192.168.127.15"},
	))
	want := []NodeRoute{
		{Node: "a", PodCIDR: netip.MustParsePrefix("10.244.0.0/24"), Via: netip.MustParseAddr("192.168.127.10")},
		{Node: "b", PodCIDR: netip.MustParsePrefix("10.244.1.0/24"), Via: netip.MustParseAddr("192.168.127.11")},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("routes %v; want %v", got, want)
	}
	msgs := errors.Join(errs...)
	if len(errs) != 2 || !strings.Contains(msgs.Error(), `node e: InternalIP "not-an-ip"`) || !strings.Contains(msgs.Error(), `node f: pod CIDR "10.244.5.0/33"`) {
		t.Errorf("errors %v; want node e's InternalIP and node f's pod CIDR named", msgs)
	}
}

// routeTable records the route controller's calls; add fails once for
// each route failAdd names, remove once for each failRemove names.
type routeTable struct {
	calls               []string
	failAdd, failRemove map[string]bool
}

func (t *routeTable) AddRoute(r NodeRoute) error {
	t.calls = append(t.calls, "add "+r.String())
	if t.failAdd[r.Node] {
		delete(t.failAdd, r.Node)
		return errors.New("the network said no")
	}
	return nil
}

func (t *routeTable) RemoveRoute(r NodeRoute) error {
	t.calls = append(t.calls, "remove "+r.String())
	if t.failRemove[r.Node] {
		delete(t.failRemove, r.Node)
		return errors.New("the network said no")
	}
	return nil
}

// The route controller against an apiserver stand-in: each node's route
// is added once, however often the nodes are listed; a node that gets its
// pod CIDR later gets its route then; a failed add is tried again; a node
// address that does not parse is logged once, not at every list. Once a
// node is gone its route is removed (tried again if that fails), before
// its pod CIDR is routed to the node the IPAM gave it next; a node whose
// address fails to parse at one list keeps its route.
func TestRouteNodePods(t *testing.T) {
	var mu sync.Mutex
	nodes := [][3]string{{"a", "10.244.0.0/24", "192.168.127.10"}, {"b", "", "192.168.127.11"}, {"e", "10.244.4.0/24", "not-an-ip"}}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/nodes" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		_ = json.NewEncoder(w).Encode(nodesJSON(t, nodes...))
	}))
	t.Cleanup(srv.Close)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	var logged syncbuf.Buffer
	c := &Cluster{log: slog.New(slog.NewTextHandler(&logged, nil)), client: srv.Client()}
	if c.opts.Ports.APIServer, err = strconv.Atoi(port); err != nil {
		t.Fatal(err)
	}
	table := &routeTable{failAdd: map[string]bool{"b": true}, failRemove: map[string]bool{"b": true}}
	st := newRouteState()
	ctx := context.Background()
	lists := func(n int) {
		t.Helper()
		for range n {
			if err := c.routeOnce(ctx, table, st); err != nil {
				t.Fatal(err)
			}
		}
	}
	lists(2)
	mu.Lock()
	nodes[1][1] = "10.244.1.0/24"
	mu.Unlock()
	lists(3)
	want := []string{
		"add 10.244.0.0/24 via 192.168.127.10 (node a)",
		"add 10.244.1.0/24 via 192.168.127.11 (node b)", // refused
		"add 10.244.1.0/24 via 192.168.127.11 (node b)", // tried again, added
	}
	if !reflect.DeepEqual(table.calls, want) {
		t.Errorf("calls %q; want %q", table.calls, want)
	}
	if len(st.added) != 2 || len(st.failed) != 0 {
		t.Errorf("added %v, failed %v; want both routes added and no failure left", st.added, st.failed)
	}
	// node a's address garbled for one list: its route stays. Then node b
	// is gone, and its replacement c gets b's pod CIDR at another address.
	table.calls = nil
	mu.Lock()
	nodes[0][2] = "garbled"
	mu.Unlock()
	lists(1)
	mu.Lock()
	nodes[0][2] = "192.168.127.10"
	nodes[1] = [3]string{"c", "10.244.1.0/24", "192.168.127.12"}
	mu.Unlock()
	lists(3)
	want = []string{
		"remove 10.244.1.0/24 via 192.168.127.11 (node b)", // refused
		"remove 10.244.1.0/24 via 192.168.127.11 (node b)", // tried again, removed
		"add 10.244.1.0/24 via 192.168.127.12 (node c)",
	}
	// While b's route stands, c's is refused by a real table (vnet); this
	// one takes it, so only the order is checked: removal first.
	if len(table.calls) < 3 || !reflect.DeepEqual([]string{table.calls[0], table.calls[2]}, want[:2]) || !slices.Contains(table.calls, want[2]) {
		t.Errorf("calls %q; want %q, node b's removal first and tried again", table.calls, want)
	}
	if st.added[NodeRoute{Node: "b", PodCIDR: netip.MustParsePrefix("10.244.1.0/24"), Via: netip.MustParseAddr("192.168.127.11")}] || len(st.added) != 2 || len(st.failed) != 0 {
		t.Errorf("added %v, failed %v; want a's and c's routes, nothing failed", st.added, st.failed)
	}
	if n := strings.Count(logged.String(), "pod route removed"); n != 1 {
		t.Errorf("the removal logged %d times; want once:\n%s", n, logged.String())
	}
	if n := strings.Count(logged.String(), `InternalIP \"not-an-ip\"`); n != 1 {
		t.Errorf("node e's unparsable InternalIP logged %d times over 5 lists; want once:\n%s", n, logged.String())
	}
	c.client = http.DefaultClient // does not trust the stand-in's certificate
	if err := c.routeOnce(ctx, table, st); err == nil || !strings.Contains(err.Error(), "listing nodes") {
		t.Errorf("routeOnce with the apiserver unreachable: %v; want an error saying it was listing nodes", err)
	}
}
