package nodeconfig

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/berth-node/berth/config/nodeconfig/maxpodsexpr"
	"github.com/berth-node/berth/internal/ctrdv2"
	"github.com/berth-node/berth/internal/flagwords"
	"github.com/berth-node/berth/internal/syntax"
)

// Document is a parsed NodeConfig with the source it came from, so that
// problems found after merging can still name where a value was written.
type Document struct {
	Source string
	Config *NodeConfig
}

// Validate checks every document's own fields under its own source name,
// then the merged result for what only the whole can show (required
// fields, cross-field rules) under MergedSource.
func Validate(docs []Document, merged *NodeConfig) []Problem {
	var out problemList
	for _, d := range docs {
		out.add(ValidateDocument(d.Source, d.Config)...)
	}
	out.add(ValidateMerged(merged)...)
	return out.problems()
}

// OwnedKubeletFlags are kubelet flags berth sets itself; a user flag would
// silently point kubelet at files berth does not write. The value is what
// to do instead.
var ownedKubeletFlags = map[string]string{
	"--config":                            "put KubeletConfiguration fields in spec.kubelet.config",
	"--config-dir":                        "put KubeletConfiguration fields in spec.kubelet.config",
	"--kubeconfig":                        "berth writes /var/lib/kubelet/kubeconfig from spec.cluster",
	"--container-runtime-endpoint":        "berth runs containerd and points kubelet at it",
	"--bootstrap-kubeconfig":              "request a bootstrap-token join with the berth.dev/bootstrap-token annotation",
	"--image-credential-provider-config":  "berth configures itself as the ECR credential provider",
	"--image-credential-provider-bin-dir": "berth configures itself as the ECR credential provider",
}

// OwnedKubeletFlags returns the kubelet flags users may not set, sorted.
func OwnedKubeletFlags() []string {
	return slices.Sorted(func(yield func(string) bool) {
		for k := range ownedKubeletFlags {
			if !yield(k) {
				return
			}
		}
	})
}

// ValidateDocument checks the values one document sets. Fields a document
// leaves empty are not its problem: another document may set them. It
// makes no check that needs the image's manifest (ValidateDocumentWith).
func ValidateDocument(source string, cfg *NodeConfig) []Problem {
	return ValidateDocumentWith(source, cfg, Options{})
}

