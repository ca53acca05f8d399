package supervise

import (
	"time"

	"github.com/berth-node/berth/runtime/rlimit"
)

// The runner owns its spec: the plan decides the services' specs and
// imports these types; the supervisor runs them and imports nothing of
// the plan (as Talos's runner.Args is the runner's, not its callers').

// ProbeKind says how a service's readiness is checked.
type ProbeKind string

const (
	// ProbeContainerdVersion calls containerd's Version API on the socket
	// in Target.
	ProbeContainerdVersion ProbeKind = "containerd-version"
	// ProbeHTTP GETs the URL in Target and wants 200.
	ProbeHTTP ProbeKind = "http"
)

// Probe is a readiness or health check.
type Probe struct {
	Kind   ProbeKind
	Target string
}

// Spec is one long-running process the supervisor starts.
type Spec struct {
	Name string
	Argv []string
	// Env is KEY=VALUE, sorted by key; the whole environment.
	Env         []string
	Dir         string
	Cgroup      string
	OOMScoreAdj int
	// DependsOn are services that must be ready before this one starts.
	DependsOn   []string
	Ready       Probe
	StopTimeout time.Duration
	// Rlimits are set before the service's first instruction (what
	// systemd's Limit*= settings do); none keeps PID 1's.
	Rlimits []rlimit.Limit
}
