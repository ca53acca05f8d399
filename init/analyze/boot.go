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
	"fmt"
	"strings"
	"time"

	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/mounts/localstorage"
	"github.com/berth-node/berth/network"
	"github.com/berth-node/berth/network/timesync"
	"github.com/berth-node/berth/runtime/supervise"
)

// Boot is a decoded report, with the sections analyze reads at hand. The
// sections are the report's own types (report.Report's typed sections),
// the ones the node writes: there is no second copy of the schema here.
type Boot struct {
	Report   *report.Report
	Network  *network.Result
	Config   *report.Config
	Storage  *localstorage.Result
	Time     *timesync.Status
	Services *report.Services
}

// Decode reads boot.json, or a console log holding BERTH-REPORT lines (the
// last one wins: a reboot's log has one per boot), in any schema
// report.Decode reads.
func Decode(data []byte) (*Boot, error) {
	trimmed := bytes.TrimSpace(data)
	if bytes.HasPrefix(trimmed, []byte("{")) {
		r, err := report.Decode(trimmed)
		if err != nil {
			return nil, err
		}
		return FromReport(r)
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

// FromReport gives the report's sections their places in a Boot.
func FromReport(r *report.Report) (*Boot, error) {
	if r == nil {
		return nil, fmt.Errorf("no boot report")
	}
	return &Boot{Report: r, Network: r.Network, Config: r.Config, Storage: r.Storage, Time: r.Time, Services: r.Services}, nil
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

// kernelMs places a wall-clock time (a service's startedAt) on the
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
func (b *Boot) serviceStart(name string) (supervise.Status, int64, bool) {
	if b.Services == nil {
		return supervise.Status{}, 0, false
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
	return supervise.Status{}, 0, false
}
