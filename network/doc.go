// Package network brings up the node's network at boot: loopback, the
// primary NIC by DHCPv4 (kept alive by a background renewer: T1 unicast
// renew, T2 broadcast rebind, loud loss, rediscovery with backoff) or by
// static configuration from the kernel command line, IPv6 router
// advertisements (SLAAC) and optionally DHCPv6, the hostname and
// /etc/resolv.conf (package resolvconf).
//
// The package is split in two halves. The deciding half is pure and
// unit-tested anywhere: ParseConfig (kernel command line → Config),
// ChoosePrimary (link list → the interface to configure), LeaseFromACK and
// Lease6FromReply (a server's answer → addresses, routes, MTU, DNS,
// timers) and the retry/timer arithmetic. The acting half talks netlink
// and opens sockets; it is tested in network namespaces joined by a veth
// with DHCP servers inside the test.
//
// Every wait has a deadline: the link (LinkTimeout), the kernel's random
// pool and DHCPv4 (Timeout, for the whole of Up), IPv6 (IPv6Timeout, which
// never fails an IPv4 boot).
package network
