package kubelet

import (
	"cmp"
	"slices"
)

// Sysctl is one kernel tunable, by its dotted name.
type Sysctl struct {
	Key   string
	Value string
	// Module is the kernel module that creates the key (nf_conntrack's
	// table, br_netfilter's bridge hooks); empty for the core kernel's.
	// The apply phase loads it before writing.
	Module string
	// Required says the node cannot work without it: kubelet refuses to
	// start (protectKernelDefaults) or pods cannot reach anything
	// (forwarding). Another key that cannot be written is a warning.
	Required bool
	// User says the value is the user's (the berth.dev/sysctls
	// annotation, init/plan's merge), over berth's default or beside it.
	User bool
}

// Sysctls are the kernel tunables written before kubelet starts, sorted by
// key: the EKS AMI's and Bottlerocket's, so add-ons built for those nodes
// find what they expect.
//
//   - kernel.keys.*, kernel.panic, kernel.panic_on_oops, vm.overcommit_memory,
//     vm.panic_on_oom: kubelet's setupKernelTunables checks these under
//     protectKernelDefaults (nodeadm's default, kept) and will not start
//     without them.
//   - net.ipv4.ip_forward, net.ipv6.conf.all.forwarding (IPv6 clusters):
//     pod networking and kube-proxy; AL2023 sets them from sysctl.d,
//     Bottlerocket's release-sysctl.conf sets net.ipv4.conf.all.forwarding.
//   - fs.inotify.max_user_watches 524288, fs.inotify.max_user_instances
//     8192, vm.max_map_count 524288, kernel.pid_max 4194304,
//     net.ipv4.tcp_keepalive_{time 600,intvl 60,probes 3}: amazon-eks-ami
//     templates/al2023/runtime/rootfs/etc/sysctl.conf.
//   - net.ipv4.ip_local_reserved_ports: amazon-eks-ami's
//     67-eks-reserved-ports.conf, so an ephemeral port (containerd's
//     streaming server) never takes a host-network add-on's port.
//   - net.netfilter.nf_conntrack_max 1048576: Bottlerocket's
//     release-sysctl.conf. kube-proxy sets its own value at start (and the
//     hashsize under /sys/module/nf_conntrack, failing unless sysfs is
//     read-only), so nf_conntrack must be loaded before pods run: Module.
//   - net.bridge.bridge-nf-call-ip{,6}tables 1: bridged pod traffic
//     through iptables (kubenet, Calico, Flannel); br_netfilter creates the
//     keys.
//   - kernel.hung_task_panic 0: the kernel's default, AL2023's and
//     Bottlerocket's. berth's image boots with hung_task_panic=1, so that
//     a hang before berth runs becomes a panic and a reboot (a spent try
//     on a trial boot); from here on a slow disk must not panic a node.
//     The update agent arms it again for a trial boot until it is blessed.
//   - kernel.softlockup_panic 0: the kernel's default, for the same
//     reasons: the image boots with softlockup_panic=1, and a trial boot
//     arms it until blessed; at rest, a CPU held 20 s by a noisy
//     neighbour's steal must not panic a working node.
//   - net.ipv4.conf.{default,lo}.rp_filter 2: systemd's 50-default.conf,
//     which AL2023 and Bottlerocket both ship (loose mode on every
//     interface, all left at 0); the kernel's default would be 0. The VPC
//     CNI sets its own interfaces to 2 as well.
func Sysctls(ipv6 bool) []Sysctl {
	out := []Sysctl{
		{Key: "fs.inotify.max_user_instances", Value: "8192"},
		{Key: "fs.inotify.max_user_watches", Value: "524288"},
		{Key: "kernel.hung_task_panic", Value: "0"},
		{Key: "kernel.keys.root_maxbytes", Value: "25000000", Required: true},
		{Key: "kernel.keys.root_maxkeys", Value: "1000000", Required: true},
		{Key: "kernel.panic", Value: "10", Required: true},
		{Key: "kernel.panic_on_oops", Value: "1", Required: true},
		{Key: "kernel.pid_max", Value: "4194304"},
		{Key: "kernel.softlockup_panic", Value: "0"},
		{Key: "net.bridge.bridge-nf-call-ip6tables", Value: "1", Module: "br_netfilter"},
		{Key: "net.bridge.bridge-nf-call-iptables", Value: "1", Module: "br_netfilter"},
		{Key: "net.ipv4.conf.default.rp_filter", Value: "2"},
		{Key: "net.ipv4.conf.lo.rp_filter", Value: "2"},
		{Key: "net.ipv4.ip_forward", Value: "1", Required: true},
		{Key: "net.ipv4.ip_local_reserved_ports", Value: "2703,9808,9809,10249,10250,10256,61678,61679"},
		{Key: "net.ipv4.tcp_keepalive_intvl", Value: "60"},
		{Key: "net.ipv4.tcp_keepalive_probes", Value: "3"},
		{Key: "net.ipv4.tcp_keepalive_time", Value: "600"},
		{Key: "net.netfilter.nf_conntrack_max", Value: "1048576", Module: "nf_conntrack"},
		{Key: "vm.max_map_count", Value: "524288"},
		{Key: "vm.overcommit_memory", Value: "1", Required: true},
		{Key: "vm.panic_on_oom", Value: "0", Required: true},
	}
	if ipv6 {
		out = append(out, Sysctl{Key: "net.ipv6.conf.all.forwarding", Value: "1", Required: true})
	}
	slices.SortFunc(out, func(a, b Sysctl) int { return cmp.Compare(a.Key, b.Key) })
	return out
}

// SysctlModules are the modules the sysctls need loaded, each once, in
// the sysctls' order.
func SysctlModules(s []Sysctl) []string {
	var mods []string
	for _, x := range s {
		if x.Module != "" && !slices.Contains(mods, x.Module) {
			mods = append(mods, x.Module)
		}
	}
	return mods
}
