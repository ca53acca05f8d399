package analyze

import (
	"math"
	"slices"
	"strings"

	"github.com/berth-node/berth/init/report"
)

// Wait names, as they appear in the report's split and on the chart.
const (
	WaitDHCP = "dhcp"
	WaitIMDS = "imds"
	WaitMkfs = "mkfs"
	// WaitNTP is the services phase's bounded wait for the first NTP sync,
	// which kubelet's start waits for. The report records it
	// (services.timeWait); an older report, whose wait came before
	// containerd's start and was not recorded, has it as the gap from the
	// phase's start to containerd's exec, which also holds the
	// supervisor's setup (a few ms).
	WaitNTP = "ntp"
	// Service waits are "<service> ready": from the service's first exec
	// to its first ready, or to the report when it never got ready.
	waitReadySuffix = " ready"
	// Image waits are "import <image>".
	waitImportPrefix = "import "
)

// Waits are the spans of boot spent waiting on something outside berth,
// in start order. This is the one place that says what a wait is:
//
//   - network: the DHCPv4 exchange (the server's answers);
//   - config: the IMDS calls (EC2's metadata service), as their summed
//     time from the phase's start, at most the phase;
//   - storage: mkfs (an external tool writing the disks);
//   - services: the first NTP sync, each service's start up to ready
//     (containerd's socket, kubelet's healthz), and each image import (ctr
//     and containerd doing the work).
//
// The rest of berth's part of boot is its own work: mounts, module loads,
// netlink, the plan, the files, the supervisor. Spans the sections record
// only as durations are placed from the order in which the phase runs its
// steps, and marked Derived.
func Waits(b *Boot) []report.Span {
	var out []report.Span
	add := func(s report.Span) {
		if s.DurationMs > 0 {
			out = append(out, s)
		}
	}
	if n := b.Network; n != nil {
		if p, ok := b.phase("network"); ok {
			// network.Up: link wait, entropy wait, then the DHCP exchange.
			add(report.Span{Name: WaitDHCP, Phase: p.Name, StartMs: p.StartMs + roundMs(float64(n.Steps.LinkWait+n.Steps.Entropy)),
				DurationMs: roundMs(float64(n.Steps.DHCP)), Derived: true})
		}
	}
	if c := b.Config; c != nil {
		if p, ok := b.phase("config"); ok {
			var sum int64
			for _, call := range c.Calls {
				sum += int64(call.DurationMs) // whole ms each, as schema 1 summed them
			}
			// Calls may overlap: the phase bounds their sum.
			add(report.Span{Name: WaitIMDS, Phase: p.Name, StartMs: p.StartMs, DurationMs: min(sum, p.DurationMs), Derived: true})
		}
	}
	if s := b.Storage; s != nil {
		if p, ok := b.phase("storage"); ok {
			at := float64(p.StartMs)
			for _, st := range s.Steps {
				if st.Name == "mkfs" {
					add(report.Span{Name: WaitMkfs, Phase: p.Name, StartMs: roundMs(at), DurationMs: roundMs(st.DurationMs), Derived: true})
				}
				at += st.DurationMs
			}
		}
	}
	out = append(out, serviceWaits(b)...)
	slices.SortStableFunc(out, func(a, c report.Span) int { return int(a.StartMs - c.StartMs) })
	return out
}

// serviceWaits are the services phase's waits (see Waits).
func serviceWaits(b *Boot) []report.Span {
	sv := b.Services
	p, ok := b.phase("services")
	if sv == nil || !ok {
		return nil
	}
	end := b.Report.EndMs
	var out []report.Span
	add := func(s report.Span) {
		if s.DurationMs > 0 {
			out = append(out, s)
		}
	}
	if tw := sv.TimeWait; tw != nil {
		add(report.Span{Name: WaitNTP, Phase: p.Name, StartMs: tw.StartMs, DurationMs: tw.DurationMs})
	}
	var containerdReady int64
	for i, s := range sv.Services {
		_, at, ok := b.serviceStart(s.Name)
		if !ok {
			continue
		}
		if i == 0 && b.Time != nil && sv.TimeWait == nil {
			add(report.Span{Name: WaitNTP, Phase: p.Name, StartMs: p.StartMs, DurationMs: at - p.StartMs, Derived: true})
		}
		d := s.ReadyMs
		if d == 0 {
			d = end - at
		}
		add(report.Span{Name: s.Name + waitReadySuffix, Phase: p.Name, StartMs: at, DurationMs: d})
		if s.Name == "containerd" && s.ReadyMs > 0 {
			containerdReady = at + s.ReadyMs
		}
	}
	next := containerdReady
	for _, im := range sv.Images {
		sp := report.Span{Name: waitImportPrefix + im.Name, Phase: p.Name, StartMs: im.StartMs, DurationMs: im.DurationMs}
		if sp.StartMs == 0 {
			if next == 0 {
				continue
			}
			sp.StartMs, sp.Derived = next, true
		}
		next = sp.StartMs + sp.DurationMs
		add(sp)
	}
	return out
}

// IsServiceWait says whether a wait is a service's start to ready.
func IsServiceWait(name string) bool { return strings.HasSuffix(name, waitReadySuffix) }

// IsImportWait says whether a wait is an image import.
func IsImportWait(name string) bool { return strings.HasPrefix(name, waitImportPrefix) }

// Split divides berth's part of boot into waits (time covered by at least
// one wait, overlaps counted once) and berth's own work (the rest).
func Split(b *Boot) report.Split {
	r := b.Report
	waits := Waits(b)
	var covered int64
	for _, iv := range union(waits, r.KernelToInitMs, r.EndMs) {
		covered += iv[1] - iv[0]
	}
	total := max(r.EndMs-r.KernelToInitMs, 0)
	if waits == nil {
		waits = []report.Span{}
	}
	return report.Split{BerthMs: total - covered, WaitMs: covered, Waits: waits}
}

// SplitOf is Split for PID 1, on the report it is about to print.
func SplitOf(r *report.Report) (report.Split, error) {
	b, err := FromReport(r)
	if err != nil {
		return report.Split{}, err
	}
	return Split(b), nil
}

func roundMs(ms float64) int64 { return int64(math.Round(ms)) }
