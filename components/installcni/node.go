package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
)

// errNoPodCIDR means the node exists but the controller manager has not
// given it a pod CIDR yet: the caller waits and asks again.
var errNoPodCIDR = errors.New("spec.podCIDR is not set yet")

// node is the part of a v1.Node the installer reads.
type node struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		PodCIDR  string   `json:"podCIDR"`
		PodCIDRs []string `json:"podCIDRs"`
	} `json:"spec"`
}

// parseNode reads the API server's JSON for node want and returns its pod
// CIDR, masked to its network. spec.podCIDR is the one the installer uses
// (podCIDRs[0] equals it on single-stack clusters); when only podCIDRs is
// set, its first entry is.
func parseNode(data []byte, want string) (netip.Prefix, error) {
	var n node
	if err := json.Unmarshal(data, &n); err != nil {
		return netip.Prefix{}, fmt.Errorf("decoding node %s: %w", want, err)
	}
	if n.Metadata.Name != want {
		return netip.Prefix{}, fmt.Errorf("node %s: metadata.name is %q", want, n.Metadata.Name)
	}
	field, cidr := "spec.podCIDR", n.Spec.PodCIDR
	if cidr == "" && len(n.Spec.PodCIDRs) > 0 {
		field, cidr = "spec.podCIDRs[0]", n.Spec.PodCIDRs[0]
	}
	if cidr == "" {
		return netip.Prefix{}, fmt.Errorf("node %s: %w", want, errNoPodCIDR)
	}
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("node %s: %s %q: %w", want, field, cidr, err)
	}
	if p.Addr().Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("node %s: %s %q: a zone has no place in a pod CIDR", want, field, cidr)
	}
	// A range too small for the gateway, the broadcast address and one pod
	// would leave host-local with nothing to give.
	if max := p.Addr().BitLen() - 2; p.Bits() > max {
		return netip.Prefix{}, fmt.Errorf("node %s: %s %q: longer than /%d leaves no address for a pod", want, field, cidr, max)
	}
	return p.Masked(), nil
}
