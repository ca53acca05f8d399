package nodeconfig

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/berth-node/berth/config/nodeconfig/maxpodsexpr"
	"github.com/berth-node/berth/internal/flagwords"
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

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ValidateDocument checks the values one document sets. Fields a document
// leaves empty are not its problem: another document may set them.
func ValidateDocument(source string, cfg *NodeConfig) []Problem {
	if cfg == nil {
		return nil
	}
	ps := &problems{source: source}
	s := &cfg.Spec
	c := &s.Cluster

	if c.APIServerEndpoint != "" {
		if u, err := url.Parse(c.APIServerEndpoint); err != nil || u.Scheme != "https" || u.Host == "" {
			ps.errorf("spec.cluster.apiServerEndpoint", "want an https URL (https://HOST[:PORT]), got %q", c.APIServerEndpoint)
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
	}
	for i, m := range ls.DisabledMounts {
		if !slices.Contains(DisabledMounts(), m) {
			ps.errorf(fmt.Sprintf("spec.instance.localStorage.disabledMounts[%d]", i), "unknown mount %q; want one of %s", m, list(DisabledMounts()))
		}
	}
	for _, k := range sortedKeys(s.Instance.Environment) {
		if !envName.MatchString(k) {
			ps.errorf("spec.instance.environment."+k, "%q is not a valid environment variable name", k)
		}
	}
	for i, ns := range s.Instance.Network.Nameservers {
		if _, err := netip.ParseAddr(ns); err != nil {
			ps.errorf(fmt.Sprintf("spec.instance.network.nameservers[%d]", i), "%q is not an IP address", ns)
		}
	}
	for i, d := range s.Instance.Network.Domains {
		if d == "" || strings.ContainsAny(d, " \t\n") {
			ps.errorf(fmt.Sprintf("spec.instance.network.domains[%d]", i), "%q is not a domain name", d)
		}
	}

	if cc := s.Containerd.Config; cc != "" {
		var m map[string]any
		if err := toml.Unmarshal([]byte(cc), &m); err != nil {
			ps.errorf("spec.containerd.config", "invalid TOML: %v", err)
		}
	}

	if e := s.Kubelet.MaxPodsExpression; e != "" {
		if _, err := maxpodsexpr.Compile(e); err != nil {
			ps.errorf("spec.kubelet.maxPodsExpression", "does not compile: %v", err)
		}
	}
	checkKubeletFlags(ps, s.Kubelet.Flags)
	checkAnnotations(ps, cfg)
	if raw, ok := s.Kubelet.Config["cgroupDriver"]; ok {
		var d string
		if json.Unmarshal(raw, &d) == nil && d != "cgroupfs" {
			ps.errorf("spec.kubelet.config.cgroupDriver", "%q is not supported: berth has no systemd, kubelet uses cgroupfs", d)
		}
	}

	for _, f := range sortedKeys(s.FeatureGates) {
		if !slices.Contains(Features(), Feature(f)) {
			ps.unknownf("spec.featureGates."+f, "unknown feature gate; known: %s", list(Features()))
		}
	}
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

// checkKubeletFlags rejects berth-owned flags in every spelling kubelet
// reads as the same flag: "--flag=value" and "--flag value" (one element,
// or two elements), quoted or backslash-escaped anywhere ("\"--kubeconfig=x\"",
// --kube\\config=x), and with '_' for '-' (--container_runtime_endpoint).
// The words are the ones kubelet gets: split and unquoted once, as the plan
// does (flagwords), so no spelling reads differently here than on kubelet's
// command line. One element may hold several flags ("--v=2 --kubeconfig=x").
func checkKubeletFlags(ps *problems, flags []string) {
	for i, f := range flags {
		for _, word := range flagwords.Split(f) {
			name, _, ok := flagwords.Name(word)
			if !ok {
				continue
			}
			if hint, owned := ownedKubeletFlags[name]; owned {
				spelled := ""
				if w, _, _ := strings.Cut(word, "="); w != name {
					spelled = fmt.Sprintf(" (written %q)", w)
				}
				ps.errorf(fmt.Sprintf("spec.kubelet.flags[%d]", i), "%s%s is set by berth and cannot be overridden; %s", name, spelled, hint)
			}
		}
	}
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
	for _, f := range []struct {
		path string
		set  bool
	}{
		{"spec.cluster.name", c.Name != ""},
		{"spec.cluster.apiServerEndpoint", c.APIServerEndpoint != ""},
		{"spec.cluster.certificateAuthority", len(c.CertificateAuthority) > 0},
		{"spec.cluster.cidr", c.CIDR != ""},
	} {
		if !f.set {
			ps.errorf(f.path, "required, and no config source sets it")
		}
	}
	if c.EnableOutpost != nil && *c.EnableOutpost && c.ID == "" {
		ps.errorf("spec.cluster.id", "required when spec.cluster.enableOutpost is true")
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
