// Package bottlerocket reads the user data of Bottlerocket nodes: TOML
// whose [settings] table sets Bottlerocket's API settings
// (settings.kubernetes.cluster-name, settings.kernel.sysctl, ...), as
// eksctl, Karpenter and terraform-aws-eks write it for Bottlerocket node
// groups. berth has no settings API, so the document is read once and
// each setting is decided here, by Table: honoured (its value, in the
// shape a NodeConfig takes it), ignored with a warning naming its path,
// or refused with an error naming its path and saying what to do instead.
// A setting this package does not know is a warning, not an error:
// Bottlerocket rejects unknown settings, but a setting added by a newer
// Bottlerocket must not stop a node berth can configure anyway.
//
// The document is input from outside the machine: its size, nesting and
// number of keys are bounded before anything is built from it, and a
// string that would end up on kubelet's command line or in a
// line-oriented file is refused when it holds a control character.
//
// This package decides; it never touches the machine and imports no
// NodeConfig type. Turning Settings into a NodeConfig is nodeconfig's job.
package bottlerocket

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// Limits on what a document may make this package do. EC2 user data is at
// most 16 KiB raw, so these bound the work on hostile input, not real
// settings, which are a few dozen keys.
const (
	// MaxSize caps the TOML read, in bytes.
	MaxSize = 64 << 10
	// MaxDepth caps how deeply keys nest, counting settings itself and
	// each table, dotted key, list and list element on the way:
	// settings.kubernetes.node-taints.KEY[0] is 5. Bottlerocket's deepest
	// settings are 6.
	MaxDepth = 10
	// MaxKeys caps the keys and list elements in the document.
	MaxKeys = 1024
	// MaxKeyLength caps one key, in bytes: a label key is at most 317
	// (253 of prefix, '/', 63 of name).
	MaxKeyLength = 512
	// MaxProblems caps the problems kept; the rest are counted on one
	// more problem, as nodeconfig caps its own.
	MaxProblems = 50
	// MaxSysctls, MaxSysctlValue, MaxKernelModules and MaxTimeServers
	// are nodeconfig's bounds on the annotations the machine settings
	// become (nodeconfig's tests hold them equal), so that a document
	// over them is refused here, at its setting's path and line.
	MaxSysctls       = 256
	MaxSysctlValue   = 4096
	MaxKernelModules = 64
	MaxTimeServers   = 8
)

// Settings is what a Bottlerocket settings document means for berth. Each
// field is documented with the NodeConfig field or berth behaviour it
// stands for; empty fields were not set.
type Settings struct {
	Cluster  Cluster  `json:"cluster,omitzero"`
	Kubelet  Kubelet  `json:"kubelet,omitzero"`
	Instance Instance `json:"instance,omitzero"`
	// RegistryMirrors maps a registry host (host, host:port, or "*" for
	// every registry) to its mirrors' URLs in the order containerd tries
	// them: the value of the berth.dev/registry-mirrors annotation
	// (settings.container-registry.mirrors).
	RegistryMirrors map[string][]string `json:"registryMirrors,omitempty"`
	// FeatureGates are nodeadm feature gates to turn on
	// (spec.featureGates): InstanceIdNodeName for
	// settings.kubernetes.hostname-override-source = "instance-id".
	FeatureGates map[string]bool `json:"featureGates,omitempty"`
	// Problems lists each setting ignored (a warning) or refused (an
	// error), each unknown setting (a warning with Unknown set) and each
	// bad value (an error), ordered by line; at most MaxProblems and one
	// line counting the rest.
	Problems []Problem `json:"problems,omitempty"`
}

