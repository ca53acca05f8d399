// Package analyze reads a boot report the way systemd-analyze reads a
// boot: which steps were slowest (blame), which chain of steps kubelet's
// start and the node's registration waited for (critical chain), how the
// time splits between berth's own work and the waits outside it (DHCP,
// IMDS, mkfs, the first NTP sync, containerd, image imports, kubelet), and
// a boot chart in SVG. It is pure: it takes a decoded report and writes
// text; `berth analyze` reads the file and PID 1 stores Split in the report.
package analyze

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/berth-node/berth/init/report"
)

// Boot is a report with the sections analyze reads decoded into its own
// views of them: report.Report keeps sections as whatever each phase put
// there (the phases' structs on the node, generic JSON once read back).
type Boot struct {
	Report   *report.Report
	Network  *networkSection
	Config   *configSection
	Storage  *storageSection
	Time     *timeSection
	Services *servicesSection
}

// The views name only the fields analyze uses; the JSON names are the
// sections' own (network.Result, init's configReport, localstorage.Result,
// timesync.Status, init's serviceReport).
type networkSection struct {
	Mode  string `json:"mode"`
	Steps struct {
		LinkWaitMs float64 `json:"linkWaitMs"`
		EntropyMs  float64 `json:"entropyMs"`
		DHCPMs     float64 `json:"dhcpMs"`
	} `json:"steps"`
}

type configSection struct {
	Calls []struct {
		Path     string        `json:"path"`
		Duration time.Duration `json:"duration"`
	} `json:"imdsCalls"`
}

type storageSection struct {
	Status string `json:"status"`
	// Steps run one after the other, in this order.
	Steps []struct {
		Name string  `json:"name"`
		MS   float64 `json:"ms"`
	} `json:"steps"`
}

type timeSection struct {
	Synced      bool  `json:"synced"`
	FirstSyncMs int64 `json:"firstSyncMs"`
}

type servicesSection struct {
	KernelToKubeletMs int64     `json:"kernelToKubeletMs"`
	Services          []service `json:"services"`
	Images            []image   `json:"images"`
	// TimeWait is the first NTP sync's wait beside containerd's start;
	// reports from before it record none (the wait came first, then).
	TimeWait *struct {
		StartMs    int64 `json:"startMs"`
		DurationMs int64 `json:"durationMs"`
	} `json:"timeWait"`
}

type service struct {
	Name          string    `json:"name"`
	State         string    `json:"state"`
	Restarts      int       `json:"restarts"`
	StartedAt     time.Time `json:"started_at"`
	ReadyMs       int64     `json:"ready_ms"`
	LastError     string    `json:"last_error"`
	LastErrorLine string    `json:"last_error_line"`
}

type image struct {
	Name     string `json:"name"`
	Imported bool   `json:"imported"`
	// StartMs is ms since kernel start, when the report records it; the
	// imports are otherwise placed one after the other from containerd's
	// readiness, which is how the services phase runs them.
	StartMs    int64  `json:"startMs"`
	DurationMs int64  `json:"durationMs"`
	Error      string `json:"error"`
}

// Decode reads boot.json, or a console log holding BERTH-REPORT lines (the
// last one wins: a reboot's log has one per boot).
func Decode(data []byte) (*Boot, error) {
	trimmed := bytes.TrimSpace(data)
	if bytes.HasPrefix(trimmed, []byte("{")) {
		var r report.Report
		if err := json.Unmarshal(trimmed, &r); err != nil {
			return nil, fmt.Errorf("decoding the boot report: %w", err)
		}
		return FromReport(&r)
	}
	i := bytes.LastIndex(data, []byte(report.Prefix))
	if i < 0 {
		return nil, fmt.Errorf("neither boot.json nor a console log with a %s line", strings.TrimSpace(report.Prefix))
	}
	line, _, _ := bytes.Cut(data[i:], []byte("\n"))
	r, err := report.ParseLine(string(line))
	if err != nil {
		return nil, err
	}
	return FromReport(r)
}

// FromReport decodes the sections analyze reads, from whatever the report
// holds there (a phase's struct or generic JSON).
func FromReport(r *report.Report) (*Boot, error) {
	b := &Boot{Report: r}
	for _, s := range []struct {
		name string
		src  any
		dst  any
	}{
		{"network", r.Network, &b.Network},
		{"config", r.Config, &b.Config},
		{"storage", r.Storage, &b.Storage},
		{"time", r.Time, &b.Time},
		{"services", r.Services, &b.Services},
	} {
		if s.src == nil {
			continue
		}
		raw, err := json.Marshal(s.src)
		if err != nil {
			return nil, fmt.Errorf("re-encoding the report's %s section: %w", s.name, err)
		}
		if err := json.Unmarshal(raw, s.dst); err != nil {
			return nil, fmt.Errorf("decoding the report's %s section: %w", s.name, err)
		}
	}
	return b, nil
}

// phase returns the named phase, if boot got to it.
func (b *Boot) phase(name string) (report.Phase, bool) {
	for _, p := range b.Report.Phases {
		if p.Name == name {
			return p, true
		}
	}
	return report.Phase{}, false
}

// kernelMs places a wall-clock time (a service's started_at) on the
// kernel's clock: by the report's own wall clock at EndMs, or, in reports
// from before EndWall, by kubelet's start, the one service the report
// places itself. False when neither anchor is there.
func (b *Boot) kernelMs(t time.Time) (int64, bool) {
	r := b.Report
	if t.IsZero() {
		return 0, false
	}
	if !r.EndWall.IsZero() {
		return r.EndMs - r.EndWall.Sub(t).Milliseconds(), true
	}
	if s := b.Services; s != nil && s.KernelToKubeletMs > 0 {
		for _, sv := range s.Services {
			if sv.Name == "kubelet" && !sv.StartedAt.IsZero() {
				return s.KernelToKubeletMs + t.Sub(sv.StartedAt).Milliseconds(), true
			}
		}
	}
	return 0, false
}

// serviceStart is when the named service first ran, ms since kernel start.
func (b *Boot) serviceStart(name string) (service, int64, bool) {
	if b.Services == nil {
		return service{}, 0, false
	}
	for _, s := range b.Services.Services {
		if s.Name == name {
			if name == "kubelet" && b.Services.KernelToKubeletMs > 0 {
				// Placed on the node from the monotonic clock: exact.
				return s, b.Services.KernelToKubeletMs, true
			}
			at, ok := b.kernelMs(s.StartedAt)
			return s, at, ok
		}
	}
	return service{}, 0, false
}
