package imds

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
)

// IdentityDocument is the part of dynamic/instance-identity/document a node
// uses. EC2 adds fields over time; unknown ones are ignored.
type IdentityDocument struct {
	AccountID        string `json:"accountId"`
	Architecture     string `json:"architecture"`
	AvailabilityZone string `json:"availabilityZone"`
	ImageID          string `json:"imageId"`
	InstanceID       string `json:"instanceId"`
	InstanceType     string `json:"instanceType"`
	PrivateIP        string `json:"privateIp"`
	Region           string `json:"region"`
	Version          string `json:"version"`
}

// maxDocument bounds what is parsed: a real document is well under 1 KiB.
const maxDocument = 64 << 10

// ParseIdentityDocument decodes an instance identity document.
func ParseIdentityDocument(b []byte) (*IdentityDocument, error) {
	if len(b) > maxDocument {
		return nil, fmt.Errorf("identity document: %d bytes, more than the %d allowed", len(b), maxDocument)
	}
	var d IdentityDocument
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("identity document: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("identity document: trailing data after the JSON object")
	}
	return &d, nil
}

// ParseListing splits a category listing or a multi-value leaf (ipv6s,
// local-ipv4s) into its entries. Blank lines and surrounding spaces are
// dropped; sub-categories keep their trailing "/".
func ParseListing(b []byte) []string {
	var out []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out
}

// ParseIPv6s parses the ipv6s leaf of an interface: one IPv6 address per
// line. Zoned (fe80::1%eth0) and IPv4-mapped addresses are refused: EC2 gives
// neither, and a node must not be told to use one.
func ParseIPv6s(b []byte) ([]string, error) {
	entries := ParseListing(b)
	out := make([]string, 0, len(entries))
	for i, e := range entries {
		a, err := netip.ParseAddr(e)
		if err != nil || !a.Is6() || a.Is4In6() || a.Zone() != "" {
			return nil, fmt.Errorf("ipv6s line %d: %q is not an IPv6 address", i+1, e)
		}
		out = append(out, a.String())
	}
	return out, nil
}
