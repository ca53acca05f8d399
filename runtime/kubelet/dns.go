package kubelet

import (
	"fmt"
	"net/netip"
	"strings"
)

// IsIPv6CIDR says whether the cluster's service CIDR is IPv6, which picks
// the node IP family.
func IsIPv6CIDR(cidr string) (bool, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(cidr))
	if err != nil {
		return false, fmt.Errorf("cluster.cidr %q: %w", cidr, err)
	}
	return !p.Addr().Is4(), nil
}