// Cluster are the cluster's coordinates (spec.cluster).
type Cluster struct {
	// Name is spec.cluster.name (settings.kubernetes.cluster-name).
	Name string `json:"name,omitempty"`
	// APIServerEndpoint is spec.cluster.apiServerEndpoint
	// (settings.kubernetes.api-server), an https URL.
	APIServerEndpoint string `json:"apiServerEndpoint,omitempty"`
	// CertificateAuthority is spec.cluster.certificateAuthority: the PEM
	// bundle that settings.kubernetes.cluster-certificate holds in
	// base64. Marshalled, it is base64 again, as in a NodeConfig.
	CertificateAuthority []byte `json:"certificateAuthority,omitempty"`
	// BootstrapToken is the value of the berth.dev/bootstrap-token
	// annotation (settings.kubernetes.bootstrap-token), set only when
	// settings.kubernetes.authentication-mode is "tls". It is a secret:
	// print it only where the user asked to see secrets.
	BootstrapToken string `json:"bootstrapToken,omitempty"`
}

// Kubelet is what the settings give kubelet (spec.kubelet).
type Kubelet struct {
	// Config holds KubeletConfiguration fields for spec.kubelet.config.
	Config KubeletConfig `json:"config,omitzero"`
	// NodeLabels are labels to register the node with
	// (settings.kubernetes.node-labels): kubelet's --node-labels, since
	// KubeletConfiguration has no field for them. See Flags.
	NodeLabels map[string]string `json:"nodeLabels,omitempty"`
	// Taints are taints to register the node with
	// (settings.kubernetes.node-taints), ordered by key and then as
	// listed: kubelet's --register-with-taints. See Flags.
	Taints []Taint `json:"taints,omitempty"`
	// NodeIP is kubelet's --node-ip (settings.kubernetes.node-ip).
	NodeIP string `json:"nodeIP,omitempty"`
	// HostnameOverride is kubelet's --hostname-override, the node's name
	// (settings.kubernetes.hostname-override).
	HostnameOverride string `json:"hostnameOverride,omitempty"`
	// Verbosity is kubelet's --v (settings.kubernetes.log-level).
	Verbosity *int `json:"verbosity,omitempty"`
}

// Taint is one node taint; Value may be empty.
type Taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

// String is the taint as --register-with-taints takes it:
// KEY=VALUE:EFFECT, or KEY:EFFECT with no value.
func (t Taint) String() string {
	if t.Value == "" {
		return t.Key + ":" + t.Effect
	}
	return t.Key + "=" + t.Value + ":" + t.Effect
}

// Flags are the kubelet flags the settings call for, for
// spec.kubelet.flags: --node-labels (sorted by key), --register-with-taints,
// --node-ip, --hostname-override and --v, each as one --flag=value word,
// in that order, each only when set. The values are checked already
// (label and taint syntax, addresses, names), so nodeconfig's own checks
// of these flags pass.
func (k *Kubelet) Flags() []string {
	var flags []string
	if len(k.NodeLabels) > 0 {
		keys := sortedKeys(k.NodeLabels)
		pairs := make([]string, len(keys))
		for i, key := range keys {
			pairs[i] = key + "=" + k.NodeLabels[key]
		}
		flags = append(flags, "--node-labels="+strings.Join(pairs, ","))
	}
	if len(k.Taints) > 0 {
		ts := make([]string, len(k.Taints))
		for i, t := range k.Taints {
			ts[i] = t.String()
		}
		flags = append(flags, "--register-with-taints="+strings.Join(ts, ","))
	}
	if k.NodeIP != "" {
		flags = append(flags, "--node-ip="+k.NodeIP)
	}
	if k.HostnameOverride != "" {
		flags = append(flags, "--hostname-override="+k.HostnameOverride)
	}
	if k.Verbosity != nil {
		flags = append(flags, "--v="+strconv.Itoa(*k.Verbosity))
	}
	return flags
}

