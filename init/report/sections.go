package report

import (
	"github.com/berth-node/berth/config/imds"
	"github.com/berth-node/berth/config/nocloud"
	"github.com/berth-node/berth/config/nodeconfig"
	"github.com/berth-node/berth/config/platform"
	"github.com/berth-node/berth/config/sources"
	"github.com/berth-node/berth/config/userdataurl"
	"github.com/berth-node/berth/network"
	"github.com/berth-node/berth/runtime/supervise"
)

// SchemaVersion is the version of boot.json's (and the BERTH-REPORT
// line's) schema. Operators parse this file, so a change that renames or
// moves a field bumps it, and Decode keeps reading the older ones.
//
//   - 1 (no schemaVersion field): berth up to the regroup. Services'
//     fields in snake_case (started_at, ready_ms, last_exit...), IMDS
//     call durations in nanoseconds (imdsCalls[].duration), storage steps
//     in ms as "ms", and the plan, the written files and the sysctl
//     errors inside the config section.
//   - 2: every field camelCase; every duration in milliseconds and named
//     ...Ms; the plan and apply phases have sections of their own.
const SchemaVersion = 2

// The sections whose writer is a phase in init (package main) are
// declared here, so that `berth analyze`, the QEMU tests and the demo
// decode the very types the node encodes. The other typed sections are
// their owners' own: network.Result, timesync.Status, localstorage.Result.

// Source is the source phase's section: where user data comes from, each
// source with why it was or was not used (config/sources), what DMI said
// about EC2, and the NoCloud seed when there is one. It is decided before
// the network phase, since a seed's network-config configures the
// network, and a machine that is not EC2 must not wait on IMDS.
type Source struct {
	Use     sources.Kind    `json:"use,omitempty"`
	Entries []sources.Entry `json:"entries"`
	EC2     platform.EC2    `json:"ec2"`
	Seed    *Seed           `json:"seed,omitempty"`
}

// Seed is the NoCloud seed a node booted from: its volume, what its
// meta-data says, the network its network-config gives (nil: none, DHCP
// as without a seed), and what berth ignored in it.
type Seed struct {
	sources.Volume
	InstanceID    string            `json:"instanceId,omitempty"`
	LocalHostname string            `json:"localHostname,omitempty"`
	Network       *network.Config   `json:"network,omitempty"`
	Warnings      []nocloud.Problem `json:"warnings,omitempty"`
}

// Config is the config phase's section: where the NodeConfig came from
// and what instance metadata said.
type Config struct {
	// IMDS is the endpoint asked, or "off".
	IMDS    string             `json:"imds"`
	Sources []string           `json:"sources"`
	Result  *nodeconfig.Result `json:"result,omitempty"`
	// Calls are the IMDS requests, each with its duration in ms.
	Calls []imds.CallTiming `json:"imdsCalls,omitempty"`
	// UserDataURL is berth.userdata= when it was the source, and its
	// requests (none for a file).
	UserDataURL      string                `json:"userDataUrl,omitempty"`
	UserDataURLCalls []userdataurl.Attempt `json:"userDataUrlCalls,omitempty"`
	// Skipped says why the node runs no Kubernetes services.
	Skipped string `json:"skipped,omitempty"`
	// Hostname is the node's hostname once the config phase set it from
	// IMDS; the network section keeps what DHCP or the command line gave.
	Hostname       string         `json:"hostname,omitempty"`
	HostnameSource string         `json:"hostnameSource,omitempty"`
	Meta           map[string]any `json:"instance,omitempty"`
}

// Plan is the plan phase's section: what it decided, in brief (the whole
// plan is /run/berth/plan.json).
type Plan struct {
	NodeName   string   `json:"nodeName"`
	NodeIP     string   `json:"nodeIP,omitempty"`
	ProviderID string   `json:"providerID,omitempty"`
	MaxPods    int32    `json:"maxPods"`
	Services   []string `json:"services"`
	Warnings   []string `json:"warnings,omitempty"`
}

// Apply is the apply phase's section: the files it wrote.
type Apply struct {
	Files []string `json:"files,omitempty"`
	// Overridden are files from the image the plan replaced (a registry's
	// hosts.toml the registry-mirrors annotation also sets).
	Overridden []string `json:"overridden,omitempty"`
	// SysctlErrors are the optional sysctls that could not be set.
	SysctlErrors []string `json:"sysctlErrors,omitempty"`
	// ModuleErrors are the modules (user data's, the sysctls') that did
	// not load.
	ModuleErrors []string `json:"moduleErrors,omitempty"`
	// PulledRecords are kubelet's pull records berth wrote for its
	// preloaded images (paths); PulledRecordErrors those it left alone,
	// each with why.
	PulledRecords      []string `json:"pulledRecords,omitempty"`
	PulledRecordErrors []string `json:"pulledRecordErrors,omitempty"`
	// Hostname is the machine's hostname once set from user data (the
	// berth.dev/hostname annotation), over config.hostname.
	Hostname string `json:"hostname,omitempty"`
}

// Services is the services phase's section, rewritten in boot.json as the
// services change after the report.
type Services struct {
	// KernelToKubeletMs is from kernel start to kubelet's first exec.
	KernelToKubeletMs int64              `json:"kernelToKubeletMs,omitempty"`
	Services          []supervise.Status `json:"services"`
	Images            []ImageImport      `json:"images,omitempty"`
	// ForwardPolicy is the FORWARD chain's policy set to ACCEPT, one
	// entry per tool, before any service starts.
	ForwardPolicy []ForwardPolicy `json:"forwardPolicy,omitempty"`
	// TimeWait is the bounded wait for the first NTP sync, which kubelet's
	// start and the image imports wait for (not containerd's); nil without
	// a time client.
	TimeWait *TimeWait `json:"timeWait,omitempty"`
}

// Service returns the named service's status, if the section has it.
func (s *Services) Service(name string) (supervise.Status, bool) {
	if s == nil {
		return supervise.Status{}, false
	}
	for _, st := range s.Services {
		if st.Name == name {
			return st, true
		}
	}
	return supervise.Status{}, false
}

// ImageImport is one image import. StartMs places it on the boot's clock:
// imports run once kubelet is healthy, so a duration alone does not say
// when one ran.
type ImageImport struct {
	Name     string `json:"name"`
	Imported bool   `json:"imported"`
	// StartMs is ms since kernel start.
	StartMs    int64  `json:"startMs"`
	DurationMs int64  `json:"durationMs"`
	Error      string `json:"error,omitempty"`
}

// ForwardPolicy is one tool's part of setting FORWARD's policy.
type ForwardPolicy struct {
	Tool       string `json:"tool"`
	OK         bool   `json:"ok"`
	DurationMs int64  `json:"durationMs"`
	Error      string `json:"error,omitempty"`
}

// TimeWait is the services phase's wait for the first NTP sync, on the
// report's clock (ms since kernel start).
type TimeWait struct {
	StartMs    int64 `json:"startMs"`
	DurationMs int64 `json:"durationMs"`
	Synced     bool  `json:"synced"`
}
