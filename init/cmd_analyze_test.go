package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/network"
)

// TestFinishReportsCPUAndSplit: the report carries berth's CPU time, the
// wall clock at its end and the split of boot into berth's own work and
// the waits outside it; `berth analyze` reads the boot.json it wrote; the
// join watcher's registration lands in boot.json afterwards.
func TestFinishReportsCPUAndSplit(t *testing.T) {
	b, buf := testBoot()
	var now atomic.Int64 // ms since kernel start
	now.Store(1000)
	b.clock = func() time.Duration { return time.Duration(now.Load()) * time.Millisecond }
	b.rep.KernelToInitMs = 1000
	b.reportPath = filepath.Join(t.TempDir(), "boot.json")
	err := b.run(context.Background(), []phase{
		{name: "early", fatal: true, run: func(context.Context, *boot, *slog.Logger) error { now.Add(100); return nil }},
		{name: "network", run: func(_ context.Context, b *boot, _ *slog.Logger) error {
			// 20 ms of link wait, then 300 ms of DHCP, then 80 ms of berth's own.
			b.rep.Network = &network.Result{Mode: "dhcp", Steps: network.Steps{LinkWait: 20, DHCP: 300}}
			now.Add(400)
			return nil
		}},
	})
	b.finish(context.Background(), err)

	data, rerr := os.ReadFile(b.reportPath)
	if rerr != nil {
		t.Fatal(rerr)
	}
	rep, perr := report.ParseLine(report.Prefix + string(data))
	if perr != nil {
		t.Fatal(perr)
	}
	if rep.CPU == nil || rep.CPU.UserMs+rep.CPU.SysMs <= 0 {
		t.Errorf("report CPU = %+v, want berth's own time", rep.CPU)
	}
	if rep.EndWall.IsZero() || time.Since(rep.EndWall) > time.Minute {
		t.Errorf("report endWall = %v, want now", rep.EndWall)
	}
	want := report.Split{BerthMs: 200, WaitMs: 300, Waits: []report.Span{{Name: "dhcp", Phase: "network", StartMs: 1120, DurationMs: 300, Derived: true}}}
	if rep.Split == nil || rep.Split.BerthMs != want.BerthMs || rep.Split.WaitMs != want.WaitMs || len(rep.Split.Waits) != 1 || rep.Split.Waits[0] != want.Waits[0] {
		t.Errorf("report split = %+v, want %+v", rep.Split, want)
	}
	if !strings.Contains(buf.String(), "own_ms=200 waits_ms=300 cpu_ms=") {
		t.Errorf("the boot finished line lacks the split and CPU:\n%s", buf.String())
	}

	b.reported = true
	now.Store(9000)
	jw := &joinWatcher{registered: make(chan struct{}), onRegistered: b.noteRegistered}
	jw.line(`I1122 kubelet_node_status.go:78] "Successfully registered node" node="n"`)
	jw.line(`I1122 kubelet_node_status.go:78] "Successfully registered node" node="n"`)

	var out, errb bytes.Buffer
	if code := runCLI([]string{"analyze", "--svg", filepath.Join(t.TempDir(), "boot.svg"), b.reportPath}, &out, &errb); code != 0 {
		t.Fatalf("berth analyze: code %d, stderr %s", code, errb.String())
	}
	for _, s := range []string{"own work 200 ms, waits outside it 300 ms", "phase network", "dhcp", "boot chart: ", "kubelet never started"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("berth analyze output lacks %q:\n%s", s, out.String())
		}
	}
	data, _ = os.ReadFile(b.reportPath)
	if !strings.Contains(string(data), `"registeredMs":9000`) {
		t.Errorf("boot.json not rewritten with the registration time: %s", data)
	}
}

func TestAnalyzeCLIErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte("not a report"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"analyze", filepath.Join(dir, "missing.json")}, 1, "reading the boot report"},
		{[]string{"analyze", bad}, 1, "BERTH-REPORT"},
		{[]string{"analyze", "a", "b"}, 2, "usage: berth analyze"},
	} {
		var out, errb bytes.Buffer
		if code := runCLI(tc.args, &out, &errb); code != tc.code || !strings.Contains(errb.String(), tc.err) {
			t.Errorf("%v: code %d, stderr %q; want %d and %q", tc.args, code, errb.String(), tc.code, tc.err)
		}
	}
}
