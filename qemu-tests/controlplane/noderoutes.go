package controlplane

// A cloud's route controller (Kubernetes' route controller in the
// cloud-controller-manager, or a VPC CNI's own) makes each node's pod CIDR
// reachable from the rest of the VPC: a route "podCIDR via the node". The
// test control plane has no cloud, and the control plane itself, on the
// host, must reach pods by their pod IPs (pods and services proxy,
// admission and conversion webhooks, aggregated APIs: see egress.go), so it
// plays that part for a virtual network (vnet): once a node has its
// spec.podCIDR, from the controller-manager's IPAM, and its InternalIP,
// the route goes into the network's gateway; once the node is gone (the
// cloud node controller deletes a terminated instance's Node), its route
// goes too, and its pod CIDR, which the IPAM hands out again, can be
// routed to the node that gets it.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// NodeRoute is one node's pod CIDR and the address it is reached at.
type NodeRoute struct {
	Node    string
	PodCIDR netip.Prefix
	Via     netip.Addr
}

func (r NodeRoute) String() string {
	return fmt.Sprintf("%s via %s (node %s)", r.PodCIDR, r.Via, r.Node)
}

// nodeList is what the route controller reads of GET /api/v1/nodes.
type nodeList struct {
	Items []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			PodCIDR  string   `json:"podCIDR"`
			PodCIDRs []string `json:"podCIDRs"`
		} `json:"spec"`
		Status struct {
			Addresses []struct {
				Type    string `json:"type"`
				Address string `json:"address"`
			} `json:"addresses"`
		} `json:"status"`
	} `json:"items"`
}

// nodeRoutes are the routes the nodes call for: each node's IPv4 pod
// CIDRs via its IPv4 InternalIP. A node without either is not ready for a
// route yet and is left out; a value that does not parse is an error
// naming the node.
func nodeRoutes(list nodeList) ([]NodeRoute, []error) {
	var out []NodeRoute
	var errs []error
	for _, n := range list.Items {
		name := n.Metadata.Name
		var via netip.Addr
		for _, a := range n.Status.Addresses {
			if a.Type != "InternalIP" {
				continue
			}
			ip, err := netip.ParseAddr(a.Address)
			if err != nil {
				errs = append(errs, nodeError{name, fmt.Errorf("InternalIP %q: %w", a.Address, err)})
				continue
			}
			if ip.Is4() && !via.IsValid() {
				via = ip
			}
		}
		cidrs := n.Spec.PodCIDRs
		if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
			cidrs = []string{n.Spec.PodCIDR}
		}
		if !via.IsValid() {
			continue
		}
		for _, s := range cidrs {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				errs = append(errs, nodeError{name, fmt.Errorf("pod CIDR %q: %w", s, err)})
				continue
			}
			if p.Addr().Is4() {
				out = append(out, NodeRoute{Node: name, PodCIDR: p.Masked(), Via: via})
			}
		}
	}
	return out, errs
}

// nodeError is a node's value that does not parse, naming the node.
type nodeError struct {
	node string
	err  error
}

func (e nodeError) Error() string { return "node " + e.node + ": " + e.err.Error() }
func (e nodeError) Unwrap() error { return e.err }

// routeInterval is how often the route controller lists the nodes: a node
// gets its pod CIDR as it registers, and its pods start seconds later.
const routeInterval = approveInterval

// RouteTable is where the route controller puts the nodes' routes
// (vnet.Network's AddRoute and RemoveRoute). Both take the same route
// again as a no-op.
type RouteTable interface {
	AddRoute(NodeRoute) error
	RemoveRoute(NodeRoute) error
}

// RouteNodePods plays a cloud's route controller until ctx ends: every
// routeInterval it lists the nodes, removes each route it added whose
// node is gone or no longer has that pod CIDR and address, and adds one
// for each node's pod CIDR via its InternalIP, logging each change.
// Removals come first, so a pod CIDR the IPAM gave a new node gets that
// node's route at the same list. A failed add or removal is logged once
// for that route and error, and tried again at the next list. A node
// address that does not parse is logged once too, not at every list.
// Only the routes it added are removed: a node whose listing failed
// keeps its route.
func (c *Cluster) RouteNodePods(ctx context.Context, table RouteTable) {
	st := newRouteState()
	t := time.NewTicker(routeInterval)
	defer t.Stop()
	for {
		if err := c.routeOnce(ctx, table, st); err != nil && ctx.Err() == nil {
			c.log.Warn("route controller", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// routeState is what the route controller remembers between lists: the
// routes it added, the last error of each it could not add or remove,
// and the address errors it has logged (still present at the last list).
type routeState struct {
	added    map[NodeRoute]bool
	failed   map[NodeRoute]string
	badAddrs map[string]bool
}

func newRouteState() *routeState {
	return &routeState{added: map[NodeRoute]bool{}, failed: map[NodeRoute]string{}, badAddrs: map[string]bool{}}
}

func (c *Cluster) routeOnce(ctx context.Context, table RouteTable, st *routeState) error {
	var list nodeList
	if err := c.getJSON(ctx, c.hostEndpoint()+"/api/v1/nodes", &list); err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	routes, errs := nodeRoutes(list)
	seen := map[string]bool{}
	for _, err := range errs {
		seen[err.Error()] = true
		if !st.badAddrs[err.Error()] {
			c.log.Warn("route controller: a node's addresses", "err", err)
		}
	}
	st.badAddrs = seen
	for _, r := range slices.SortedFunc(maps.Keys(st.added), func(a, b NodeRoute) int { return strings.Compare(a.String(), b.String()) }) {
		if slices.Contains(routes, r) || slices.ContainsFunc(errs, func(err error) bool {
			var ne nodeError
			return errors.As(err, &ne) && ne.node == r.Node
		}) {
			// Still called for, or its node's addresses did not parse
			// this time: no reason to take it away.
			continue
		}
		if err := table.RemoveRoute(r); err != nil {
			if st.failed[r] != err.Error() {
				st.failed[r] = err.Error()
				c.log.Warn("route controller: removing a gone node's pod route", "route", r.String(), "err", err)
			}
			continue
		}
		delete(st.failed, r)
		delete(st.added, r)
		c.log.Info("pod route removed (as a cloud's route controller does): its node is gone, or has another pod CIDR or address", "node", r.Node, "podCIDR", r.PodCIDR, "via", r.Via)
	}
	for _, r := range routes {
		if st.added[r] {
			continue
		}
		if err := table.AddRoute(r); err != nil {
			if st.failed[r] != err.Error() {
				st.failed[r] = err.Error()
				c.log.Warn("route controller: adding a node's pod route", "route", r.String(), "err", err)
			}
			continue
		}
		delete(st.failed, r)
		st.added[r] = true
		c.log.Info("pod route added (as a cloud's route controller does): the control plane reaches the node's pods by their IPs", "node", r.Node, "podCIDR", r.PodCIDR, "via", r.Via)
	}
	return nil
}
