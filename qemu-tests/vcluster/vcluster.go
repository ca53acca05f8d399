// Package vcluster lays out a cluster of berth nodes on one virtual
// network (package vnet), as an EC2 subnet would hold them: each node's
// name, address, MAC, instance ID and private DNS name, its own IMDS
// stand-in serving its user data, the host services (the control plane's
// API server, the registry stand-in) at one virtual address on the
// subnet, and the QEMU configuration that boots it as production does,
// with no berth.imds on its command line. TestCluster and `make cluster`
// (qemu-tests/cluster) share it, so that a node looks the same to each.
//
// It decides and wires; booting the guests is the caller's (qemu.Start in
// a test, qemu.Boot in a command). It is test code: nothing that ships
// imports it.
package vcluster

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/berth-node/berth/qemu-tests/imdsserver"
	"github.com/berth-node/berth/qemu-tests/qemu"
	"github.com/berth-node/berth/qemu-tests/vnet"
)

// MaxNodes bounds a rig: node addresses are .10 to .10+MaxNodes-1 of the
// subnet and their names node-a, node-b, ...
const MaxNodes = 16

// ServiceAddr is where the nodes reach the host's services: one address
// on the subnet that no node has, as a VPC endpoint would be.
var ServiceAddr = netip.MustParseAddr("192.168.127.254")

// SearchDomain is the region's domain DHCP gives, as EC2 does.
const SearchDomain = "us-west-2.compute.internal"

// Node is one node of the rig.
type Node struct {
	// Name tells the node apart in logs and on the host: node-a, node-b...
	Name       string
	IP         netip.Addr
	MAC        net.HardwareAddr
	InstanceID string
	// Hostname is the instance's private DNS name, which kubelet takes as
	// the node name (ip-192-168-127-10.us-west-2.compute.internal).
	Hostname string
	IMDS     *imdsserver.Server
}

// NodeSpec is what a caller chooses per node.
type NodeSpec struct {
	// UserData is what the node's IMDS serves at user-data.
	UserData []byte
}

// Config describes a rig.
type Config struct {
	Nodes []NodeSpec
	// APIServer and Registry are the host's loopback addresses of the
	// control plane's API server and of the registry stand-in; the nodes
	// reach each at ServiceAddr with the same port.
	APIServer, Registry netip.AddrPort
	// More are further host services the nodes reach at ServiceAddr with
	// the same port (a test's own listener), each on the host's loopback.
	More []vnet.Service
	// Socket is the path of the network's listening socket, which QEMU
	// connects each node's NIC to.
	Socket string
	Log    *slog.Logger
}

// Rig is the network and its nodes.
type Rig struct {
	Net    *vnet.Network
	Nodes  []*Node
	socket string
}

// NodeAt is node i's identity: its name, address, MAC, instance ID and
// private DNS name (node-a is 192.168.127.10, i-0aaaaaaaaaaaaaaa1).
func NodeAt(i int) Node {
	letter := byte('a' + i)
	ip := netip.AddrFrom4([4]byte{192, 168, 127, byte(10 + i)})
	return Node{
		Name:       "node-" + string(letter),
		IP:         ip,
		MAC:        net.HardwareAddr{0x52, 0x54, 0x00, 0xb3, 0x27, byte(0x0a + i)},
		InstanceID: fmt.Sprintf("i-0%s%d", strings.Repeat(string(letter), 15), i+1),
		Hostname:   "ip-" + strings.ReplaceAll(ip.String(), ".", "-") + "." + SearchDomain,
	}
}