// KubeletConfig are KubeletConfiguration (kubelet.config.k8s.io/v1beta1)
// fields, under their own JSON names, so that marshalled they are
// spec.kubelet.config as it is (see Document). Each comes from the
// settings.kubernetes key of the same meaning (Table's Why names it);
// nil and empty fields were not set.
type KubeletConfig struct {
	ClusterDNS                      []string            `json:"clusterDNS,omitempty"`
	ClusterDomain                   string              `json:"clusterDomain,omitempty"`
	MaxPods                         *int32              `json:"maxPods,omitempty"`
	EvictionHard                    map[string]string   `json:"evictionHard,omitempty"`
	EvictionSoft                    map[string]string   `json:"evictionSoft,omitempty"`
	EvictionSoftGracePeriod         map[string]string   `json:"evictionSoftGracePeriod,omitempty"`
	EvictionMaxPodGracePeriod       *int32              `json:"evictionMaxPodGracePeriod,omitempty"`
	KubeReserved                    map[string]string   `json:"kubeReserved,omitempty"`
	SystemReserved                  map[string]string   `json:"systemReserved,omitempty"`
	ReservedSystemCPUs              string              `json:"reservedSystemCPUs,omitempty"`
	AllowedUnsafeSysctls            []string            `json:"allowedUnsafeSysctls,omitempty"`
	ServerTLSBootstrap              *bool               `json:"serverTLSBootstrap,omitempty"`
	ProviderID                      string              `json:"providerID,omitempty"`
	RegistryPullQPS                 *int32              `json:"registryPullQPS,omitempty"`
	RegistryBurst                   *int32              `json:"registryBurst,omitempty"`
	EventRecordQPS                  *int32              `json:"eventRecordQPS,omitempty"`
	EventBurst                      *int32              `json:"eventBurst,omitempty"`
	KubeAPIQPS                      *int32              `json:"kubeAPIQPS,omitempty"`
	KubeAPIBurst                    *int32              `json:"kubeAPIBurst,omitempty"`
	ContainerLogMaxSize             string              `json:"containerLogMaxSize,omitempty"`
	ContainerLogMaxFiles            *int32              `json:"containerLogMaxFiles,omitempty"`
	ContainerLogMaxWorkers          *int32              `json:"containerLogMaxWorkers,omitempty"`
	ContainerLogMonitorInterval     string              `json:"containerLogMonitorInterval,omitempty"`
	CPUCFSQuota                     *bool               `json:"cpuCFSQuota,omitempty"`
	CPUManagerPolicy                string              `json:"cpuManagerPolicy,omitempty"`
	CPUManagerPolicyOptions         map[string]string   `json:"cpuManagerPolicyOptions,omitempty"`
	CPUManagerReconcilePeriod       string              `json:"cpuManagerReconcilePeriod,omitempty"`
	TopologyManagerPolicy           string              `json:"topologyManagerPolicy,omitempty"`
	TopologyManagerScope            string              `json:"topologyManagerScope,omitempty"`
	MemoryManagerPolicy             string              `json:"memoryManagerPolicy,omitempty"`
	ReservedMemory                  []MemoryReservation `json:"reservedMemory,omitempty"`
	PodPidsLimit                    *int64              `json:"podPidsLimit,omitempty"`
	ImageGCHighThresholdPercent     *int32              `json:"imageGCHighThresholdPercent,omitempty"`
	ImageGCLowThresholdPercent      *int32              `json:"imageGCLowThresholdPercent,omitempty"`
	ImageMinimumGCAge               string              `json:"imageMinimumGCAge,omitempty"`
	ImageMaximumGCAge               string              `json:"imageMaximumGCAge,omitempty"`
	SerializeImagePulls             *bool               `json:"serializeImagePulls,omitempty"`
	MaxParallelImagePulls           *int32              `json:"maxParallelImagePulls,omitempty"`
	ShutdownGracePeriod             string              `json:"shutdownGracePeriod,omitempty"`
	ShutdownGracePeriodCriticalPods string              `json:"shutdownGracePeriodCriticalPods,omitempty"`
	SeccompDefault                  *bool               `json:"seccompDefault,omitempty"`
	SingleProcessOOMKill            *bool               `json:"singleProcessOOMKill,omitempty"`
	MemorySwap                      *MemorySwap         `json:"memorySwap,omitempty"`
	UserNamespaces                  *UserNamespaces     `json:"userNamespaces,omitempty"`
}

