package main

import (
	"bytes"
	"fmt"
	"path/filepath"

	"github.com/berth-node/berth/init/analyze"
	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/internal/fsutil"
)

// chartName is the boot chart's file under the demo's output directory.
const chartName = "boot.svg"

// writeChart draws the boot chart (`berth analyze --svg`) of the report
// the console carried. The console's report line comes before the node
// registers; registeredMs is berth's own "node registered" line's
// timestamp, when the console showed one.
func writeChart(outDir string, rep *report.Report, registeredMs int64) (string, error) {
	r := *rep
	if r.RegisteredMs == 0 && registeredMs > 0 {
		r.RegisteredMs = registeredMs
	}
	b, err := analyze.FromReport(&r)
	if err != nil {
		return "", fmt.Errorf("reading the boot report for the chart: %w", err)
	}
	var buf bytes.Buffer
	if err := analyze.WriteSVG(&buf, b); err != nil {
		return "", fmt.Errorf("drawing the boot chart: %w", err)
	}
	path := filepath.Join(outDir, chartName)
	if err := fsutil.WriteFileAtomic(path, buf.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("writing the boot chart: %w", err)
	}
	return path, nil
}

// chart writes the boot chart once boot got as far as the report, whether
// or not the demo got further, and says where it is.
func (d *demo) chart() {
	if d.rep == nil {
		return
	}
	var regMs int64
	if ev, ok := d.watch.seen[nodeRegistered]; ok && ev.GuestMs > 0 {
		regMs = ev.GuestMs
	}
	path, err := writeChart(d.opts.outDir, d.rep, regMs)
	if err != nil {
		fmt.Fprintf(d.out, "demo: %v\n", err)
		return
	}
	fmt.Fprintf(d.out, "boot chart: %s\n", path)
}
