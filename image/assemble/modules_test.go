package assemble

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berth-node/berth/image/fstree"
	"github.com/berth-node/berth/image/spec"
	"github.com/berth-node/berth/init/kmod"
)

// hostContractModules are the modules the host network contract promises
// (docs/host-contract.md), by who needs them. A module dropped from
// image/spec.yaml breaks an add-on only on a real cluster, so the list is
// pinned here.
var hostContractModules = map[string][]string{
	"iptables, both back ends": {"nfnetlink", "nf_tables", "nft_compat", "ip_tables", "ip6_tables",
		"iptable_filter", "iptable_nat", "iptable_mangle", "iptable_raw",
		"ip6table_filter", "ip6table_nat", "ip6table_mangle", "ip6table_raw", "ipt_REJECT", "ip6t_REJECT"},
	"kube-proxy iptables": {"xt_tcpudp", "xt_statistic", "xt_addrtype", "xt_comment", "xt_conntrack", "xt_mark",
		"xt_MASQUERADE", "xt_multiport", "xt_nat", "xt_recent", "xt_nfacct", "nfnetlink_acct"},
	"kube-proxy nftables": {"nft_ct", "nft_nat", "nft_chain_nat", "nft_fib_inet", "nft_fib_ipv4", "nft_fib_ipv6",
		"nft_masq", "nft_numgen", "nft_reject_inet"},
	"kube-proxy ipvs": {"ip_vs", "ip_vs_rr", "ip_vs_wrr", "ip_vs_sh", "ip_vs_lc", "dummy", "ip_set", "xt_set",
		"ip_set_hash_ip", "ip_set_hash_ipport", "ip_set_hash_ipportip", "ip_set_hash_ipportnet", "ip_set_hash_net",
		"ip_set_bitmap_port", "nf_conntrack_netlink"},
	"VPC CNI":   {"xt_connmark", "8021q", "cls_bpf", "sch_ingress", "veth"},
	"Cilium":    {"xt_socket", "xt_TPROXY", "xt_CT", "vxlan", "geneve", "cls_bpf", "sch_ingress"},
	"Calico":    {"ipip", "vxlan", "ipt_rpfilter", "xt_set", "xt_u32", "xt_bpf"},
	"EFS CSI":   {"nfsv4", "nfs", "sunrpc"},
	"pods, CNI": {"bridge", "veth", "br_netfilter", "overlay"},
}

