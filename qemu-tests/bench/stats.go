package main

import (
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/berth-node/berth/init/analyze"
)

// sample is one boot's figures, by metric name, in ms (KiB for RSS).
type sample map[string]int64

// Metric names besides "phase <name>".
const (
	mKernelToBerth   = "kernel → berth"
	mKernelToKubelet = "kernel → kubelet exec"
	mInitToKubelet   = "berth → kubelet exec"
	// mKubeletToRegistered is from kubelet's exec to berth's line saying
	// kubelet registered the node (join boots only).
	mKubeletToRegistered = "kubelet exec → registered"
	// mImportsEnd is from kubelet's exec to the end of the last image
	// import (negative: they ended before kubelet started), for reports
	// whose imports carry their start.
	mImportsEnd = "kubelet exec → imports end"
	mBerthPart  = "berth's part (to the report)"
	mOwn        = "berth's own work"
	mWaits      = "waits outside berth"
	mCPU        = "berth CPU (user+sys)"
	mChildCPU   = "children CPU (user+sys)"
	mRSS        = "RSS KiB"
)

// figures reads one boot's sample from its report.
func figures(b *analyze.Boot) sample {
	r := b.Report
	s := sample{mKernelToBerth: r.KernelToInitMs, mBerthPart: r.EndMs - r.KernelToInitMs, mRSS: r.RSSKiB}
	for _, p := range r.Phases {
		s["phase "+p.Name] = p.DurationMs
	}
	if c := analyze.Chains(b); len(c) > 0 && c[0].Missing == "" {
		s[mKernelToKubelet] = c[0].AtMs
		s[mInitToKubelet] = c[0].AtMs - r.KernelToInitMs
		if r.RegisteredMs > 0 {
			s[mKubeletToRegistered] = r.RegisteredMs - c[0].AtMs
		}
		if sv := b.Services; sv != nil && len(sv.Images) > 0 {
			var end int64
			for _, im := range sv.Images {
				if im.StartMs == 0 {
					end = 0
					break
				}
				end = max(end, im.StartMs+im.DurationMs)
			}
			if end > 0 {
				s[mImportsEnd] = end - c[0].AtMs
			}
		}
	}
	sp := analyze.Split(b)
	s[mOwn], s[mWaits] = sp.BerthMs, sp.WaitMs
	if c := r.CPU; c != nil {
		s[mCPU], s[mChildCPU] = c.UserMs+c.SysMs, c.ChildrenUserMs+c.ChildrenSysMs
	}
	return s
}

// stat is one metric over the boots of a run.
type stat struct {
	N      int   `json:"n"`
	Min    int64 `json:"min"`
	Median int64 `json:"median"`
	Max    int64 `json:"max"`
}

// summarize gives each metric's min, median and max over the samples that
// have it (the median of an even count is the lower middle one: a value
// some boot really had).
func summarize(samples []sample) map[string]stat {
	byName := map[string][]int64{}
	for _, s := range samples {
		for k, v := range s {
			byName[k] = append(byName[k], v)
		}
	}
	out := map[string]stat{}
	for k, vs := range byName {
		slices.Sort(vs)
		out[k] = stat{N: len(vs), Min: vs[0], Median: vs[(len(vs)-1)/2], Max: vs[len(vs)-1]}
	}
	return out
}

// result is bench.json: per variant (no config, join), the summary and
// every boot's sample.
type result struct {
	Image    string                   `json:"image"`
	Boots    int                      `json:"boots"`
	Variants map[string]variantResult `json:"variants"`
}

type variantResult struct {
	Summary map[string]stat `json:"summary"`
	Samples []sample        `json:"samples"`
	// Failed are the boots that gave no report, with why.
	Failed []string `json:"failed,omitempty"`
}

// writeTable prints each variant's min/median/max, and with a base the
// base's median and the change.
func writeTable(w io.Writer, res, base *result, phaseOrder map[string][]string) {
	variants := make([]string, 0, len(res.Variants))
	for v := range res.Variants {
		variants = append(variants, v)
	}
	sort.Strings(variants)
	for _, v := range variants {
		vr := res.Variants[v]
		fmt.Fprintf(w, "\n%s (%d boots", v, len(vr.Samples))
		if len(vr.Failed) > 0 {
			fmt.Fprintf(w, ", %d without a report", len(vr.Failed))
		}
		fmt.Fprintln(w, "):")
		hdr := fmt.Sprintf("  %-32s %8s %8s %8s", "", "min", "median", "max")
		var bv map[string]stat
		if base != nil {
			bv = base.Variants[v].Summary
			hdr += fmt.Sprintf(" %10s %9s", "base med", "change")
		}
		fmt.Fprintln(w, hdr)
		for _, name := range orderedNames(vr.Summary, phaseOrder[v]) {
			s := vr.Summary[name]
			line := fmt.Sprintf("  %-32s %8d %8d %8d", name, s.Min, s.Median, s.Max)
			if bs, ok := bv[name]; ok {
				line += fmt.Sprintf(" %10d %+9d", bs.Median, s.Median-bs.Median)
				if bs.Median != 0 {
					line += fmt.Sprintf(" (%+.0f%%)", 100*float64(s.Median-bs.Median)/float64(bs.Median))
				}
			}
			fmt.Fprintln(w, line)
		}
	}
}

// headline are the figures the table shows first, in this order.
var headline = []string{mKernelToBerth, mKernelToKubelet, mInitToKubelet, mKubeletToRegistered, mImportsEnd, mBerthPart, mOwn, mWaits, mCPU, mChildCPU, mRSS}

// orderedNames puts the headline figures first, then the phases in
// pipeline order, then anything else by name.
func orderedNames(sum map[string]stat, phases []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, group := range [][]string{headline, phases} {
		for _, n := range group {
			if _, ok := sum[n]; ok && !seen[n] {
				out, seen[n] = append(out, n), true
			}
		}
	}
	var rest []string
	for n := range sum {
		if !seen[n] {
			rest = append(rest, n)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}
