package imds

// Metadata is what a node needs to know about itself from IMDS. It is the
// instance half of the plan's inputs; the plan never calls IMDS itself.
type Metadata struct {
	InstanceID       string   `json:"instanceId"`
	InstanceType     string   `json:"instanceType"`
	LocalIPv4        string   `json:"localIpv4,omitempty"`
	LocalHostname    string   `json:"localHostname,omitempty"`
	MAC              string   `json:"mac,omitempty"`
	AvailabilityZone string   `json:"availabilityZone"`
	Region           string   `json:"region"`
	AccountID        string   `json:"accountId,omitempty"`
	IPv6s            []string `json:"ipv6s,omitempty"`
	// IdentityDocument is the raw instance identity document JSON.
	IdentityDocument []byte `json:"-"`
}
