package report

import (
	"bytes"
	"flag"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/config/imds"
	"github.com/berth-node/berth/internal/golden"
	"github.com/berth-node/berth/mounts/localstorage"
	"github.com/berth-node/berth/runtime/reaper"
	"github.com/berth-node/berth/runtime/supervise"
	"golang.org/x/sys/unix"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func sample() *Report {
	return &Report{
		SchemaVersion:  SchemaVersion,
		Version:        "v0.1.0-test",
		BootID:         "3f1c0e9a-5b7d-4c1e-9a2b-8d6e0f4a1b2c",
		KernelToInitMs: 812,
		EndMs:          1460,
		Phases: []Phase{
			{Name: "early", StartMs: 812, DurationMs: 9},
			{Name: "modules", StartMs: 821, DurationMs: 512, Error: "no preload list: reading image manifest: open /etc/berth/manifest.json: no such file or directory"},
			{Name: "root", StartMs: 1333, DurationMs: 120},
		},
		Modules: []string{"virtio_net", "virtio_blk", "button"},
		RSSKiB:  11264,
		CPU:     &CPU{UserMs: 120, SysMs: 80, ChildrenUserMs: 30, ChildrenSysMs: 12},
		Split: &Split{BerthMs: 600, WaitMs: 48, Waits: []Span{
			{Name: "dhcp", Phase: "network", StartMs: 1400, DurationMs: 48, Derived: true},
		}},
		EndWall: time.Date(2026, 11, 24, 1, 47, 30, 123000000, time.UTC),
		OK:      true,
		Root:    map[string]string{"image": "/root.erofs", "fstype": "erofs"},
		Config: &Config{IMDS: "http://169.254.169.254", Sources: []string{"imds"},
			Calls: []imds.CallTiming{{Path: "/latest/user-data", Endpoint: "http://169.254.169.254", Attempts: 1, DurationMs: 4.25, Status: 200}}},
		Plan:    &Plan{NodeName: "i-0123456789abcdef0", MaxPods: 29, Services: []string{"containerd", "kubelet"}},
		Apply:   &Apply{Files: []string{"/etc/kubernetes/kubelet/config.json"}},
		Storage: &localstorage.Result{Status: localstorage.StatusReady, Steps: []localstorage.StepDuration{{Name: "mkfs", DurationMs: 812.5}}},
		Services: &Services{KernelToKubeletMs: 1300, Services: []supervise.Status{{
			Name: "kubelet", State: supervise.StateReady, Restarts: 1, ReadyMs: 900,
			StartedAt:  time.Date(2026, 11, 24, 1, 47, 29, 0, time.UTC),
			LastExit:   &reaper.ExitStatus{Code: 1},
			LastExitAt: time.Date(2026, 11, 24, 1, 47, 28, 0, time.UTC),
			LastError:  "not ready in time", LastErrorLine: "E1124 x509: bad", LogTail: []string{"I1124 started"},
		}}},
	}
}

func TestJSONGolden(t *testing.T) {
	line, err := sample().Line()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(line, "\n") {
		t.Fatalf("Line has a newline: %q", line)
	}
	goldenPath := filepath.Join("testdata", "report.golden")
	golden.Check(t, goldenPath, []byte(line+"\n"), *update)
}

func TestEmptySectionsOmittedAndEmptyListsKept(t *testing.T) {
	r := &Report{SchemaVersion: SchemaVersion, Version: "v", Phases: []Phase{}, Modules: []string{}}
	b, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"schemaVersion":2,"version":"v","kernelToInitMs":0,"endMs":0,"phases":[],"modules":[],"rssKiB":0,"ok":false}`
	if string(b) != want {
		t.Errorf("JSON = %s\nwant   %s", b, want)
	}
}

func TestWriteAndParseLineRoundTrip(t *testing.T) {
	r := sample()
	path := filepath.Join(t.TempDir(), "run", "berth", "boot.json")
	if err := r.Write(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := r.Line()
	if string(data) != strings.TrimPrefix(line, Prefix)+"\n" {
		t.Errorf("boot.json is not the JSON of the console line:\n%s\n%s", data, line)
	}
	got, err := ParseLine("\x1b[0mnoise " + line + "\r")
	if err != nil {
		t.Fatal(err)
	}
	r.Root = map[string]any{"image": "/root.erofs", "fstype": "erofs"} // JSON gives back map[string]any
	if !reflect.DeepEqual(got, r) {
		t.Errorf("ParseLine = %+v\nwant %+v", got, r)
	}
	if _, err := ParseLine("no report here"); err == nil {
		t.Error("ParseLine accepted a line without the prefix")
	}
	if _, err := ParseLine(Prefix + "{broken"); err == nil {
		t.Error("ParseLine accepted broken JSON")
	}
}

func TestTimer(t *testing.T) {
	now := 100 * time.Millisecond
	clock := func() time.Duration { return now }
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	r := &Report{}
	tm := r.Start(log, clock, "early")
	now += 42 * time.Millisecond
	p := tm.End(nil)
	tm2 := r.Start(log, clock, "root")
	now += 7 * time.Millisecond
	tm2.End(os.ErrNotExist)

	want := []Phase{{Name: "early", StartMs: 100, DurationMs: 42}, {Name: "root", StartMs: 142, DurationMs: 7, Error: "file does not exist"}}
	if !reflect.DeepEqual(r.Phases, want) || p != want[0] {
		t.Errorf("phases = %+v, want %+v", r.Phases, want)
	}
	logs := buf.String()
	for _, s := range []string{`level=INFO msg="phase done" duration_ms=42`, `level=ERROR msg="phase failed" duration_ms=7 err="file does not exist"`} {
		if !strings.Contains(logs, s) {
			t.Errorf("log lacks %q:\n%s", s, logs)
		}
	}
}

func TestCPUFromRusage(t *testing.T) {
	self := unix.Rusage{Utime: unix.Timeval{Sec: 1, Usec: 250999}, Stime: unix.Timeval{Sec: 0, Usec: 7000}}
	children := unix.Rusage{Utime: unix.Timeval{Sec: 3}, Stime: unix.Timeval{Usec: 999}}
	got := CPUFromRusage(&self, &children)
	want := CPU{UserMs: 1250, SysMs: 7, ChildrenUserMs: 3000, ChildrenSysMs: 0}
	if got != want {
		t.Errorf("CPUFromRusage = %+v, want %+v", got, want)
	}
}

// TestReadCPUCounts: this process's own time grows with work, and a reaped
// child's shows under Children.
func TestReadCPUCounts(t *testing.T) {
	before, err := ReadCPU()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	sum := 0
	for {
		for i := 0; i < 1e6; i++ {
			sum += i
		}
		now, err := ReadCPU()
		if err != nil {
			t.Fatal(err)
		}
		if now.UserMs+now.SysMs-before.UserMs-before.SysMs >= 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("own CPU time did not grow by 20 ms in 20 s of a busy loop: before %+v, now %+v (sum %d)", before, now, sum)
		}
	}
	// A child that spins for a while and is then reaped.
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done")
	if err := cmd.Run(); err != nil {
		t.Fatalf("running the busy child: %v", err)
	}
	after, err := ReadCPU()
	if err != nil {
		t.Fatal(err)
	}
	if after.ChildrenUserMs+after.ChildrenSysMs <= before.ChildrenUserMs+before.ChildrenSysMs {
		t.Errorf("children's CPU time did not grow after a busy child: before %+v, after %+v", before, after)
	}
}

func TestParseRSS(t *testing.T) {
	status := "Name:\tberth\nVmPeak:\t  20000 kB\nVmRSS:\t   11264 kB\nThreads:\t5\n"
	n, err := ParseRSSKiB(strings.NewReader(status))
	if err != nil || n != 11264 {
		t.Errorf("ParseRSSKiB = %d, %v; want 11264", n, err)
	}
	for _, bad := range []string{"Name: x\n", "VmRSS: lots kB\n", "VmRSS: 12 MB\n", "VmRSS: -1 kB\n"} {
		if _, err := ParseRSSKiB(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseRSSKiB(%q) gave no error", bad)
		}
	}
	// this process's own status file is real input
	if n, err := ReadRSSKiB("/proc/self/status"); err != nil || n <= 0 {
		t.Errorf("ReadRSSKiB(/proc/self/status) = %d, %v", n, err)
	}
}

// FuzzParseLine: console output is outside input; decoding must not panic
// and a decoded report must encode again.
func FuzzParseLine(f *testing.F) {
	line, _ := sample().Line()
	f.Add(line)
	f.Add(Prefix + "{}")
	// Schema 1, which Decode upgrades field by field.
	f.Add(Prefix + `{"config":{"imdsCalls":[{"duration":5000000}],"plan":{"nodeName":"n"},"files":["/a"]},"storage":{"steps":[{"name":"mkfs","ms":1.5}]},"services":{"services":[{"name":"kubelet","ready_ms":3,"log_tail":["x"]}]}}`)
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseLine(s)
		if err != nil {
			return
		}
		b, err := r.JSON()
		if err != nil {
			t.Fatalf("decoded report does not encode: %v", err)
		}
		// What decodes, in any schema, re-encodes as the current one and
		// decodes again to the same thing.
		again, err := Decode(b)
		if err != nil {
			t.Fatalf("re-encoded report does not decode: %v\n%s", err, b)
		}
		if b2, _ := again.JSON(); string(b2) != string(b) {
			t.Fatalf("decode is not stable:\n%s\n%s", b, b2)
		}
	})
}

// FuzzParseRSSKiB: /proc text; must not panic, and never negative.
func FuzzParseRSSKiB(f *testing.F) {
	f.Add("VmRSS:\t 100 kB\n")
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseRSSKiB(strings.NewReader(s))
		if err == nil && n < 0 {
			t.Fatalf("negative RSS %d from %q", n, s)
		}
	})
}