// ValidateDocumentWith is ValidateDocument with what opts knows: with the
// image's Accepts, the kubelet flags and config and the containerd config
// are checked against what its kubelet and containerd accept.
func ValidateDocumentWith(source string, cfg *NodeConfig, opts Options) []Problem {
	if cfg == nil {
		return nil
	}
	ps := &problems{source: source}
	s := &cfg.Spec
	c := &s.Cluster

	if c.APIServerEndpoint != "" {
		if why := endpointProblem(c.APIServerEndpoint); why != "" {
			ps.errorf("spec.cluster.apiServerEndpoint", "want an https URL (https://HOST[:PORT][/PATH]), got %q: %s", c.APIServerEndpoint, why)
		}
	}
	if c.CIDR != "" {
		if p, err := netip.ParsePrefix(c.CIDR); err != nil {
			ps.errorf("spec.cluster.cidr", "%q is not a CIDR; want the service CIDR, for example 10.100.0.0/16 or fd00:10:96::/112", c.CIDR)
		} else if p.Masked() != p {
			ps.warnf("spec.cluster.cidr", "%q has host bits set; it is read as %s", c.CIDR, p.Masked())
		}
	}
	if len(c.CertificateAuthority) > 0 {
		checkCA(ps, c.CertificateAuthority)
	}

	ls := &s.Instance.LocalStorage
	if ls.Strategy != "" && !slices.Contains(LocalStorageStrategies(), ls.Strategy) {
		ps.errorf("spec.instance.localStorage.strategy", "unknown strategy %q; want one of %s", ls.Strategy, list(LocalStorageStrategies()))
	}
	if ls.MountPath != "" && !strings.HasPrefix(ls.MountPath, "/") {
		ps.errorf("spec.instance.localStorage.mountPath", "want an absolute path, got %q", ls.MountPath)
	} else if ls.MountPath != "" && path.Clean(ls.MountPath) != ls.MountPath {
		// The storage phase mounts where the path leads: /mnt/../etc
		// passed the plan and failed at boot, over /etc.
		ps.errorf("spec.instance.localStorage.mountPath", "%q is not a clean path; write it as %q", ls.MountPath, path.Clean(ls.MountPath))
	}
	for i, m := range ls.DisabledMounts {
		if !slices.Contains(DisabledMounts(), m) {
			ps.errorf(fmt.Sprintf("spec.instance.localStorage.disabledMounts[%d]", i), "unknown mount %q; want one of %s", m, list(DisabledMounts()))
		}
	}
	ps.add(valueProblems(source, s)...)

	if cc := s.Containerd.Config; cc != "" {
		var m map[string]any
		if err := toml.Unmarshal([]byte(cc), &m); err != nil {
			ps.errorf("spec.containerd.config", "invalid TOML: %v", err)
		} else {
			containerdConfigProblems(ps, m)
		}
	}

	if e := s.Kubelet.MaxPodsExpression; e != "" {
		if _, err := maxpodsexpr.Compile(e); err != nil {
			ps.errorf("spec.kubelet.maxPodsExpression", "does not compile: %v", err)
		}
	}
	ps.add(flagProblems(source, s.Kubelet.Flags)...)
	checkAnnotations(ps, cfg)
	if _, _, err := UserMaxPods(s.Kubelet.Config); err != nil {
		ps.errorf("spec.kubelet.config.maxPods", "%v", err)
	}
	if _, _, err := UserClusterDNS(s.Kubelet.Config); err != nil {
		ps.errorf("spec.kubelet.config.clusterDNS", "%v", err)
	}
	if raw, ok := s.Kubelet.Config["cgroupDriver"]; ok {
		var d string
		if err := json.Unmarshal(raw, &d); err != nil {
			ps.errorf("spec.kubelet.config.cgroupDriver", "want a string, got %s (kubelet refuses the file)", raw)
		} else if d != "cgroupfs" {
			ps.errorf("spec.kubelet.config.cgroupDriver", "%q is not supported: berth has no systemd, kubelet uses cgroupfs", d)
		}
	}
	componentProblems(ps, s, opts)

	for _, f := range sortedKeys(s.FeatureGates) {
		if !slices.Contains(Features(), Feature(f)) {
			ps.unknownf("spec.featureGates."+f, "unknown feature gate; known: %s", list(Features()))
		}
	}
	return ps.problems()
}

// ContainerdSocket is where berth's containerd listens: kubelet's
// --container-runtime-endpoint and berth's readiness probe name it
// (runtime/containerd.Socket, which a test holds equal to this).
const ContainerdSocket = "/run/containerd/containerd.sock"

// containerdConfigProblems checks the keys of the user's containerd TOML
// that containerd would refuse, or that would move containerd away from
// what berth and kubelet expect.
func containerdConfigProblems(ps *problems, m map[string]any) {
	if v, ok := m["version"]; ok {
		// containerd 2.x reads versions 2 and 3 (version 1 went in 2.0)
		// and refuses to start on anything else; 1.7 reads 2.
		if n, isInt := v.(int64); !isInt || n != 2 && n != 3 {
			ps.errorf("spec.containerd.config: version", "want 2 or 3 (the config versions containerd reads), got %s", tomlValue(v))
		}
	}
	if g, ok := m["grpc"].(map[string]any); ok {
		if a, ok := g["address"]; ok && a != ContainerdSocket {
			ps.errorf("spec.containerd.config: [grpc] address", "berth owns containerd's socket, %s: kubelet's --container-runtime-endpoint and berth's readiness probe use it; remove the key (got %s)", ContainerdSocket, tomlValue(a))
		}
	}
	// berth converts a version 2 document to version 3 before merging it
	// (runtime/containerd, with ctrdv2.Migrate): what the conversion
	// cannot make (a table of the wrong type) render refuses, so check
	// does too, on a copy.
	if v, _ := m["version"].(int64); v == 2 {
		if err := ctrdv2.Migrate(cloneTOML(m).(map[string]any)); err != nil {
			ps.errorf("spec.containerd.config", "%v", err)
		}
	}
}

