package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/berth-node/berth/init/analyze"
	"github.com/berth-node/berth/init/report"
)

func TestSummarize(t *testing.T) {
	got := summarize([]sample{
		{"phase early": 30, mKernelToBerth: 900},
		{"phase early": 10, mKernelToBerth: 1100},
		{"phase early": 20},
		{"phase early": 50},
	})
	if s := got["phase early"]; s != (stat{N: 4, Min: 10, Median: 20, Max: 50}) {
		t.Errorf("phase early = %+v, want n 4, min 10, median 20 (the lower middle), max 50", s)
	}
	if s := got[mKernelToBerth]; s != (stat{N: 2, Min: 900, Median: 900, Max: 1100}) {
		t.Errorf("kernel → berth = %+v", s)
	}
}

func TestFiguresAndTable(t *testing.T) {
	b, err := analyze.FromReport(&report.Report{KernelToInitMs: 1000, EndMs: 3000, RSSKiB: 20000,
		CPU:    &report.CPU{UserMs: 300, SysMs: 100, ChildrenUserMs: 50},
		Phases: []report.Phase{{Name: "early", StartMs: 1000, DurationMs: 40}, {Name: "modules", StartMs: 1040, DurationMs: 500}}})
	if err != nil {
		t.Fatal(err)
	}
	s := figures(b)
	if s[mKernelToBerth] != 1000 || s[mBerthPart] != 2000 || s[mCPU] != 400 || s[mChildCPU] != 50 || s["phase modules"] != 500 || s[mOwn] != 2000 {
		t.Errorf("figures = %v", s)
	}
	if _, ok := s[mKernelToKubelet]; ok {
		t.Errorf("kubelet exec figure without kubelet: %v", s)
	}
	cur := &result{Variants: map[string]variantResult{"no-config": {Summary: summarize([]sample{s}), Samples: []sample{s}}}}
	base := &result{Variants: map[string]variantResult{"no-config": {Summary: map[string]stat{"phase modules": {N: 1, Min: 1000, Median: 1000, Max: 1000}}}}}
	var out bytes.Buffer
	writeTable(&out, cur, base, map[string][]string{"no-config": {"phase early", "phase modules"}})
	text := out.String()
	for _, want := range []string{"no-config (1 boots):", "base med", "phase modules                         500      500      500       1000      -500 (-50%)"} {
		if !strings.Contains(text, want) {
			t.Errorf("table lacks %q:\n%s", want, text)
		}
	}
	if strings.Index(text, mKernelToBerth) > strings.Index(text, "phase early") || strings.Index(text, "phase early") > strings.Index(text, "phase modules") {
		t.Errorf("want the headline figures, then the phases in pipeline order:\n%s", text)
	}
}

// A join boot's figures: registration and the imports' end, both from
// kubelet's exec.
func TestFiguresJoin(t *testing.T) {
	b, err := analyze.Decode([]byte(`{"kernelToInitMs":1000,"endMs":9000,"registeredMs":8000,
		"phases":[{"name":"services","startMs":2000,"durationMs":7000}],
		"services":{"kernelToKubeletMs":3000,
			"services":[{"name":"containerd","started_at":"2026-01-01T00:00:00Z","ready_ms":900},{"name":"kubelet","started_at":"2026-01-01T00:00:01Z","ready_ms":5000}],
			"images":[{"name":"pause","imported":true,"startMs":2950,"durationMs":2000},{"name":"demo","imported":true,"startMs":4950,"durationMs":1500}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	s := figures(b)
	if s[mKernelToKubelet] != 3000 || s[mKubeletToRegistered] != 5000 || s[mImportsEnd] != 3450 {
		t.Errorf("figures = %v, want kubelet exec 3000, registered +5000, imports end +3450", s)
	}
	// Imports without their start (older reports) give no such figure.
	b.Services.Images[1].StartMs = 0
	if v, ok := figures(b)[mImportsEnd]; ok {
		t.Errorf("imports end %d from a report without the imports' starts", v)
	}
}
