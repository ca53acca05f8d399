package main

import (
	"encoding/json"
	"fmt"
	"net/netip"
)

// conflistName sorts first in /etc/cni/net.d, where the container runtime
// uses the first file by name.
const conflistName = "10-berth.conflist"

type conflist struct {
	CNIVersion string `json:"cniVersion"`
	Name       string `json:"name"`
	Plugins    []any  `json:"plugins"`
}

type bridgePlugin struct {
	Type        string `json:"type"`
	Bridge      string `json:"bridge"`
	IsGateway   bool   `json:"isGateway"`
	IPMasq      bool   `json:"ipMasq"`
	HairpinMode bool   `json:"hairpinMode"`
	IPAM        ipam   `json:"ipam"`
}

type ipam struct {
	Type   string          `json:"type"`
	Ranges [][]ipamRange   `json:"ranges"`
	Routes []ipamRouteDest `json:"routes"`
}

type ipamRange struct {
	Subnet string `json:"subnet"`
}

type ipamRouteDest struct {
	Dst string `json:"dst"`
}

type portmapPlugin struct {
	Type         string          `json:"type"`
	Capabilities map[string]bool `json:"capabilities"`
}

// renderConflist is the node's CNI network: a cni0 bridge that is the pods'
// gateway and masquerades their traffic leaving the pod CIDR (the node has
// no route to other nodes' pods but through the host), hairpin so a pod
// reaches itself through a Service, host-local addresses from the node's
// pod CIDR with a default route, and portmap for hostPort.
func renderConflist(podCIDR netip.Prefix) ([]byte, error) {
	if !podCIDR.IsValid() {
		return nil, fmt.Errorf("rendering %s: no pod CIDR", conflistName)
	}
	defaultRoute := "0.0.0.0/0"
	if podCIDR.Addr().Is6() {
		defaultRoute = "::/0"
	}
	c := conflist{
		CNIVersion: "1.0.0",
		Name:       "berth",
		Plugins: []any{
			bridgePlugin{
				Type:        "bridge",
				Bridge:      "cni0",
				IsGateway:   true,
				IPMasq:      true,
				HairpinMode: true,
				IPAM: ipam{
					Type:   "host-local",
					Ranges: [][]ipamRange{{{Subnet: podCIDR.Masked().String()}}},
					Routes: []ipamRouteDest{{Dst: defaultRoute}},
				},
			},
			portmapPlugin{Type: "portmap", Capabilities: map[string]bool{"portMappings": true}},
		},
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", conflistName, err)
	}
	return append(b, '\n'), nil
}
