package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/berth-node/berth/init/analyze"
	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/internal/fsutil"
)

// cmdAnalyze reads a boot report, as systemd-analyze reads a boot: blame,
// the critical chains to kubelet and the node's registration, the waits
// outside berth, and with --svg a boot chart.
func cmdAnalyze(e env, args []string) int {
	fs := flag.NewFlagSet("analyze", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	svg := fs.String("svg", "", "also write the boot chart (SVG) to this file")
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: berth analyze [--svg FILE] [REPORT]\n\nREPORT is boot.json (default %s) or a console log with a BERTH-REPORT line.\n", report.DefaultPath)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 1 {
		fs.Usage()
		return 2
	}
	path := report.DefaultPath
	if fs.NArg() == 1 {
		path = fs.Arg(0)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(e.stderr, "berth analyze: reading the boot report: %v\n", err)
		return 1
	}
	b, err := analyze.Decode(data)
	if err != nil {
		fmt.Fprintf(e.stderr, "berth analyze: %s: %v\n", path, err)
		return 1
	}
	if err := analyze.WriteText(e.stdout, b); err != nil {
		fmt.Fprintf(e.stderr, "berth analyze: writing the analysis: %v\n", err)
		return 1
	}
	if *svg != "" {
		var buf bytes.Buffer
		if err := analyze.WriteSVG(&buf, b); err != nil {
			fmt.Fprintf(e.stderr, "berth analyze: drawing the boot chart: %v\n", err)
			return 1
		}
		if err := fsutil.WriteFileAtomic(*svg, buf.Bytes(), 0o644); err != nil {
			fmt.Fprintf(e.stderr, "berth analyze: writing the boot chart: %v\n", err)
			return 1
		}
		fmt.Fprintf(e.stdout, "\nboot chart: %s\n", *svg)
	}
	return 0
}