// cloneTOML is a deep copy of a decoded TOML value's tables and arrays.
func cloneTOML(v any) any {
	switch t := v.(type) {
	case map[string]any:
		c := make(map[string]any, len(t))
		for k, e := range t {
			c[k] = cloneTOML(e)
		}
		return c
	case []any:
		c := make([]any, len(t))
		for i, e := range t {
			c[i] = cloneTOML(e)
		}
		return c
	}
	return v
}

// tomlValue shows a decoded TOML value as the user wrote it; the problem's
// message is bounded where every problem is (bounded).
func tomlValue(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}

// CheckValues are the checks of every NodeConfig string berth puts into a
// file or onto a command line: nodeadm lets through newlines, zones and
// spaces that would add a line to resolv.conf or the plan description, or
// a word to kubelet's argv; and what goes through an encoder (kubelet's
// and containerd's config) is read back unescaped by the component, which
// writes it on (encodedValueProblems). They
// are part of ValidateDocument, so `berth check`, `berth render` and the
// node's config phase give one verdict; the plan runs them again on the
// merged config it is given, as a backstop for callers that did not
// validate. The problems have no source.
func CheckValues(cfg *NodeConfig) []Problem {
	if cfg == nil {
		return nil
	}
	return append(valueProblems("", &cfg.Spec), flagProblems("", cfg.Spec.Kubelet.Flags)...)
}

func valueProblems(source string, s *NodeConfigSpec) []Problem {
	ps := &problems{source: source}
	check := func(path, v string, rule func(string) error) {
		if v == "" {
			return
		}
		if err := rule(v); err != nil {
			ps.errorf(path, "%v", err)
		}
	}
	c := &s.Cluster
	check("spec.cluster.name", c.Name, syntax.NoControl)
	check("spec.cluster.id", c.ID, syntax.NoControl)
	check("spec.cluster.apiServerEndpoint", c.APIServerEndpoint, syntax.NoControl)
	for _, k := range sortedKeys(s.Instance.Environment) {
		path := "spec.instance.environment." + k
		if err := syntax.EnvName(k); err != nil {
			path = "spec.instance.environment[" + strconv.Quote(k) + "]"
			ps.errorf(path, "%v", err)
		}
		check(path, s.Instance.Environment[k], syntax.NoControl)
	}
	for i, ns := range s.Instance.Network.Nameservers {
		if err := syntax.IP(ns, true); err != nil {
			ps.errorf(fmt.Sprintf("spec.instance.network.nameservers[%d]", i), "%v", err)
		}
	}
	for i, d := range s.Instance.Network.Domains {
		if err := syntax.DNSName(d); err != nil {
			ps.errorf(fmt.Sprintf("spec.instance.network.domains[%d]", i), "%v", err)
		}
	}
	check("spec.instance.localStorage.mountPath", s.Instance.LocalStorage.MountPath, syntax.NoControl)
	encodedValueProblems(ps, s)
	return ps.problems()
}

func flagProblems(source string, flags []string) []Problem {
	ps := &problems{source: source}
	checkKubeletFlags(ps, flags)
	return ps.problems()
}

