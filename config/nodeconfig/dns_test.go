package nodeconfig

import (
	"strings"
	"testing"
)

func TestClusterDNS(t *testing.T) {
	for cidr, want := range map[string]string{
		"10.100.0.0/16":        "10.100.0.10",
		"172.20.0.0/16":        "172.20.0.10",
		"10.96.0.0/12":         "10.96.0.10",
		"192.168.5.0/24":       "192.168.5.10",
		"fd12:3456:789a::/108": "fd12:3456:789a::a",
		"fd00::/108":           "fd00::a",
		"2001:db8:1:2::/64":    "2001:db8:1:2::a",
	} {
		got, err := ClusterDNS(cidr)
		if err != nil || got != want {
			t.Errorf("ClusterDNS(%q) = %q, %v; want %q", cidr, got, err, want)
		}
	}
	for _, bad := range []string{"", "10.100.0.0", "banana/16", "10.0.0.0/33"} {
		if _, err := ClusterDNS(bad); err == nil || !strings.Contains(err.Error(), "cluster.cidr") {
			t.Errorf("ClusterDNS(%q) = %v, want an error naming cluster.cidr", bad, err)
		}
	}
}