// kernelRequests are names as the kernel passes them to /sbin/modprobe
// (request_module) or as iptables' userspace runs it, and the module each
// must load: the aliases are what berth's modprobe resolves, so a module
// shipped without the alias the kernel asks for would never load.
var kernelRequests = map[string]string{
	"net-pf-16-proto-12":             "nfnetlink", // NETLINK_NETFILTER socket
	"nfnetlink-subsys-10":            "nf_tables",
	"nfnetlink-subsys-11":            "nft_compat", // iptables-nft's revision probes
	"nfnetlink-subsys-1":             "nf_conntrack_netlink",
	"nfnetlink-subsys-6":             "ip_set",
	"nft-chain-2-nat":                "nft_chain_nat",
	"nft-chain-10-nat":               "nft_chain_nat",
	"nft-expr-ct":                    "nft_ct",
	"nft-expr-nat":                   "nft_nat",
	"nft-expr-masq":                  "nft_masq",
	"nft-expr-numgen":                "nft_numgen",
	"nft-expr-1-fib":                 "nft_fib_inet",
	"nft-expr-2-fib":                 "nft_fib_ipv4",
	"nft-expr-1-reject":              "nft_reject_inet",
	"nft-expr-match":                 "nft_compat",
	"nft-expr-target":                "nft_compat",
	"ip_tables":                      "ip_tables", // iptables-legacy runs modprobe itself
	"ip6_tables":                     "ip6_tables",
	"iptable_filter":                 "iptable_filter",
	"iptable_nat":                    "iptable_nat",
	"iptable_mangle":                 "iptable_mangle",
	"iptable_raw":                    "iptable_raw",
	"ip6table_nat":                   "ip6table_nat",
	"ip6table_mangle":                "ip6table_mangle",
	"ipt_tcp":                        "xt_tcpudp",
	"ip6t_udp":                       "xt_tcpudp",
	"ipt_statistic":                  "xt_statistic",
	"ip6t_statistic":                 "xt_statistic",
	"ipt_addrtype":                   "xt_addrtype",
	"ipt_comment":                    "xt_comment",
	"ipt_conntrack":                  "xt_conntrack",
	"ipt_mark":                       "xt_mark",
	"ipt_MARK":                       "xt_mark",
	"ipt_connmark":                   "xt_connmark",
	"ipt_CONNMARK":                   "xt_connmark",
	"ipt_MASQUERADE":                 "xt_MASQUERADE",
	"ip6t_MASQUERADE":                "xt_MASQUERADE",
	"ipt_multiport":                  "xt_multiport",
	"ipt_recent":                     "xt_recent",
	"ip6t_recent":                    "xt_recent",
	"ipt_nfacct":                     "xt_nfacct",
	"nfnetlink-subsys-7":             "nfnetlink_acct",
	"ipt_SNAT":                       "xt_nat",
	"ipt_DNAT":                       "xt_nat",
	"ipt_set":                        "xt_set",
	"ipt_SET":                        "xt_set",
	"ipt_socket":                     "xt_socket",
	"ipt_TPROXY":                     "xt_TPROXY",
	"ipt_CT":                         "xt_CT",
	"ipt_NOTRACK":                    "xt_CT",
	"ipt_physdev":                    "xt_physdev",
	"ipt_rpfilter":                   "ipt_rpfilter",
	"ip6t_rpfilter":                  "ip6t_rpfilter",
	"ipt_bpf":                        "xt_bpf",
	"ipt_REJECT":                     "ipt_REJECT",
	"ip6t_REJECT":                    "ip6t_REJECT",
	"ipt_NFLOG":                      "xt_NFLOG",
	"ipt_limit":                      "xt_limit",
	"ip_set_hash:ip":                 "ip_set_hash_ip",
	"ip_set_hash:ip,port":            "ip_set_hash_ipport",
	"ip_set_hash:ip,port,ip":         "ip_set_hash_ipportip",
	"ip_set_hash:ip,port,net":        "ip_set_hash_ipportnet",
	"ip_set_hash:net":                "ip_set_hash_net",
	"ip_set_bitmap:port":             "ip_set_bitmap_port",
	"ip_set_list:set":                "ip_set_list_set",
	"net-pf-16-proto-16-family-IPVS": "ip_vs",
	"ip_vs_rr":                       "ip_vs_rr",
	"ip_vs_wrr":                      "ip_vs_wrr",
	"ip_vs_sh":                       "ip_vs_sh",
	"ip_vs_lc":                       "ip_vs_lc",
	"rtnl-link-dummy":                "dummy",
	"rtnl-link-vxlan":                "vxlan",
	"rtnl-link-geneve":               "geneve",
	"rtnl-link-ipip":                 "ipip",
	"rtnl-link-vlan":                 "8021q",
	"rtnl-link-veth":                 "veth",
	"rtnl-link-bridge":               "bridge",
	"cls_bpf":                        "cls_bpf",
	"sch_ingress":                    "sch_ingress",
	"sch_clsact":                     "sch_ingress",
	"sch_fq":                         "sch_fq",
	"fs-nfs4":                        "nfs",
	"nfsv4":                          "nfsv4",
}

func repoSpec(t *testing.T) *spec.Spec {
	t.Helper()
	s, err := spec.Load("../spec.yaml", map[string]string{"NODE_COMPONENTS": "build/components/node"})
	if err != nil {
		t.Fatal(err)
	}
	def, err := s.Resolve("default")
	if err != nil {
		t.Fatal(err)
	}
	return def
}

