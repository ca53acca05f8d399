package network

import (
	"bytes"
	"fmt"
	"net"
	"sort"
	"strings"
)

// LinkInfo is what ChoosePrimary needs to know about one link.
type LinkInfo struct {
	Index int
	Name  string
	MAC   net.HardwareAddr
	// Type is netlink's link type: "device" for a NIC, "veth", "bridge",
	// "dummy", "tuntap", ...
	Type string
	// Virtual is true when the device sits under /sys/devices/virtual.
	Virtual  bool
	Loopback bool
}

// ChoosePrimary picks the interface to configure. With want empty it is
// the physical Ethernet link with the lowest index (the kernel numbers NICs
// in probe order, so on EC2 that is the primary ENI). With want a MAC or a
// name it is that link, whatever its type.
func ChoosePrimary(links []LinkInfo, want string) (LinkInfo, error) {
	sorted := append([]LinkInfo(nil), links...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Index < sorted[j].Index })
	if want != "" {
		if mac, err := net.ParseMAC(want); err == nil {
			for _, l := range sorted {
				if bytes.Equal(l.MAC, mac) {
					return l, nil
				}
			}
			return LinkInfo{}, fmt.Errorf("no link has MAC %s (links: %s)", mac, names(sorted))
		}
		for _, l := range sorted {
			if l.Name == want {
				return l, nil
			}
		}
		return LinkInfo{}, fmt.Errorf("no link named %q (links: %s)", want, names(sorted))
	}
	for _, l := range sorted {
		if l.Loopback || l.Virtual || l.Type != "device" || len(l.MAC) != 6 {
			continue
		}
		return l, nil
	}
	return LinkInfo{}, fmt.Errorf("no physical Ethernet link (links: %s)", names(sorted))
}

func names(links []LinkInfo) string {
	if len(links) == 0 {
		return "none"
	}
	var s []string
	for _, l := range links {
		s = append(s, fmt.Sprintf("%s/%s", l.Name, l.Type))
	}
	return strings.Join(s, ", ")
}