func checkCA(ps *problems, ca []byte) {
	const path = "spec.cluster.certificateAuthority"
	rest := ca
	certs := 0
	for i := 1; ; i++ {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			ps.errorf(path, "PEM block %d is a %q, want CERTIFICATE", i, block.Type)
			continue
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			ps.errorf(path, "PEM block %d is not a valid certificate: %v", i, err)
			continue
		}
		certs++
	}
	if certs == 0 && !hasPath(ps.list, path) {
		ps.errorf(path, "holds no PEM certificate; want base64 of the cluster CA's PEM, as in DescribeCluster's certificateAuthority.data")
	}
}

func hasPath(ps []Problem, path string) bool {
	return slices.ContainsFunc(ps, func(p Problem) bool { return p.Path == path })
}

// checkKubeletFlags checks spec.kubelet.flags as the words kubelet will
// get: split and unquoted once, as the plan does (flagwords), so no
// spelling reads differently here than on kubelet's command line. One
// element may hold several flags ("--v=2 --kubeconfig=x"), and a flag's
// value may be the next word, in the next element. Problems name the
// element: spec.kubelet.flags[i].
//
//   - No element may hold a control character: a newline would split a
//     word differently here than in nodeadm's environment file, and ends
//     up in the plan description as a line of its own.
//   - berth-owned flags are refused in every spelling kubelet reads as the
//     same flag: "--flag=value" and "--flag value", quoted or
//     backslash-escaped anywhere ("\"--kubeconfig=x\"", --kube\\config=x),
//     and with '_' for '-' (--container_runtime_endpoint).
//   - The values of --node-labels, --register-with-taints,
//     --hostname-override and --node-ip must have the syntax kubelet and
//     the API server want: a bad label or taint otherwise surfaces only
//     when kubelet exits at start, or when the API server refuses to
//     register the node, far from the user data that caused it.
func checkKubeletFlags(ps *problems, flags []string) {
	type word struct {
		elem int
		text string
	}
	path := func(i int) string { return fmt.Sprintf("spec.kubelet.flags[%d]", i) }
	var words []word
	for i, f := range flags {
		if err := syntax.NoControl(f); err != nil {
			ps.errorf(path(i), "%v", err)
			continue
		}
		for _, w := range flagwords.Split(f) {
			words = append(words, word{i, w})
		}
	}
	for j := 0; j < len(words); j++ {
		w := words[j]
		name, inline, ok := flagwords.Name(w.text)
		if !ok {
			continue
		}
		if hint, owned := ownedKubeletFlags[name]; owned {
			spelled := ""
			if as, _, _ := strings.Cut(w.text, "="); as != name {
				spelled = fmt.Sprintf(" (written %q)", as)
			}
			ps.errorf(path(w.elem), "%s%s is set by berth and cannot be overridden; %s", name, spelled, hint)
			continue
		}
		check := flagValueCheck(name)
		if check == nil {
			continue
		}
		_, value, _ := strings.Cut(w.text, "=")
		elem := w.elem
		if !inline {
			if j+1 == len(words) {
				ps.errorf(path(elem), "%s needs a value", name)
				continue
			}
			j++
			value, elem = words[j].text, words[j].elem
		}
		if err := check(value); err != nil {
			ps.errorf(path(elem), "%s: %v", name, err)
		}
	}
}

// flagValueCheck is the check of a kubelet flag's value that berth can
// make before kubelet sees it, or nil.
func flagValueCheck(name string) func(string) error {
	switch name {
	case "--node-labels":
		return syntax.Labels
	case "--register-with-taints":
		return syntax.Taints
	case "--hostname-override":
		return syntax.NodeName
	case "--node-ip":
		return nodeIPs
	}
	return nil
}

// nodeIPs checks --node-ip: one address, or an IPv4 and an IPv6 address
// separated by a comma (dual stack).
func nodeIPs(s string) error {
	parts := strings.Split(s, ",")
	if len(parts) > 2 {
		return fmt.Errorf("%q: want one IP address, or two separated by a comma", s)
	}
	for _, p := range parts {
		if err := syntax.IPNoZone(p); err != nil {
			return err
		}
	}
	return nil
}