// MemoryReservation is one entry of kubelet's reservedMemory. Its fields
// are in their JSON names' order, as a NodeConfig's keys come out of YAML,
// so that the two documents hold the same bytes.
type MemoryReservation struct {
	Limits   map[string]string `json:"limits"`
	NUMANode int32             `json:"numaNode"`
}

// MemorySwap is kubelet's memorySwap.
type MemorySwap struct {
	SwapBehavior string `json:"swapBehavior"`
}

// UserNamespaces is kubelet's userNamespaces.
type UserNamespaces struct {
	IDsPerPod int64 `json:"idsPerPod"`
}

// Document is c as spec.kubelet.config takes it: a JSON object's fields,
// each raw (nodeconfig's InlineDocument has this type). It is empty when
// nothing is set.
func (c KubeletConfig) Document() (map[string]json.RawMessage, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("kubelet config: %w", err)
	}
	doc := map[string]json.RawMessage{}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("kubelet config: %w", err)
	}
	return doc, nil
}

// Instance is what the settings ask of the machine.
type Instance struct {
	// Nameservers is spec.instance.network.nameservers
	// (settings.dns.name-servers).
	Nameservers []string `json:"nameservers,omitempty"`
	// SearchDomains is spec.instance.network.domains
	// (settings.dns.search-list).
	SearchDomains []string `json:"searchDomains,omitempty"`
	// Environment is spec.instance.environment: HTTPS_PROXY, https_proxy,
	// NO_PROXY and no_proxy, as Bottlerocket sets them for containerd and
	// kubelet (settings.network.https-proxy and no-proxy).
	Environment map[string]string `json:"environment,omitempty"`
	// Sysctls are the berth.dev/sysctls annotation: kernel parameters by
	// name, as given (settings.kernel.sysctl).
	Sysctls map[string]string `json:"sysctls,omitempty"`
	// KernelModules are the berth.dev/kernel-modules annotation: the
	// modules with autoload = true, by name (settings.kernel.modules).
	KernelModules []string `json:"kernelModules,omitempty"`
	// BlockedModules are the berth.dev/blocked-kernel-modules
	// annotation: the modules with allowed = false, by name
	// (settings.kernel.modules).
	BlockedModules []string `json:"blockedModules,omitempty"`
	// Hostname is the berth.dev/hostname annotation: the machine's
	// hostname (settings.network.hostname).
	Hostname string `json:"hostname,omitempty"`
	// TimeServers are the berth.dev/ntp-servers annotation: NTP servers'
	// names or addresses, in order (settings.ntp.time-servers).
	TimeServers []string `json:"timeServers,omitempty"`
	// UpdateRepository is the berth.dev/update-repository annotation:
	// the update repository's URL (settings.updates.metadata-base-url).
	UpdateRepository string `json:"updateRepository,omitempty"`
	// UpdateTargetsURL is the berth.dev/update-targets-url annotation:
	// where the repository's targets are
	// (settings.updates.targets-base-url).
	UpdateTargetsURL string `json:"updateTargetsURL,omitempty"`
}

// Severity says whether a problem stops the node from being configured.
type Severity string

// Severities, as nodeconfig's.
const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
)

// Problem is one setting berth ignores, refuses or cannot read.
type Problem struct {
	Severity Severity `json:"severity"`
	// Path is the setting's path in the document, keys that are not bare
	// TOML keys quoted and list elements indexed:
	// settings.kubernetes.node-labels."example.com/role",
	// settings.container-registry.mirrors[0].endpoint[1].
	Path string `json:"path"`
	// Line is the 1-based line the setting is on; 0 when unknown.
	Line int `json:"line,omitempty"`
	// Message says what is wrong and, where it helps, what to do.
	Message string `json:"message"`
	// Unknown marks a setting this package does not know (a warning),
	// which a strict check may promote to an error.
	Unknown bool `json:"unknown,omitempty"`
}

// Error formats the problem as [line N: ]PATH: MESSAGE.
func (p Problem) Error() string {
	if p.Line > 0 {
		return fmt.Sprintf("line %d: %s: %s", p.Line, p.Path, p.Message)
	}
	return p.Path + ": " + p.Message
}

