package analyze

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/berth-node/berth/init/report"
)

// Kind is what a bar on the timeline is.
type Kind string

const (
	KindKernel  Kind = "kernel"  // kernel start to berth's first line
	KindPhase   Kind = "phase"   // one of berth's boot phases
	KindService Kind = "service" // a service from its first exec to ready
	KindImage   Kind = "image"   // one image import
	KindWait    Kind = "wait"    // a wait outside berth (Waits)
)

// Bar is one span on the timeline, ms since kernel start.
type Bar struct {
	Name       string
	Kind       Kind
	StartMs    int64
	DurationMs int64
	// Note says more: a phase's error, a service's state.
	Note string
	// Failed marks a phase that failed, a service never ready, an import
	// that failed.
	Failed bool
}

// EndMs is when the bar ends.
func (b Bar) EndMs() int64 { return b.StartMs + b.DurationMs }

// Bars are the chart's rows: each phase, each service (first exec to
// ready) and each image import, in start order (pipeline order on ties).
func Bars(b *Boot) []Bar {
	var out []Bar
	for _, p := range b.Report.Phases {
		out = append(out, Bar{Name: p.Name, Kind: KindPhase, StartMs: p.StartMs, DurationMs: p.DurationMs, Note: p.Error, Failed: p.Error != ""})
	}
	out = append(out, serviceBars(b)...)
	slices.SortStableFunc(out, func(x, y Bar) int { return cmp.Compare(x.StartMs, y.StartMs) })
	return out
}

// serviceBars are the services and image imports, placed as Waits places
// them.
func serviceBars(b *Boot) []Bar {
	if b.Services == nil {
		return nil
	}
	ws := serviceWaits(b)
	var out []Bar
	for _, s := range b.Services.Services {
		i := slices.IndexFunc(ws, func(w report.Span) bool { return w.Name == s.Name+waitReadySuffix })
		if i < 0 {
			continue
		}
		bar := Bar{Name: s.Name, Kind: KindService, StartMs: ws[i].StartMs, DurationMs: ws[i].DurationMs}
		switch {
		case s.ReadyMs == 0:
			bar.Failed = true
			bar.Note = fmt.Sprintf("never ready: %s, %d restarts", s.State, s.Restarts)
			if why := cmp.Or(s.ExitErrorLine, s.LastErrorLine, s.LastError); why != "" {
				bar.Note += ": " + why
			}
		case s.Restarts > 0:
			bar.Note = fmt.Sprintf("%d restarts since", s.Restarts)
		}
		out = append(out, bar)
	}
	for _, im := range b.Services.Images {
		i := slices.IndexFunc(ws, func(w report.Span) bool { return w.Name == waitImportPrefix+im.Name })
		if i < 0 {
			continue
		}
		bar := Bar{Name: im.Name, Kind: KindImage, StartMs: ws[i].StartMs, DurationMs: ws[i].DurationMs}
		switch {
		case im.Error != "":
			bar.Failed, bar.Note = true, "failed: "+im.Error
		case !im.Imported:
			bar.Note = "already present"
		}
		out = append(out, bar)
	}
	return out
}

// Blame is the phases, services and image imports, slowest first.
func Blame(b *Boot) []Bar {
	out := Bars(b)
	slices.SortStableFunc(out, func(x, y Bar) int { return cmp.Compare(y.DurationMs, x.DurationMs) })
	return out
}

// Chain is the chain of steps a milestone waited for: each link is the
// step that ended last before the next one started, back to the kernel.
type Chain struct {
	// Target names the milestone; AtMs is when it happened (0: never).
	Target string
	AtMs   int64
	Links  []Link
	// Missing says why the milestone is not in the report.
	Missing string
}

// Link is one step of a chain; GapMs is the time from its end to the
// next link's start (berth's bookkeeping, or a step the report does not
// time).
type Link struct {
	Bar
	GapMs int64
}

