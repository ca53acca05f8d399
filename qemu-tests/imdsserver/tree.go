package imdsserver

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Instance is the metadata the stand-in serves. Fields left empty are left
// out of the tree (so a GET for them is a 404, as on EC2 when, for example,
// an IPv6-only instance has no local-ipv4).
type Instance struct {
	InstanceID       string
	InstanceType     string
	ImageID          string
	AccountID        string
	AvailabilityZone string
	// AvailabilityZoneID is the zone's stable ID (use2-az1), not its name.
	AvailabilityZoneID string
	Region             string
	LocalIPv4          string
	LocalHostname      string
	MAC                string
	IPv6s              []string
	// PendingTime is the identity document's pendingTime; zero means a fixed
	// date so the document is byte-identical between runs.
	PendingTime time.Time
	// Role, when set, serves iam/info and iam/security-credentials/<role>.
	Role *Role
}

// Role is an instance profile role and the credentials IMDS hands out for it.
type Role struct {
	Name               string
	InstanceProfileARN string
	InstanceProfileID  string
	AccessKeyID        string
	SecretAccessKey    string
	Token              string
	Expiration         time.Time
	LastUpdated        time.Time
}

// DefaultInstance is a plausible m5.large in us-west-2, used when a test does
// not care about the values.
func DefaultInstance() Instance {
	return Instance{
		InstanceID:         "i-0123456789abcdef0",
		InstanceType:       "m5.large",
		ImageID:            "ami-0abcdef1234567890",
		AccountID:          "111122223333",
		AvailabilityZone:   "us-west-2a",
		AvailabilityZoneID: "usw2-az1",
		Region:             "us-west-2",
		LocalIPv4:          "10.0.1.23",
		LocalHostname:      "ip-10-0-1-23.us-west-2.compute.internal",
		MAC:                "0a:1b:2c:3d:4e:5f",
	}
}

// tree is the served metadata: leaves by their path under /latest/ (no
// leading slash) and, for every directory, its sorted entries, with a
// trailing "/" on those that are directories themselves, as EC2 lists them.
type tree struct {
	leaves map[string][]byte
	dirs   map[string][]string
}

// fixedPendingTime keeps generated identity documents deterministic.
func fixedPendingTime() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }

// Notices are the instance's lifecycle notices, which EC2 serves only
// while they stand: a path without one is a 404 (and missing from its
// listing).
type Notices struct {
	// SpotAction and SpotTime make spot/instance-action (and, for
	// "terminate", spot/termination-time); SpotAction "" means none.
	SpotAction string
	SpotTime   time.Time
	// Rebalance, when not zero, is events/recommendations/rebalance's
	// noticeTime.
	Rebalance time.Time
	// LifecycleState is autoscaling/target-lifecycle-state: InService,
	// Terminated, Warmed:Stopped...; "" for an instance in no ASG.
	LifecycleState string
}

