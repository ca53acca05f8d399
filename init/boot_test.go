package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/berth-node/berth/config/cmdline"
	"github.com/berth-node/berth/init/bootlog"
	"github.com/berth-node/berth/init/power"
	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/init/shutdown"
	"github.com/berth-node/berth/internal/version"
)

// lockedBuf is a console that goroutines may write while the test reads.
type lockedBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func testBoot() (*boot, *lockedBuf) {
	var buf lockedBuf
	out := bootlog.NewOutput()
	out.Attach(&buf, nil)
	var now atomic.Int64
	clock := func() time.Duration { return time.Duration(now.Add(int64(time.Millisecond))) }
	log := slog.New(bootlog.New(out, bootlog.Options{Clock: clock}))
	return &boot{log: log, out: out, clock: clock, rep: &report.Report{Phases: []report.Phase{}}}, &buf
}

func TestRunPhases(t *testing.T) {
	b, buf := testBoot()
	var ran []string
	mk := func(name string, fatal bool, err error, panics bool) phase {
		return phase{name: name, fatal: fatal, run: func(ctx context.Context, b *boot, log *slog.Logger) error {
			ran = append(ran, name)
			if panics {
				panic("bug in " + name)
			}
			return err
		}}
	}
	err := b.run(context.Background(), []phase{
		mk("early", true, nil, false),
		mk("modules", false, errors.New("no manifest"), false),
		mk("root", true, nil, true),
		mk("never", true, nil, false),
	})
	if err == nil || err.Error() != "root: panic: bug in root" {
		t.Fatalf("run = %v, want the root phase's panic as a fatal error", err)
	}
	if strings.Join(ran, ",") != "early,modules,root" {
		t.Errorf("ran %v: a non-fatal error must not stop boot, a fatal one must", ran)
	}
	if len(b.rep.Phases) != 3 || b.rep.Phases[1].Error != "no manifest" || b.rep.Phases[2].Error != "panic: bug in root" || b.rep.Phases[0].Error != "" {
		t.Errorf("report phases = %+v", b.rep.Phases)
	}
	log := buf.String()
	for _, s := range []string{"early: phase done duration_ms=", "modules: phase failed level=ERROR duration_ms=", `err="no manifest"`,
		"root: panic recovered level=ERROR goroutine=root", "stack="} {
		if !strings.Contains(log, s) {
			t.Errorf("console lacks %q:\n%s", s, log)
		}
	}
}