// String is Error prefixed with the severity.
func (p Problem) String() string { return string(p.Severity) + ": " + p.Error() }

// HasErrors reports whether any problem is an error.
func (s *Settings) HasErrors() bool {
	return slices.ContainsFunc(s.Problems, func(p Problem) bool { return p.Severity == SeverityError })
}

// Error is a document this package cannot read at all: not TOML, over a
// limit, or without a settings table. It names the line and the key
// path where it can.
type Error struct {
	// Line is 1-based; 0 when the whole document is at fault.
	Line int
	// Path is the key path at fault, or empty.
	Path string
	Msg  string
	// Err is the parser's error, when there is one.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// IsSettings reports whether data looks like Bottlerocket settings: TOML
// syntax, within MaxSize, with a top-level settings table. Callers use it
// to tell a Bottlerocket user data part from a NodeConfig or a script (a
// YAML document or a script fails to parse as TOML within its first
// lines). It only parses, in one pass and building nothing, so a
// document it accepts may still be refused by Read (a key given twice,
// a limit passed), with an error that says why.
func IsSettings(data []byte) bool {
	if len(data) > MaxSize {
		return false
	}
	var p unstable.Parser
	p.Reset(data)
	found, top := false, true
	for p.NextExpression() {
		e := p.Expression()
		if e.Kind != unstable.Table && e.Kind != unstable.ArrayTable && (e.Kind != unstable.KeyValue || !top) {
			continue
		}
		it := e.Key()
		if !it.Next() || string(it.Node().Data) != "settings" {
			top = top && e.Kind == unstable.KeyValue
			continue
		}
		switch {
		case e.Kind == unstable.ArrayTable && it.IsLast():
			return false // [[settings]]: a list of tables
		case e.Kind == unstable.KeyValue && it.IsLast() && e.Value().Kind != unstable.InlineTable:
			return false // settings = 3
		}
		found = true
		top = top && e.Kind == unstable.KeyValue
	}
	return found && p.Error() == nil
}

// Read reads a Bottlerocket settings document. The error is an *Error,
// for a document that is not TOML, is over a limit or has no settings
// table; what is wrong with single settings is in the result's Problems.
func Read(data []byte) (*Settings, error) {
	if len(data) > MaxSize {
		return nil, &Error{Msg: fmt.Sprintf("%d bytes, more than %d (bottlerocket.MaxSize)", len(data), MaxSize)}
	}
	// The index comes first: it enforces the limits in one cheap pass,
	// before go-toml builds maps of a document that passes them (go-toml
	// takes a good part of a second for 64 KiB of keys). Where the syntax
	// is wrong, go-toml says so better.
	lines, err := index(data)
	var syntaxErr *syntaxError
	if err != nil && !errors.As(err, &syntaxErr) {
		return nil, err
	}
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		return nil, tomlError(err)
	}
	if err != nil {
		return nil, &Error{Msg: "not TOML: " + clip(printable(syntaxErr.Error())), Err: syntaxErr}
	}
	settings, ok := doc["settings"].(map[string]any)
	if !ok {
		e := &Error{Line: lines["settings"], Msg: "no settings table: not Bottlerocket user data"}
		if _, there := doc["settings"]; there {
			e.Path, e.Msg = "settings", "want a table, got "+describe(doc["settings"])
		}
		return nil, e
	}
	r := &reader{lines: lines, s: &Settings{}}
	for _, k := range sortedKeys(doc) {
		if k != "settings" {
			r.unknown(join("", k), "")
		}
	}
	r.settings(settings)
	r.finish()
	return r.s, nil
}

// tomlError is go-toml's error as an *Error, with its line. go-toml's
// message names the key where there is one; its Key is only the key's
// last part (max-pods, not settings.kubernetes.max-pods), which as a
// Path would mislead.
func tomlError(err error) *Error {
	e := &Error{Msg: "not TOML: " + clip(printable(strings.TrimPrefix(err.Error(), "toml: "))), Err: err}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		e.Line, _ = de.Position()
	}
	return e
}
