package nodeconfig

import (
	"encoding/json"
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

// ClusterDNSOf is the cluster DNS address berth plans with, and whether
// the cluster's services are IPv6: from spec.cluster.cidr (ClusterDNS),
// or, with no CIDR, from the first address of the user's
// spec.kubelet.config.clusterDNS (an AL2 bootstrap.sh's --dns-cluster-ip),
// which kubelet's config then carries as given.
func ClusterDNSOf(spec *NodeConfigSpec) (dns string, ipv6 bool, err error) {
	if spec.Cluster.CIDR != "" || spec.Kubelet.Config["clusterDNS"] == nil {
		dns, err := ClusterDNS(spec.Cluster.CIDR)
		if err != nil {
			return "", false, err
		}
		return dns, !netip.MustParseAddr(dns).Is4(), nil
	}
	addrs, _, err := UserClusterDNS(spec.Kubelet.Config)
	if err != nil {
		return "", false, fmt.Errorf("kubelet.config.clusterDNS: %w", err)
	}
	a := netip.MustParseAddr(addrs[0]) // UserClusterDNS parsed it
	return a.String(), !a.Is4(), nil
}

// UserClusterDNS reads clusterDNS from the user's kubelet.config, if set:
// one or more IP addresses, of one family.
func UserClusterDNS(user map[string]json.RawMessage) ([]string, bool, error) {
	raw, ok := user["clusterDNS"]
	if !ok {
		return nil, false, nil
	}
	var addrs []string
	if err := json.Unmarshal(raw, &addrs); err != nil {
		return nil, false, fmt.Errorf("%s is not a list of IP addresses: %w", truncate(string(raw)), err)
	}
	if len(addrs) == 0 {
		return nil, false, fmt.Errorf("empty: want at least one IP address")
	}
	for i, s := range addrs {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return nil, false, fmt.Errorf("[%d] %q is not an IP address", i, truncate(s))
		}
		if first := netip.MustParseAddr(addrs[0]); a.Is4() != first.Is4() {
			return nil, false, fmt.Errorf("[%d] %s is not of the family of [0] %s: kubelet gives pods one family's resolvers", i, a, first)
		}
	}
	return addrs, true, nil
}
