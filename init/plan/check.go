package plan

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/berth-node/berth/config/nodeconfig"
	"github.com/berth-node/berth/internal/syntax"
)

// checkInputs checks every string from the NodeConfig, the instance
// metadata and the host facts that Build puts into a file or onto a
// command line, before anything is decided: nodeconfig validation checks
// what nodeadm checks, which lets through newlines, zones and spaces that
// would add lines to resolv.conf or the plan description, or words to
// kubelet's argv. All problems are reported at once, each naming its field
// path. Empty values are left to Build, whose own errors say what is
// missing.
//
// What an encoder writes (the kubelet config, the base runtime spec,
// containerd.config) is checked too, by nodeconfig.CheckValues: the
// encoder escapes a control character, but kubelet and containerd read it
// back unescaped and write it on (clusterDomain into pods' resolv.conf).
func checkInputs(in Inputs) error {
	var errs []error
	bad := func(path string, err error) { errs = append(errs, fmt.Errorf("%s: %w", path, err)) }
	check := func(path, v string, rule func(string) error) {
		if v == "" {
			return
		}
		if err := rule(v); err != nil {
			bad(path, err)
		}
	}

	md := in.Instance
	spec := &in.Config.Spec
	_, ipv6, _ := nodeconfig.ClusterDNSOf(spec)
	if md == nil {
		// Off EC2: the node's name is checked where it is chosen
		// (nodeOffEC2), since it may come from more than one place.
		check("host facts: node IP", in.Host.NodeIP, syntax.IPNoZone)
	} else {
		// Each of these lands in a file: the provider ID in config.json and
		// plan.txt, the region and cluster on the token plugin's argv, the
		// instance type in warnings.
		check("instance metadata instance-id", md.InstanceID, syntax.DNSLabel)
		check("instance metadata placement/availability-zone", md.AvailabilityZone, syntax.DNSLabel)
		check("instance metadata placement/region", md.Region, syntax.DNSLabel)
		check("instance metadata instance-type", md.InstanceType, syntax.DNSName)

		// Only the name and the address Build will pick: a bad value Build
		// does not use should not stop the node.
		if !spec.FeatureEnabled(nodeconfig.InstanceIdNodeName) {
			name, _ := IMDSHostname(md.LocalHostname)
			check("instance metadata local-hostname", name, syntax.NodeName)
		}
		switch {
		case in.Host.NodeIP != "":
			check("host facts: node IP", in.Host.NodeIP, syntax.IPNoZone)
		case ipv6 && len(md.IPv6s) > 0:
			check("instance metadata ipv6s[0]", md.IPv6s[0], syntax.IPNoZone)
		case !ipv6:
			check("instance metadata local-ipv4", md.LocalIPv4, syntax.IPNoZone)
		}
	}

	// The NodeConfig's own strings: nodeconfig's checks, the very ones
	// validation ran (berth check, berth render and the config phase give
	// the same verdict), again here for callers that did not validate.
	for _, p := range nodeconfig.CheckValues(in.Config) {
		errs = append(errs, fmt.Errorf("%s: %s", p.Path, p.Message))
	}
	return errors.Join(errs...)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// checkRendered is the backstop behind checkInputs: whatever a future
// input or code path lets through, no argv word, environment entry or
// one-line fact of the plan may hold a control character, since each is
// written a line apiece into plan.txt and passed to exec as it is. It
// failing means a check is missing in checkInputs.
func (p *Plan) checkRendered() error {
	var errs []error
	bad := func(where string, err error) {
		errs = append(errs, fmt.Errorf("plan %s: %w (an input berth does not check yet; please report it)", where, err))
	}
	for _, s := range p.Services {
		for i, a := range s.Argv {
			if err := syntax.NoControl(a); err != nil {
				bad(fmt.Sprintf("service %s argv[%d]", s.Name, i), err)
			}
		}
		for i, e := range s.Env {
			if err := syntax.NoControl(e); err != nil {
				bad(fmt.Sprintf("service %s env[%d]", s.Name, i), err)
			}
		}
		for _, l := range s.Rlimits {
			if err := l.Check(); err != nil {
				bad("service "+s.Name, err)
			}
		}
	}
	facts := []struct{ name, v string }{
		{"node name", p.NodeName}, {"node IP", p.NodeIP}, {"provider ID", p.ProviderID}, {"cluster DNS", p.ClusterDNS},
	}
	if p.Storage != nil {
		facts = append(facts, struct{ name, v string }{"local storage mount path", p.Storage.MountPath})
	}
	if p.DNS != nil {
		for _, v := range slices.Concat(p.DNS.Nameservers, p.DNS.Search) {
			facts = append(facts, struct{ name, v string }{"resolv.conf entry", v})
		}
	}
	for _, f := range facts {
		if err := syntax.NoControl(f.v); err != nil {
			bad(f.name, err)
		}
	}
	total := 0
	for _, f := range p.Files {
		total += len(f.Data)
		if len(f.Data) > MaxRenderedFile {
			errs = append(errs, fmt.Errorf("plan file %s: %d bytes, over the %d-byte bound on one rendered file (plan.MaxRenderedFile); the user data's share of it (spec.containerd.config, baseRuntimeSpec, kubelet.config) is what grew", f.Path, len(f.Data), MaxRenderedFile))
		}
	}
	if total > MaxRendered {
		errs = append(errs, fmt.Errorf("plan files: %d bytes in all, over the %d-byte bound (plan.MaxRendered)", total, MaxRendered))
	}
	return errors.Join(errs...)
}

// Bounds on what the plan writes, beside the bounds on what nodeconfig
// reads: real files are a few KiB (a CA bundle tens), and a node's /etc
// is a tmpfs in PID 1's memory, so a document that re-encodes larger
// than it read (a YAML alias fanned out, deep nesting) stops here, named,
// before anything is written.
const (
	MaxRenderedFile = 1 << 20
	MaxRendered     = 4 << 20
)

// oneLine makes a warning fit on its line of plan.txt and the boot
// report: warnings quote inputs (a CEL error quotes the expression over
// several lines), so control characters become Go escapes.
func oneLine(s string) string {
	if syntax.NoControl(s) == nil {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if syntax.NoControl(string(r)) != nil {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
