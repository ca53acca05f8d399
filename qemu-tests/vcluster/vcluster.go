// Package vcluster lays out a cluster of berth nodes on one virtual
// network (package vnet), as an EC2 subnet would hold them: each node's
// name, address, MAC, instance ID and private DNS name, its own IMDS
// stand-in serving its user data, the host services (the control plane's
// API server, the registry stand-in) at one virtual address on the
// subnet, and the QEMU configuration that boots it as production does,
// with no berth.imds on its command line and DMI tables that say EC2. A
// node may instead be a machine off EC2 (SourceSeed, SourceURL): plain
// QEMU DMI, no IMDS at all, and its user data on a NoCloud seed volume
// or behind berth.userdata=. TestCluster, TestNoCloud and `make cluster`
// (qemu-tests/cluster) share it, so that a node looks the same to each.
//
// It decides and wires; booting the guests is the caller's (qemu.Start in
// a test, qemu.Boot in a command). It is test code: nothing that ships
// imports it.
package vcluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/berth-node/berth/internal/safe"
	"github.com/berth-node/berth/qemu-tests/imdsserver"
	"github.com/berth-node/berth/qemu-tests/qemu"
	"github.com/berth-node/berth/qemu-tests/seedimage"
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
	// Source is where the node's user data is.
	Source Source
	// IMDS is its IMDS stand-in (SourceIMDS); nil off EC2.
	IMDS *imdsserver.Server
	// Seed is its NoCloud seed image (SourceSeed) and SeedFS its
	// filesystem.
	Seed   string
	SeedFS seedimage.FS
	// UserDataURL is its berth.userdata= (SourceURL).
	UserDataURL string
}

// Source is where a node finds its user data.
type Source string

const (
	// SourceIMDS: an EC2 instance (DMI says so), its IMDS at
	// 169.254.169.254. The default.
	SourceIMDS Source = "imds"
	// SourceSeed: a machine off EC2 with a NoCloud seed volume: vfat on
	// virtio-blk or iso9660 on a SCSI CD drive (NodeSpec.SeedFS).
	SourceSeed Source = "nocloud"
	// SourceURL: a machine off EC2 told berth.userdata=http://... on its
	// command line; the rig serves the user data.
	SourceURL Source = "userdata-url"
)

// NodeSpec is what a caller chooses per node.
type NodeSpec struct {
	// UserData is the node's user data, wherever Source puts it; a seed
	// without it (nil) has no user-data file.
	UserData []byte
	// Source is where the node finds it; empty is SourceIMDS.
	Source Source
	// SeedFS is a seed's filesystem (vfat when empty).
	SeedFS seedimage.FS
	// NetworkConfig is the seed's network-config; nil leaves the file
	// off the seed and the node takes DHCP's answer.
	NetworkConfig []byte
	// IP, when valid, is the node's address in place of its place in the
	// rig's (NodeAt): the one its seed's network-config sets statically.
	// The rig's DHCP would hand it the same, so a test tells static from
	// DHCP by the boot report, not by the address.
	IP netip.Addr
	// MetaData is the seed's meta-data; nil writes the node's own
	// instance-id and its Name as local-hostname (its node name).
	MetaData []byte
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
	// connects each node's NIC to. Seed images are written beside it.
	Socket string
	Log    *slog.Logger
}