// ValidateMerged checks what only the merged config can show: the
// required cluster fields (nodeadm's ValidateNodeConfig) and rules that
// span fields that may come from different documents.
func ValidateMerged(cfg *NodeConfig) []Problem {
	ps := &problems{source: MergedSource}
	if cfg == nil {
		cfg = &NodeConfig{}
	}
	c := &cfg.Spec.Cluster
	// berth needs the service CIDR for the cluster DNS address and the IP
	// family, so kubelet's clusterDNS stands in for it (a berth
	// extension, which nodeadm refuses): an AL2 bootstrap.sh gives the
	// address (--dns-cluster-ip), never the CIDR.
	_, dnsSet := cfg.Spec.Kubelet.Config["clusterDNS"]
	for _, f := range []struct {
		path string
		set  bool
		or   string
	}{
		{"spec.cluster.name", c.Name != "", ""},
		{"spec.cluster.apiServerEndpoint", c.APIServerEndpoint != "", ""},
		{"spec.cluster.certificateAuthority", len(c.CertificateAuthority) > 0, ""},
		{"spec.cluster.cidr", c.CIDR != "" || dnsSet, " (or spec.kubelet.config.clusterDNS)"},
	} {
		if !f.set {
			ps.errorf(f.path, "required%s, and no config source sets it", f.or)
		}
	}
	if c.EnableOutpost != nil && *c.EnableOutpost && c.ID == "" {
		ps.errorf("spec.cluster.id", "required when spec.cluster.enableOutpost is true")
	}
	// kubelet's clusterDNS is derived from the service CIDR unless the
	// config sets it; derived from a CIDR too small to hold it, pods would
	// get a resolver outside the service network, and no error anywhere.
	if _, set := cfg.Spec.Kubelet.Config["clusterDNS"]; !set && c.CIDR != "" {
		if p, err := netip.ParsePrefix(c.CIDR); err == nil {
			if dns, err := ClusterDNS(c.CIDR); err == nil && !p.Masked().Contains(netip.MustParseAddr(dns)) {
				ps.errorf("spec.cluster.cidr", "%q cannot hold the cluster DNS address %s derived from it (the CoreDNS add-on's); want a larger service CIDR, or set spec.kubelet.config.clusterDNS", c.CIDR, dns)
			}
		}
	}
	return ps.problems()
}

func list[T ~string](vs []T) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}

// UserMaxPods reads maxPods from the user's kubelet.config, if set. It is
// what kubelet will really use, since berth's drop-in of the user's config
// overrides config.json. Validation refuses what it refuses, so check,
// render and the plan agree.
func UserMaxPods(user map[string]json.RawMessage) (int32, bool, error) {
	raw, ok := user["maxPods"]
	if !ok {
		return 0, false, nil
	}
	var n float64
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, false, fmt.Errorf("%s is not a number: %w", raw, err)
	}
	if n != math.Trunc(n) || n < 1 || n > math.MaxInt32 {
		return 0, false, fmt.Errorf("%s is not a positive int32", raw)
	}
	return int32(n), true, nil
}

// endpointProblem says what keeps s from being an API server URL that the
// kubeconfig can hold and kubelet can dial, or "". A path is allowed
// (an API server behind a proxy has one); what a kubeconfig's server
// cannot use is not: credentials, a query, a fragment, no host, a port
// out of range.
func endpointProblem(s string) string {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "not a URL"
	case u.Scheme != "https":
		return "the scheme must be https"
	case u.User != nil:
		return "credentials do not belong in it (kubelet authenticates with its own)"
	case u.Hostname() == "":
		return "no host"
	case u.RawQuery != "" || u.ForceQuery:
		return "a query does not belong in it"
	case u.Fragment != "" || strings.Contains(s, "#"):
		return "a fragment does not belong in it"
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Sprintf("port %s is not 1 to 65535", p)
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return "an empty port"
	}
	return ""
}
