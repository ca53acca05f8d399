// Package timesync keeps the node's clock on NTP time, as chrony does on
// Amazon Linux 2023 (`makestep 1.0 3`) against the Amazon Time Sync
// Service (169.254.169.123, fd00:ec2::123 on IPv6-only subnets), the
// servers DHCP hands out (option 42, DHCPv6 option 56) and those on the
// kernel command line (berth.ntp).
//
// Machine is the pure part: it takes each source's answers and failures
// and says whether to step or slew the clock, which source to ask next and
// how long to wait. Client is the thin part that acts: it asks servers
// with github.com/beevik/ntp and changes the clock through a Clock, which
// is adjtimex(2) on a node (Adjtimex) and a fake in tests, so host tests
// never touch the host's clock.
package timesync