func buildTree(in Instance, userData []byte, ev Notices) (*tree, error) {
	leaves := map[string][]byte{}
	put := func(p, v string) {
		if v != "" {
			leaves[p] = []byte(v)
		}
	}
	const md = "meta-data/"
	put(md+"ami-id", in.ImageID)
	put(md+"ami-launch-index", "0")
	put(md+"instance-id", in.InstanceID)
	put(md+"instance-type", in.InstanceType)
	put(md+"local-ipv4", in.LocalIPv4)
	put(md+"local-hostname", in.LocalHostname)
	put(md+"hostname", in.LocalHostname)
	put(md+"mac", in.MAC)
	put(md+"placement/availability-zone", in.AvailabilityZone)
	put(md+"placement/availability-zone-id", in.AvailabilityZoneID)
	put(md+"placement/region", in.Region)
	put(md+"services/domain", "amazonaws.com")
	put(md+"services/partition", "aws")
	if in.MAC != "" {
		nic := md + "network/interfaces/macs/" + in.MAC + "/"
		put(nic+"device-number", "0")
		put(nic+"mac", in.MAC)
		put(nic+"local-ipv4s", in.LocalIPv4)
		put(nic+"local-hostname", in.LocalHostname)
		put(nic+"ipv6s", strings.Join(in.IPv6s, "\n"))
	}
	if r := in.Role; r != nil {
		if r.Name == "" || strings.Contains(r.Name, "/") {
			return nil, fmt.Errorf("imdsserver: role name %q: must be non-empty and contain no '/'", r.Name)
		}
		info, err := iamInfo(r)
		if err != nil {
			return nil, err
		}
		leaves[md+"iam/info"] = info
		creds, err := roleCredentials(r)
		if err != nil {
			return nil, err
		}
		leaves[md+"iam/security-credentials/"+r.Name] = creds
	}
	if ev.SpotAction != "" {
		t := ev.SpotTime.UTC().Format(time.RFC3339)
		b, err := json.Marshal(struct {
			Action string `json:"action"`
			Time   string `json:"time"`
		}{ev.SpotAction, t})
		if err != nil {
			return nil, fmt.Errorf("imdsserver: encoding spot/instance-action: %w", err)
		}
		leaves[md+"spot/instance-action"] = b
		if ev.SpotAction == "terminate" {
			put(md+"spot/termination-time", t)
		}
	}
	if !ev.Rebalance.IsZero() {
		leaves[md+"events/recommendations/rebalance"] = []byte(`{"noticeTime":"` + ev.Rebalance.UTC().Format(time.RFC3339) + `"}`)
	}
	put(md+"autoscaling/target-lifecycle-state", ev.LifecycleState)
	leaves["dynamic/instance-identity/document"] = identityDocument(in)
	if userData != nil {
		leaves["user-data"] = append([]byte(nil), userData...)
	}

	dirs := map[string][]string{}
	seen := map[string]bool{}
	for p := range leaves {
		// Walk up from the leaf, adding each name to its parent's listing.
		child := p
		for {
			i := strings.LastIndex(strings.TrimSuffix(child, "/"), "/")
			parent := ""
			if i >= 0 {
				parent = child[:i+1]
			}
			name := strings.TrimPrefix(child, parent)
			key := parent + "\x00" + name
			if !seen[key] {
				seen[key] = true
				dirs[parent] = append(dirs[parent], name)
			}
			if parent == "" {
				break
			}
			child = parent
		}
	}
	for d := range dirs {
		sort.Strings(dirs[d])
	}
	// EC2 lists the top of /latest/ without trailing slashes.
	for i, n := range dirs[""] {
		dirs[""][i] = strings.TrimSuffix(n, "/")
	}
	return &tree{leaves: leaves, dirs: dirs}, nil
}

// identityDocument renders the document the way EC2 does: pretty-printed with
// " : " separators, fields in EC2's order, nulls where EC2 has them.
func identityDocument(in Instance) []byte {
	pt := in.PendingTime
	if pt.IsZero() {
		pt = fixedPendingTime()
	}
	q := func(s string) string {
		b, _ := json.Marshal(s) // a string always marshals
		return string(b)
	}
	fields := []struct{ k, v string }{
		{"accountId", q(in.AccountID)},
		{"architecture", q("x86_64")},
		{"availabilityZone", q(in.AvailabilityZone)},
		{"billingProducts", "null"},
		{"devpayProductCodes", "null"},
		{"marketplaceProductCodes", "null"},
		{"imageId", q(in.ImageID)},
		{"instanceId", q(in.InstanceID)},
		{"instanceType", q(in.InstanceType)},
		{"kernelId", "null"},
		{"pendingTime", q(pt.UTC().Format(time.RFC3339))},
		{"privateIp", q(in.LocalIPv4)},
		{"ramdiskId", "null"},
		{"region", q(in.Region)},
		{"version", q("2017-09-30")},
	}
	var b strings.Builder
	b.WriteString("{\n")
	for i, f := range fields {
		fmt.Fprintf(&b, "  %q : %s", f.k, f.v)
		if i < len(fields)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("}")
	return []byte(b.String())
}

func iamInfo(r *Role) ([]byte, error) {
	v := struct {
		Code               string
		LastUpdated        string
		InstanceProfileArn string
		InstanceProfileId  string
	}{"Success", r.LastUpdated.UTC().Format(time.RFC3339), r.InstanceProfileARN, r.InstanceProfileID}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("imdsserver: encoding iam/info for role %q: %w", r.Name, err)
	}
	return b, nil
}

func roleCredentials(r *Role) ([]byte, error) {
	v := struct {
		Code            string
		LastUpdated     string
		Type            string
		AccessKeyId     string
		SecretAccessKey string
		Token           string
		Expiration      string
	}{"Success", r.LastUpdated.UTC().Format(time.RFC3339), "AWS-HMAC", r.AccessKeyID, r.SecretAccessKey, r.Token,
		r.Expiration.UTC().Format(time.RFC3339)}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("imdsserver: encoding iam/security-credentials/%s: %w", r.Name, err)
	}
	return b, nil
}
