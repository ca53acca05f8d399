package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/berth-node/berth/analyze"
	"github.com/berth-node/berth/report"
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
