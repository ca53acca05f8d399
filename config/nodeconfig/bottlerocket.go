package nodeconfig

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"github.com/berth-node/berth/config/bottlerocket"
)

// bootstrapTokenAnnotation requests a bootstrap-token join; init/plan
// owns its meaning (plan.BootstrapTokenAnnotation).
const bootstrapTokenAnnotation = "berth.dev/bootstrap-token"

// FromBottlerocket is the NodeConfig a Bottlerocket settings document
// means (config/bottlerocket reads and decides each setting), with its
// problems named by source and settings path: the cluster, kubelet's
// config and flags, the registry mirrors, a bootstrap token, the
// machine settings (sysctls, modules to load, hostname, NTP servers) and
// the update repository as berth's annotations, the resolver and the
// proxy environment.
func FromBottlerocket(source string, s *bottlerocket.Settings) (*NodeConfig, []Problem) {
	var out problemList
	for _, p := range s.Problems {
		sev := SeverityWarning
		if p.Severity == bottlerocket.SeverityError {
			sev = SeverityError
		}
		msg := p.Message
		if p.Line > 0 {
			msg = fmt.Sprintf("%s (line %d)", msg, p.Line)
		}
		out.add(Problem{Severity: sev, Source: source, Path: p.Path, Message: msg, Unknown: p.Unknown})
	}
	cfg := &NodeConfig{APIVersion: APIVersion, Kind: Kind}
	sp := &cfg.Spec
	sp.Cluster = ClusterDetails{Name: s.Cluster.Name, APIServerEndpoint: s.Cluster.APIServerEndpoint, CertificateAuthority: s.Cluster.CertificateAuthority}
	doc, err := s.Kubelet.Config.Document()
	if err != nil {
		out.add(Problem{Severity: SeverityError, Source: source, Path: "settings.kubernetes", Message: "writing kubelet's config: " + err.Error()})
	} else if len(doc) > 0 {
		sp.Kubelet.Config = doc
	}
	sp.Kubelet.Flags = s.Kubelet.Flags()
	if len(s.FeatureGates) > 0 {
		sp.FeatureGates = map[Feature]bool{}
		for k, v := range s.FeatureGates {
			sp.FeatureGates[Feature(k)] = v
		}
	}
	sp.Instance.Network = NetworkOptions{Nameservers: s.Instance.Nameservers, Domains: s.Instance.SearchDomains}
	if len(s.Instance.Environment) > 0 {
		sp.Instance.Environment = maps.Clone(s.Instance.Environment)
	}
	ann := map[string]string{}
	if s.Cluster.BootstrapToken != "" {
		ann[bootstrapTokenAnnotation] = s.Cluster.BootstrapToken
	}
	// Strings, lists and maps of strings always marshal.
	if len(s.RegistryMirrors) > 0 {
		b, _ := json.Marshal(s.RegistryMirrors)
		ann[RegistryMirrorsAnnotation] = string(b)
	}
	if in := s.Instance; len(in.Sysctls) > 0 {
		b, _ := json.Marshal(in.Sysctls)
		ann[SysctlsAnnotation] = string(b)
	}
	if in := s.Instance; len(in.KernelModules) > 0 {
		b, _ := json.Marshal(in.KernelModules)
		ann[KernelModulesAnnotation] = string(b)
	}
	if in := s.Instance; len(in.BlockedModules) > 0 {
		b, _ := json.Marshal(in.BlockedModules)
		ann[BlockedKernelModulesAnnotation] = string(b)
	}
	if s.Instance.Hostname != "" {
		ann[HostnameAnnotation] = s.Instance.Hostname
	}
	if in := s.Instance; len(in.TimeServers) > 0 {
		b, _ := json.Marshal(in.TimeServers)
		ann[NTPServersAnnotation] = string(b)
	}
	if s.Instance.UpdateRepository != "" {
		ann[UpdateRepositoryAnnotation] = s.Instance.UpdateRepository
	}
	if s.Instance.UpdateTargetsURL != "" {
		ann[UpdateTargetsURLAnnotation] = s.Instance.UpdateTargetsURL
	}
	if len(ann) > 0 {
		b, _ := json.Marshal(ann)
		cfg.Metadata = map[string]json.RawMessage{"annotations": b}
	}
	return cfg, out.problems()
}

// readBottlerocket reads a user-data document that is Bottlerocket
// settings TOML as a NodeConfig, named "<part> (Bottlerocket settings)";
// cfg is nil when the document cannot be read at all.
func readBottlerocket(part string, data []byte) (string, *NodeConfig, []Problem) {
	source := part + bottlerocketSuffix
	s, err := bottlerocket.Read(data)
	if err != nil {
		return source, nil, []Problem{{Severity: SeverityError, Source: source, Message: err.Error()}}
	}
	cfg, ps := FromBottlerocket(source, s)
	return source, cfg, ps
}

// BottlerocketSettings are the Bottlerocket settings FromBottlerocket
// carries over as each of berth's annotations, for a problem found at the
// annotation's path (by the plan) to name what the user wrote.
func BottlerocketSettings() map[string]string {
	return map[string]string{
		bootstrapTokenAnnotation:       "settings.kubernetes.bootstrap-token",
		RegistryMirrorsAnnotation:      "settings.container-registry.mirrors",
		SysctlsAnnotation:              "settings.kernel.sysctl",
		KernelModulesAnnotation:        "settings.kernel.modules (autoload)",
		BlockedKernelModulesAnnotation: "settings.kernel.modules (allowed = false)",
		HostnameAnnotation:             "settings.network.hostname",
		NTPServersAnnotation:           "settings.ntp.time-servers",
		UpdateRepositoryAnnotation:     "settings.updates.metadata-base-url",
		UpdateTargetsURLAnnotation:     "settings.updates.targets-base-url",
	}
}

// IsBottlerocketSource says whether a Result.Used name is a Bottlerocket
// settings document's.
func IsBottlerocketSource(source string) bool {
	return strings.HasSuffix(source, bottlerocketSuffix)
}

const bottlerocketSuffix = " (Bottlerocket settings)"