func TestDecideOnFail(t *testing.T) {
	tests := []struct {
		in   string
		want onFailAction
	}{
		{"reboot", onFailAction{mode: power.Reboot, delay: 30 * time.Second}},
		{"reboot:0", onFailAction{mode: power.Reboot}},
		{"halt", onFailAction{mode: power.Halt}},
		{"poweroff", onFailAction{mode: power.PowerOff}},
		{"stay", onFailAction{stay: true}},
	}
	for _, tt := range tests {
		o, err := cmdline.ParseOnFail(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := decideOnFail(o); got != tt.want {
			t.Errorf("decideOnFail(%s) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

// onFail(stay) returns at once, so that pid1 goes on serving power requests.
func TestOnFailStayReturns(t *testing.T) {
	b, buf := testBoot()
	done := make(chan struct{})
	go func() { b.onFail(context.Background(), cmdline.OnFail{Action: cmdline.Stay}); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("onFail(stay) did not return to serve power requests")
	}
	if !strings.Contains(buf.String(), "onfail: boot failed; staying up as berth.onfail asks") || !strings.Contains(buf.String(), "policy=stay") {
		t.Errorf("console = %q", buf.String())
	}
}

func TestCLI(t *testing.T) {
	var out, errb bytes.Buffer
	if code := runCLI([]string{"version"}, &out, &errb); code != 0 || out.String() != version.Version+"\n" {
		t.Errorf("berth version: code %d out %q err %q", code, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := runCLI([]string{"frobnicate"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `unknown command "frobnicate"`) {
		t.Errorf("unknown command: code %d err %q", code, errb.String())
	}
	out.Reset()
	if code := runCLI([]string{"help"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "version") {
		t.Errorf("help: code %d out %q", code, out.String())
	}
	if code := runCLI(nil, &out, &errb); code != 2 {
		t.Errorf("no args: code %d, want 2", code)
	}
}

// TestGoSafeRecordsPanic forces a panic in a goroutine PID 1 starts: it
// is logged with its stack and lands in the boot report.
func TestGoSafeRecordsPanic(t *testing.T) {
	b, buf := testBoot()
	b.reportPath = filepath.Join(t.TempDir(), "boot.json")
	b.reported = true
	done := make(chan struct{})
	b.goSafe(b.log, "boom", func() { defer close(done); panic("kaboom") })
	<-done
	deadline := time.Now().Add(5 * time.Second)
	for {
		b.repMu.Lock()
		n := len(b.rep.Panics)
		b.repMu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("panic not recorded in the report")
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.repMu.Lock()
	p := b.rep.Panics[0]
	b.repMu.Unlock()
	if p.Goroutine != "boom" || !strings.Contains(p.Error, "kaboom") || !strings.Contains(p.Stack, "boot_test.go") {
		t.Errorf("report panic %+v", p)
	}
	if !strings.Contains(buf.String(), "panic=kaboom") {
		t.Errorf("panic not logged: %q", buf.String())
	}
	data, err := os.ReadFile(b.reportPath)
	if err != nil || !strings.Contains(string(data), `"goroutine":"boom"`) {
		t.Errorf("boot.json not rewritten with the panic: %v %s", err, data)
	}
}

// fakeSys records the reboot mode; its Reboot "fails" so control comes back.
type fakeSys struct {
	mu    sync.Mutex
	modes []power.Mode
}

func (f *fakeSys) KillAll(syscall.Signal) error                   { return nil }
func (f *fakeSys) Remaining() ([]int, error)                      { return nil, nil }
func (f *fakeSys) HangUp() error                                  { return nil }
func (f *fakeSys) Sync()                                          {}
func (f *fakeSys) UnmountAll(context.Context, *slog.Logger) error { return nil }
func (f *fakeSys) Reboot(m power.Mode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.modes = append(f.modes, m)
	return errors.New("fake")
}

func (f *fakeSys) got() []power.Mode {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]power.Mode(nil), f.modes...)
}

func fastBoot(t *testing.T) (*boot, *lockedBuf, *fakeSys) {
	b, buf := testBoot()
	sys := &fakeSys{}
	b.sys = sys
	b.timeouts = shutdown.Timeouts{Service: time.Second, Grace: time.Second, Kill: time.Second, Sync: time.Second, Unmount: time.Second, Poll: time.Millisecond}
	b.power = make(chan power.Request, 1)
	b.reportPath = filepath.Join(t.TempDir(), "boot.json")
	return b, buf, sys
}

func TestOnFailPolicies(t *testing.T) {
	tests := []struct {
		name    string
		policy  cmdline.OnFail
		want    power.Mode
		minWait time.Duration
	}{
		{"halt at once", cmdline.OnFail{Action: cmdline.Halt}, power.Halt, 0},
		{"poweroff at once", cmdline.OnFail{Action: cmdline.PowerOff}, power.PowerOff, 0},
		{"reboot after delay", cmdline.OnFail{Action: cmdline.Reboot, Delay: 300 * time.Millisecond}, power.Reboot, 300 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, buf, sys := fastBoot(t)
			start := time.Now()
			done := make(chan struct{})
			go func() { b.onFail(context.Background(), tt.policy); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("onFail did not act within 10s")
			}
			if got := sys.got(); len(got) != 1 || got[0] != tt.want {
				t.Errorf("reboot modes = %v, want [%v]", got, tt.want)
			}
			if d := time.Since(start); d < tt.minWait {
				t.Errorf("acted after %v, before the %v delay", d, tt.minWait)
			}
			if !strings.Contains(buf.String(), "onfail: boot failed; following berth.onfail level=ERROR policy="+tt.policy.String()) {
				t.Errorf("console does not name the policy:\n%s", buf.String())
			}
		})
	}
}

// A power request is served while the reboot countdown runs (and during
// boot): the machine goes down in the request's mode at once.
func TestPowerRequestDuringCountdown(t *testing.T) {
	b, _, sys := fastBoot(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.startPowerServer(ctx)
	go b.onFail(ctx, cmdline.OnFail{Action: cmdline.Reboot, Delay: time.Hour})
	b.power <- power.Request{Mode: power.PowerOff, Reason: "test"}
	deadline := time.Now().Add(10 * time.Second)
	for len(sys.got()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("power request not served within 10s during the countdown")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := sys.got(); got[0] != power.PowerOff {
		t.Errorf("reboot modes = %v, want poweroff first", got)
	}
}

// TestFinishFatal: a fatal error is on the console as FATAL with its
// phase, the report line and boot.json say ok=false with the error, and
// berth.onfail (halt here) is followed.
func TestFinishFatal(t *testing.T) {
	b, buf, sys := fastBoot(t)
	b.reportPath = filepath.Join(t.TempDir(), "run", "berth", "boot.json")
	b.cfg = cmdline.Config{OnFail: cmdline.OnFail{Action: cmdline.Halt}}
	b.rep.Version = "vtest"

	err := b.run(context.Background(), []phase{
		{name: "root", fatal: true, run: func(context.Context, *boot, *slog.Logger) error { return errors.New("no /root.erofs") }},
	})
	b.finish(context.Background(), err)

	out := buf.String()
	if !strings.Contains(out, "] root: FATAL: root: no /root.erofs level=ERROR\n") {
		t.Errorf("no FATAL line naming the phase:\n%s", out)
	}
	var line string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, report.Prefix) {
			line = l
		}
	}
	rep, perr := report.ParseLine(line)
	if perr != nil {
		t.Fatalf("no BERTH-REPORT line: %v\n%s", perr, out)
	}
	if rep.OK || rep.Error != "root: no /root.erofs" || rep.Version != "vtest" || len(rep.Phases) != 1 || rep.RSSKiB <= 0 {
		t.Errorf("report = %+v", rep)
	}
	// boot.json is the report line's JSON plus the shutdown section that
	// berth.onfail's halt added, step by step.
	data, rerr := os.ReadFile(b.reportPath)
	want := strings.TrimSuffix(strings.TrimPrefix(line, report.Prefix), "}") + `,"shutdown":{"reason":"berth.onfail halt","mode":"halt",`
	if rerr != nil || !strings.HasPrefix(string(data), want) || !strings.Contains(string(data), `{"name":"unmount","durationMs":`) {
		t.Errorf("boot.json = %q, %v; want the report line's JSON and the halt's steps", data, rerr)
	}
	if got := sys.got(); len(got) != 1 || got[0] != power.Halt {
		t.Errorf("reboot modes = %v, want [halt]", got)
	}
	if strings.Index(out, "FATAL") > strings.Index(out, report.Prefix) || strings.Index(out, report.Prefix) > strings.Index(out, "calling reboot") {
		t.Errorf("want FATAL, then the report, then the halt:\n%s", out)
	}
}

func TestFinishOK(t *testing.T) {
	b, buf := testBoot()
	b.reportPath = filepath.Join(t.TempDir(), "boot.json")
	b.finish(context.Background(), b.run(context.Background(), []phase{
		{name: "early", fatal: true, run: func(context.Context, *boot, *slog.Logger) error { return nil }},
	}))
	if !strings.Contains(buf.String(), `"ok":true`) || !strings.Contains(buf.String(), "report: boot finished ok=true") {
		t.Errorf("console:\n%s", buf.String())
	}
}

type fakeStopper struct {
	name string
	log  *[]string
}

func (f fakeStopper) Name() string { return f.name }
func (f fakeStopper) Stop(context.Context) error {
	*f.log = append(*f.log, f.name)
	return nil
}

// Services added during boot are stopped in reverse order by a shutdown.
func TestShutdownStopsAddedServices(t *testing.T) {
	b, _, sys := fastBoot(t)
	var stopped []string
	b.addStopper(fakeStopper{"containerd", &stopped})
	b.addStopper(fakeStopper{"kubelet", &stopped})
	b.shutdown(context.Background(), power.Request{Mode: power.Reboot, Reason: "test"})
	if strings.Join(stopped, ",") != "kubelet,containerd" {
		t.Errorf("stopped %v, want kubelet then containerd", stopped)
	}
	if got := sys.got(); len(got) != 1 || got[0] != power.Reboot {
		t.Errorf("reboot modes = %v", got)
	}
}
