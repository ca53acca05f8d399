package nodeconfig

import (
	"fmt"
	"net/netip"
	"strings"
)

// ClusterDNS is the cluster DNS service address EKS's CoreDNS add-on uses
// for a service CIDR: the CIDR's address with its last IPv4 octet set to 10,
// or for IPv6 its last 16-bit group set to 0xa (nodeadm appends "a" to the
// written address, which is the same thing for every CIDR that ends in
// "::"). Like nodeadm, the address is taken as written, not masked.
func ClusterDNS(cidr string) (string, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(cidr))
	if err != nil {
		return "", fmt.Errorf("cluster.cidr %q: %w", cidr, err)
	}
	a := p.Addr()
	if a.Is4() {
		b := a.As4()
		b[3] = 10
		return netip.AddrFrom4(b).String(), nil
	}
	b := a.As16()
	b[14], b[15] = 0, 10
	return netip.AddrFrom16(b).String(), nil
}