// New makes the network and each node's IMDS, and listens on
// cfg.Socket. Close undoes it.
func New(cfg Config) (*Rig, error) {
	if n := len(cfg.Nodes); n == 0 || n > MaxNodes {
		return nil, fmt.Errorf("vcluster: %d nodes: want 1 to %d", n, MaxNodes)
	}
	for _, a := range []struct {
		name string
		ap   netip.AddrPort
	}{{"API server", cfg.APIServer}, {"registry", cfg.Registry}} {
		if !a.ap.IsValid() || !a.ap.Addr().IsLoopback() {
			return nil, fmt.Errorf("vcluster: the %s's host address %q: want an address on the host's loopback", a.name, a.ap)
		}
	}
	r := &Rig{socket: cfg.Socket}
	var vnodes []vnet.Node
	for i, spec := range cfg.Nodes {
		nd := NodeAt(i)
		in := imdsserver.DefaultInstance()
		in.InstanceID = nd.InstanceID
		in.LocalIPv4 = nd.IP.String()
		in.LocalHostname = nd.Hostname
		in.MAC = nd.MAC.String()
		srv, err := imdsserver.New(imdsserver.Config{Instance: in, UserData: spec.UserData})
		if err != nil {
			return nil, fmt.Errorf("vcluster: %s's IMDS stand-in: %w", nd.Name, err)
		}
		nd.IMDS = srv
		r.Nodes = append(r.Nodes, &nd)
		vnodes = append(vnodes, vnet.Node{Name: nd.Name, MAC: nd.MAC, IP: nd.IP, IMDS: srv})
	}
	services := []vnet.Service{
		{Name: "kube-apiserver", Virtual: netip.AddrPortFrom(ServiceAddr, cfg.APIServer.Port()), Host: cfg.APIServer},
		{Name: "registry", Virtual: netip.AddrPortFrom(ServiceAddr, cfg.Registry.Port()), Host: cfg.Registry},
	}
	for _, m := range cfg.More {
		services = append(services, vnet.Service{Name: m.Name, Virtual: Virtual(m.Host), Host: m.Host})
	}
	n, err := vnet.New(vnet.Config{Nodes: vnodes, Services: services, SearchDomain: SearchDomain, Log: cfg.Log})
	if err != nil {
		return nil, fmt.Errorf("vcluster: the virtual network: %w", err)
	}
	r.Net = n
	if err := n.Listen(cfg.Socket); err != nil {
		return nil, errors.Join(fmt.Errorf("vcluster: listening on %s: %w", cfg.Socket, err), n.Close())
	}
	return r, nil
}

// Close stops the network; the guests on it lose their link.
func (r *Rig) Close() error { return r.Net.Close() }

// Virtual is where the nodes reach a host service at host: ServiceAddr
// with host's port.
func Virtual(host netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ServiceAddr, host.Port())
}

// Boot is how a node boots.
type Boot struct {
	// RTCBehind sets the node's clock that far behind at power-on, for a
	// test of the time step.
	RTCBehind time.Duration
	// Disks are added to the node (instance-store NVMe disks).
	Disks   []qemu.Disk
	Timeout time.Duration
}

// QEMUConfig is node i's QEMU configuration for the image in dir: the
// image's command line without berth.imds (the node finds EC2's IMDS at
// 169.254.169.254, as in production), 2 GiB and two vCPUs (an idle vCPU's
// TCG thread sleeps, so a busy node takes both cores while the other
// waits), the debug shell, and one NIC on the network.
func (r *Rig) QEMUConfig(dir string, i int, b Boot) (qemu.Config, error) {
	if i < 0 || i >= len(r.Nodes) {
		return qemu.Config{}, fmt.Errorf("vcluster: no node %d (the rig has %d)", i, len(r.Nodes))
	}
	nd := r.Nodes[i]
	cfg := qemu.ImageConfig(dir, "")
	cfg.Name = nd.Name
	// ImageConfig turns IMDS off for QEMU's user network, which has none;
	// this network has one at EC2's address.
	cfg.Append = strings.Join(slices.DeleteFunc(strings.Fields(cfg.Append), func(w string) bool {
		return strings.HasPrefix(w, "berth.imds=")
	}), " ")
	if strings.Contains(cfg.Append, "berth.imds") {
		return qemu.Config{}, fmt.Errorf("vcluster: the image's command line names berth.imds (%q): the nodes must boot as production does", cfg.Append)
	}
	cfg.Shell = true
	cfg.MemoryMB = 2048
	cfg.CPUs = 2
	cfg.Timeout = b.Timeout
	cfg.NICs = []qemu.NIC{{MAC: nd.MAC.String(), Stream: r.socket}}
	cfg.Disks = append(cfg.Disks, b.Disks...)
	if b.RTCBehind > 0 {
		cfg.Extra = append(cfg.Extra, "-rtc", "base="+time.Now().UTC().Add(-b.RTCBehind).Format("2006-01-02T15:04:05"))
	}
	return cfg, nil
}

// SocketIn is the network socket's path in dir: short, since a unix
// socket's path is limited to 108 bytes.
func SocketIn(dir string) string { return filepath.Join(dir, "vnet.sock") }