// repoModules is the default image's module selection against the Debian
// kernel it is built with (make kernel's, or BERTH_KERNEL_DIR), and that
// kernel's version. make test-unit fetches the kernel first, so in CI the
// tests that need it run; elsewhere they say loudly that they did not.
func repoModules(t *testing.T) (*moduleSet, string) {
	t.Helper()
	kernel := os.Getenv("BERTH_KERNEL_DIR")
	if kernel == "" {
		kernel = "../../build/kernel/current"
	}
	kv, err := KernelVersion(kernel)
	if err != nil {
		t.Skipf("!!! SKIPPED: NO KERNEL PACKAGE (%v): run make kernel, or set BERTH_KERNEL_DIR; %s did NOT run !!!", err, t.Name())
	}
	mods, err := selectModules(slog.New(slog.NewTextHandler(io.Discard, nil)), kernel, kv, repoSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	return mods, kv
}

// The default image ships every module of the host contract, and preloads
// none of them: the kernel asks for each when it is first needed.
func TestSpecShipsHostContractModules(t *testing.T) {
	def := repoSpec(t)
	for who, mods := range hostContractModules {
		for _, m := range mods {
			if !slices.Contains(def.Modules, m) && !slices.Contains(def.Modules, m+"?") {
				t.Errorf("image/spec.yaml does not ship %s, which %s needs", m, who)
			}
		}
	}
	for _, p := range def.Preload {
		if p == "br_netfilter" {
			continue // bridged pod traffic must see iptables from the first pod on
		}
		if strings.HasPrefix(p, "nf") || strings.HasPrefix(p, "xt_") || strings.HasPrefix(p, "ip") {
			t.Errorf("%s is preloaded; the kernel loads netfilter modules on demand", p)
		}
	}
}

// The default image has the host's iptables under its usual names, both
// back ends, with the extensions it dlopens.
func TestSpecShipsHostIptables(t *testing.T) {
	def := repoSpec(t)
	names := map[string]bool{}
	for _, b := range def.Root.Binaries {
		names[b.Name] = true
		for _, l := range b.Links {
			names[l] = true
		}
	}
	for _, n := range []string{"xtables-nft-multi", "xtables-legacy-multi", "iptables", "ip6tables", "iptables-save",
		"iptables-restore", "ip6tables-save", "ip6tables-restore", "iptables-legacy", "ip6tables-legacy", "iptables-nft"} {
		if !names[n] {
			t.Errorf("image/spec.yaml's root has no %s", n)
		}
	}
	// The multiarch tuple is the image's: iptables looks in
	// /usr/lib/aarch64-linux-gnu/xtables on arm64.
	if !slices.ContainsFunc(def.Root.Plugins, func(p spec.Plugins) bool { return p.Dir == "/usr/lib/"+spec.MultiarchVar+"/xtables" }) {
		t.Error("image/spec.yaml ships no iptables extensions (/usr/lib/${MULTIARCH}/xtables)")
	}
}

// Against the Debian kernel the image is built with, every request the
// kernel makes for the host contract's modules resolves, through the
// modules.dep/modules.alias/modules.softdep the image ships, to the module
// that answers it, exactly as berth's /sbin/modprobe resolves it on a node.
func TestHostContractRequestsResolve(t *testing.T) {
	mods, kv := repoModules(t)
	// The root's index, which serves the kernel's requests once the root
	// is mounted (none of these modules is early).
	tree := fstree.New()
	if err := mods.add(tree, mods.all); err != nil {
		t.Fatal(err)
	}
	// The index files as the image has them, beside the host's modules.
	dir := t.TempDir()
	base := "/lib/modules/" + kv + "/"
	for _, e := range tree.Entries() {
		if !strings.HasPrefix(e.Path, base+"modules.") {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, strings.TrimPrefix(e.Path, base)), e.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ix, err := kmod.LoadIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	for req, want := range kernelRequests {
		if !ix.Known(req) {
			t.Errorf("modprobe %s: no shipped module answers (want %s)", req, want)
			continue
		}
		order, err := ix.Resolve(req)
		if err != nil {
			t.Errorf("modprobe %s: %v", req, err)
			continue
		}
		if !slices.Contains(order, want) {
			t.Errorf("modprobe %s loads %v, want %s among them", req, order, want)
		}
	}
	t.Logf("%d modules shipped for kernel %s", len(mods.all), kv)
}

// On the real kernel, the initramfs carries what berth loads before the
// root is mounted (the root disk's drivers and verity, the preload list,
// every device driver) and none of the host contract's on-demand modules,
// which come from the root.
func TestSpecEarlyModules(t *testing.T) {
	def := repoSpec(t)
	mods, _ := repoModules(t)
	early := map[string]bool{}
	var size, total int64
	for _, m := range mods.early {
		early[m.Name] = true
		st, err := os.Stat(filepath.Join(mods.dir, m.Path))
		if err != nil {
			t.Fatal(err)
		}
		size += st.Size()
	}
	for _, m := range mods.all {
		st, _ := os.Stat(filepath.Join(mods.dir, m.Path))
		total += st.Size()
	}
	// The root phase's own loads (mounts/diskboot: virtio_blk, dm_verity;
	// a loop-mounted root: loop, erofs) and the devices QEMU and EC2 give.
	for _, m := range append([]string{"virtio_blk", "dm_verity", "dm_mod", "loop", "erofs", "virtio_pci", "virtio_net", "nvme", "ena"}, def.Preload...) {
		if !early[m] {
			t.Errorf("%s is not in the initramfs; berth loads it before the root is mounted", m)
		}
	}
	for who, ms := range hostContractModules {
		for _, m := range ms {
			if early[m] && !slices.Contains(def.Preload, m) && m != "bridge" {
				t.Errorf("%s (for %s) is in the initramfs; it is loaded on demand, from the root", m, who)
			}
		}
	}
	for _, m := range mods.all {
		if isDeviceDriver(m) && !early[m.Name] {
			t.Errorf("device driver %s is not in the initramfs", m.Name)
		}
	}
	t.Logf("initramfs: %d of %d modules, %d of %d bytes", len(mods.early), len(mods.all), size, total)
}
