package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// sample is one reading of berth's figures while it supervises.
type sample struct {
	// Minute is the host's minutes since the node's boot report.
	Minute float64 `json:"minute"`
	// Figures are boot.json's live section (rssKiB, heapLiveKiB,
	// goroutines, fds, ...) and /proc/1/status's procRSSKiB and threads,
	// read at the same moment.
	Figures map[string]int64 `json:"figures"`
}

// parseSample reads the output of sampleCmd: boot.json's live object on
// its own line, then /proc/1/status's VmRSS and Threads lines.
func parseSample(out string) (map[string]int64, error) {
	figs := map[string]int64{}
	var live bool
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, `"live":`); ok {
			var m map[string]int64
			if err := json.Unmarshal([]byte(rest), &m); err != nil {
				return nil, fmt.Errorf("boot.json's live section %q: %w", rest, err)
			}
			for k, v := range m {
				figs[k] = v
			}
			live = true
			continue
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		name := map[string]string{"VmRSS": "procRSSKiB", "Threads": "threads"}[key]
		if name == "" {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("/proc/1/status line %q: %w", line, err)
		}
		figs[name] = n
	}
	if !live {
		return nil, fmt.Errorf("no live section in %q", out)
	}
	return figs, nil
}

// series is one figure over the soak.
type series struct {
	N      int   `json:"n"`
	Start  int64 `json:"start"`
	Min    int64 `json:"min"`
	Median int64 `json:"median"`
	Max    int64 `json:"max"`
	End    int64 `json:"end"`
	// PerHour is the least-squares slope over the samples, in the
	// figure's unit per hour: a leak is a slope that stays away from 0
	// as the soak gets longer.
	PerHour float64 `json:"perHour"`
}

// summarize gives each figure's series over the samples that have it,
// in sample order.
func summarize(samples []sample) map[string]series {
	xs, ys := map[string][]float64{}, map[string][]int64{}
	for _, s := range samples {
		for k, v := range s.Figures {
			xs[k] = append(xs[k], s.Minute)
			ys[k] = append(ys[k], v)
		}
	}
	out := map[string]series{}
	for k, y := range ys {
		sorted := slices.Clone(y)
		slices.Sort(sorted)
		out[k] = series{
			N: len(y), Start: y[0], End: y[len(y)-1],
			Min: sorted[0], Max: sorted[len(sorted)-1],
			// The lower middle of an even count: a value a sample had.
			Median:  sorted[(len(sorted)-1)/2],
			PerHour: slope(xs[k], y) * 60,
		}
	}
	return out
}

// slope is the least-squares slope of y over x (per x unit); 0 for fewer
// than two distinct x.
func slope(x []float64, y []int64) float64 {
	n := float64(len(x))
	var sx, sy, sxx, sxy float64
	for i := range x {
		sx += x[i]
		sy += float64(y[i])
		sxx += x[i] * x[i]
		sxy += x[i] * float64(y[i])
	}
	d := n*sxx - sx*sx
	if n < 2 || d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

// writeTable prints the summary, the figures in a fixed order first.
func writeTable(w io.Writer, sum map[string]series, minutes float64) {
	order := []string{"rssKiB", "procRSSKiB", "rssAnonKiB", "rssFileKiB", "heapLiveKiB", "goHeapKiB", "stacksKiB", "goOtherKiB", "goroutines", "threads", "fds"}
	var rest []string
	for k := range sum {
		if !slices.Contains(order, k) {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	fmt.Fprintf(w, "soak: %.0f min of supervising\n", minutes)
	fmt.Fprintf(w, "%-12s %4s %8s %8s %8s %8s %8s %10s\n", "figure", "n", "start", "min", "median", "max", "end", "slope/h")
	for _, k := range append(order, rest...) {
		s, ok := sum[k]
		if !ok {
			continue
		}
		fmt.Fprintf(w, "%-12s %4d %8d %8d %8d %8d %8d %10.1f\n", k, s.N, s.Start, s.Min, s.Median, s.Max, s.End, s.PerHour)
	}
}