// Chains are the critical chains to kubelet's exec and to the node's
// registration with the API server (to kubelet's health when the report
// has no registration time yet).
func Chains(b *Boot) []Chain {
	_, kexec, started := b.serviceStart("kubelet")
	toExec := Chain{Target: "kubelet exec"}
	if !started {
		toExec.Missing = "kubelet never started"
		if w := waitingFor(b); w != "" {
			toExec.Missing += ": " + w
		}
		return []Chain{toExec, {Target: "node registered", Missing: toExec.Missing}}
	}
	toExec.AtMs = kexec
	toExec.Links = chainTo(candidates(b), kexec)

	ready := Chain{Target: "node registered", AtMs: b.Report.RegisteredMs}
	kubelet := Bar{Name: "kubelet", Kind: KindService, StartMs: kexec}
	if ready.AtMs == 0 {
		k, _, _ := b.serviceStart("kubelet")
		if k.ReadyMs == 0 {
			ready.Missing = "the report has no registration time and kubelet never got healthy"
			return []Chain{toExec, ready}
		}
		ready.Target = "kubelet healthy (the report has no registration time)"
		ready.AtMs = kexec + k.ReadyMs
	}
	kubelet.DurationMs = ready.AtMs - kexec
	ready.Links = append(slices.Clone(toExec.Links), Link{Bar: kubelet})
	return []Chain{toExec, ready}
}

// waitingFor names the first service before kubelet that never got ready.
func waitingFor(b *Boot) string {
	if b.Services == nil {
		return "no services ran"
	}
	for _, s := range b.Services.Services {
		if s.Name != "kubelet" && s.ReadyMs == 0 {
			return fmt.Sprintf("%s was never ready (%s, %d restarts)", s.Name, s.State, s.Restarts)
		}
	}
	return ""
}

// candidates are the steps a chain can pass through: the kernel, the
// phases (the services phase by its steps, when the report has them), the
// NTP wait, the services and the image imports.
func candidates(b *Boot) []Bar {
	r := b.Report
	out := []Bar{{Name: "kernel", Kind: KindKernel, DurationMs: r.KernelToInitMs}}
	for _, p := range r.Phases {
		if p.Name == "services" && b.Services != nil {
			continue
		}
		out = append(out, Bar{Name: p.Name, Kind: KindPhase, StartMs: p.StartMs, DurationMs: p.DurationMs, Note: p.Error, Failed: p.Error != ""})
	}
	for _, w := range serviceWaits(b) {
		if w.Name == WaitNTP {
			out = append(out, Bar{Name: "first NTP sync", Kind: KindWait, StartMs: w.StartMs, DurationMs: w.DurationMs})
		}
	}
	return append(out, serviceBars(b)...)
}

// chainSlackMs is the rounding the node's ms figures allow: a step may end
// that much after the next one starts, and gaps this small are noise.
const chainSlackMs = 2

// chainTo walks back from at: the link before a point is the step that
// ended last at or before it (a step that started after it cannot be).
func chainTo(cands []Bar, at int64) []Link {
	var links []Link
	for at > 0 {
		best := -1
		for i, c := range cands {
			if c.StartMs >= at || c.EndMs() > at+chainSlackMs {
				continue
			}
			if best < 0 || c.EndMs() > cands[best].EndMs() || (c.EndMs() == cands[best].EndMs() && c.DurationMs > cands[best].DurationMs) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		c := cands[best]
		links = append(links, Link{Bar: c, GapMs: max(at-c.EndMs(), 0)})
		at = c.StartMs
	}
	slices.Reverse(links)
	return links
}

// label is a bar's name with its kind, for text.
func (b Bar) label() string {
	switch b.Kind {
	case KindPhase:
		return "phase " + b.Name
	case KindImage:
		return "import " + b.Name
	case KindService:
		return b.Name
	default:
		return b.Name
	}
}

// oneLine keeps the first line of a note, for one-line rows.
func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// Rows places the bars (in Bars' order) on the chart's rows: a row each
// for phases and services; image imports in lanes, each import in the
// first lane free at its start, so imports one after the other share a
// row and those run side by side show as
// parallel lanes. It returns each bar's row, each row's first bar and
// the number of rows.
func Rows(bars []Bar) (rowOf []int, first []int, n int) {
	rowOf = make([]int, len(bars))
	var laneRow []int   // the row of each import lane
	var laneEnd []int64 // when each lane's last import ends
	for i, x := range bars {
		if x.Kind == KindImage {
			lane := slices.IndexFunc(laneEnd, func(end int64) bool { return end <= x.StartMs })
			if lane >= 0 {
				rowOf[i], laneEnd[lane] = laneRow[lane], x.EndMs()
				continue
			}
			laneRow, laneEnd = append(laneRow, n), append(laneEnd, x.EndMs())
		}
		rowOf[i] = n
		first = append(first, i)
		n++
	}
	return rowOf, first, n
}