// Rig is the network and its nodes.
type Rig struct {
	Net    *vnet.Network
	Nodes  []*Node
	socket string
	// userData serves SourceURL nodes' user data; nil when none.
	userData *http.Server
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
	services := []vnet.Service{
		{Name: "kube-apiserver", Virtual: netip.AddrPortFrom(ServiceAddr, cfg.APIServer.Port()), Host: cfg.APIServer},
		{Name: "registry", Virtual: netip.AddrPortFrom(ServiceAddr, cfg.Registry.Port()), Host: cfg.Registry},
	}
	var vnodes []vnet.Node
	urlData := map[string][]byte{}
	for i, spec := range cfg.Nodes {
		nd := NodeAt(i)
		nd.Source = cmp.Or(spec.Source, SourceIMDS)
		if spec.IP.IsValid() {
			nd.IP = spec.IP
		}
		vn := vnet.Node{Name: nd.Name, MAC: nd.MAC, IP: nd.IP}
		switch nd.Source {
		case SourceIMDS:
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
			vn.IMDS = srv
		case SourceSeed:
			// Off EC2 the node is named by its seed's local-hostname.
			nd.Hostname = nd.Name
			nd.SeedFS = cmp.Or(spec.SeedFS, seedimage.VFAT)
			md := spec.MetaData
			if md == nil {
				md = fmt.Appendf(nil, "instance-id: %s\nlocal-hostname: %s\n", nd.InstanceID, nd.Name)
			}
			files := map[string][]byte{"meta-data": md}
			if spec.UserData != nil {
				files["user-data"] = spec.UserData
			}
			if spec.NetworkConfig != nil {
				files["network-config"] = spec.NetworkConfig
			}
			nd.Seed = filepath.Join(filepath.Dir(cfg.Socket), nd.Name+"-seed."+string(nd.SeedFS))
			if err := seedimage.Write(context.Background(), nd.Seed, nd.SeedFS, files); err != nil {
				return nil, fmt.Errorf("vcluster: %s's NoCloud seed: %w", nd.Name, err)
			}
		case SourceURL:
			// Its user data names it (kubelet's --hostname-override).
			nd.Hostname = nd.Name
			urlData["/"+nd.Name+"/user-data"] = spec.UserData
		default:
			return nil, fmt.Errorf("vcluster: %s's source %q: want %s, %s or %s", nd.Name, nd.Source, SourceIMDS, SourceSeed, SourceURL)
		}
		r.Nodes = append(r.Nodes, &nd)
		vnodes = append(vnodes, vn)
	}
	if len(urlData) > 0 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("vcluster: the user data server: %w", err)
		}
		host := netip.MustParseAddrPort(ln.Addr().String())
		r.userData = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			data, ok := urlData[req.URL.Path]
			if !ok || req.Method != http.MethodGet {
				http.NotFound(w, req)
				return
			}
			w.Write(data)
		})}
		safe.Go(cmp.Or(cfg.Log, slog.Default()), "vcluster user data server", func() { r.userData.Serve(ln) }, nil)
		services = append(services, vnet.Service{Name: "user-data", Virtual: Virtual(host), Host: host})
		for _, nd := range r.Nodes {
			if nd.Source == SourceURL {
				nd.UserDataURL = "http://" + Virtual(host).String() + "/" + nd.Name + "/user-data"
			}
		}
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
func (r *Rig) Close() error {
	if r.userData != nil {
		r.userData.Close()
	}
	return r.Net.Close()
}

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
	// Disk, when set, boots the node from a disk image (make disk's
	// disk.raw) through OVMF with Secure Boot, as a bare-metal
	// appliance or an AMI boots, instead of the image's kernel and
	// initramfs; the command line is its UKI's.
	Disk *DiskBoot
}

// DiskBoot is a disk image and the UEFI variable store that trusts its
// signer.
type DiskBoot struct {
	Path, Vars string
}

// QEMUConfig is node i's QEMU configuration for the image in dir: the
// image's command line without berth.imds (the node finds EC2's IMDS at
// 169.254.169.254, as in production, because its DMI tables say Amazon
// EC2 and carry its instance ID; a node off EC2 has QEMU's own DMI and
// its seed volume or berth.userdata=), 2 GiB and two vCPUs (an idle
// vCPU's TCG thread sleeps, so a busy node takes both cores while the
// other waits), the debug shell, and one NIC on the network.
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
	switch nd.Source {
	case SourceIMDS:
		// What EC2's Nitro instances' DMI says: config/platform reads
		// sys_vendor and the board's asset tag (the instance ID).
		cfg.Extra = append(cfg.Extra, "-smbios", "type=1,manufacturer=Amazon EC2,product="+imdsserver.DefaultInstance().InstanceType,
			"-smbios", "type=2,manufacturer=Amazon EC2,asset="+nd.InstanceID)
	case SourceSeed:
		d := qemu.Disk{Path: nd.Seed, Interface: "virtio", Serial: "cidata"}
		if nd.SeedFS == seedimage.ISO9660 {
			d.Interface = "cdrom"
		}
		cfg.Disks = append(cfg.Disks, d)
	case SourceURL:
		cfg.Append += " berth.userdata=" + nd.UserDataURL
	}
	if b.Disk != nil {
		if nd.Source == SourceURL {
			return qemu.Config{}, fmt.Errorf("vcluster: %s boots from a disk, whose UKI's command line cannot take berth.userdata=", nd.Name)
		}
		cfg.UEFI, cfg.SecureBoot, cfg.Vars = true, true, b.Disk.Vars
		cfg.Kernel, cfg.Initrd, cfg.Append, cfg.RootDisk = "", "", "", nil
		cfg.Disks = append([]qemu.Disk{{Path: b.Disk.Path, Interface: "nvme", Serial: "berth-root-disk"}}, cfg.Disks...)
	}
	cfg.Disks = append(cfg.Disks, b.Disks...)
	if b.RTCBehind > 0 {
		cfg.Extra = append(cfg.Extra, "-rtc", "base="+time.Now().UTC().Add(-b.RTCBehind).Format("2006-01-02T15:04:05"))
	}
	return cfg, nil
}

// SocketIn is the network socket's path in dir: short, since a unix
// socket's path is limited to 108 bytes.
func SocketIn(dir string) string { return filepath.Join(dir, "vnet.sock") }
