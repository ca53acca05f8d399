package supervise

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-node/berth/init/shutdown"
	"github.com/berth-node/berth/internal/syncbuf"
	"github.com/berth-node/berth/runtime/reaper"
	"github.com/berth-node/berth/runtime/rlimit"
	"github.com/berth-node/berth/runtime/supervise/cgroup"
	"golang.org/x/sys/unix"
)

var _ shutdown.Stopper = (*Service)(nil)

// testReaper is the package's one reaper: wait4(-1) reapers would steal
// each other's children, so these tests share it and do not run in
// parallel. The test binary is a subreaper, as berth is PID 1, so
// orphans of the services come back to it.
var testReaper *reaper.Reaper

func TestMain(m *testing.M) {
	// The test binary doubles as berth's rlimit-exec helper
	// (TestServiceRlimits), as berth does on a node.
	if len(os.Args) > 1 && os.Args[1] == rlimit.Command {
		limits, argv, err := rlimit.ParseArgs(os.Args[2:])
		if err == nil {
			err = rlimit.Exec(limits, argv, os.Environ())
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "prctl(PR_SET_CHILD_SUBREAPER):", err)
		os.Exit(2)
	}
	testReaper = reaper.New(nil)
	ctx, cancel := context.WithCancel(context.Background())
	go testReaper.Run(ctx)
	code := m.Run()
	cancel()
	os.Exit(code)
}

// fileProber is ready once its file exists.
type fileProber string

func (f fileProber) Check(context.Context) (string, error) {
	_, err := os.Stat(string(f))
	return "file present", err
}

type harness struct {
	sup     *Supervisor
	console *syncbuf.Buffer
	ctx     context.Context
}

func newHarness(t *testing.T, specs []Spec, opts Options) *harness {
	t.Helper()
	h := prepare(t, specs, opts)
	h.sup.Start(h.ctx)
	return h
}

// prepare builds a supervisor whose Stop runs at cleanup, without starting it.
func prepare(t *testing.T, specs []Spec, opts Options) *harness {
	t.Helper()
	console := &syncbuf.Buffer{}
	opts.Reaper = testReaper
	opts.Log = slog.New(slog.NewTextHandler(console, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if opts.Backoff == (Backoff{}) {
		opts.Backoff = Backoff{Initial: 100 * time.Millisecond, Max: time.Second, ResetAfter: time.Hour}
	}
	if opts.ProbeInterval == 0 {
		opts.ProbeInterval = 20 * time.Millisecond
	}
	sup, err := New(specs, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer scancel()
		if err := sup.Stop(sctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
		cancel()
		noZombies(t)
		if t.Failed() {
			t.Logf("console:\n%s", console.String())
		}
	})
	return &harness{sup: sup, console: console, ctx: ctx}
}

func sh(script string) []string { return []string{"/bin/sh", "-c", script} }

var testEnv = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// noZombies fails if any child of the test process is left a zombie.
func noZombies(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		z := zombies(t)
		if len(z) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("zombies left among our children: %v", z)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func zombies(t *testing.T) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("reading /proc: %v", err)
	}
	me := os.Getpid()
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if ppid, _ := strconv.Atoi(f[1]); ppid == me && f[0] == "Z" {
			out = append(out, pid)
		}
	}
	return out
}

// TestDependencyOrder: b starts only once a is ready and a's after-ready
// hook has finished; stopping goes b then a.
func TestDependencyOrder(t *testing.T) {
	dir := t.TempDir()
	readyFile := filepath.Join(dir, "a-ready")
	var hookSawB Status
	hookRan := make(chan struct{})
	var h *harness
	h = prepare(t, []Spec{
		// Listed first on purpose: the order comes from DependsOn.
		{Name: "b", Argv: sh(`test -f "$A" || exit 7; echo b-up; exec sleep 60`), Env: append([]string{"A=" + readyFile}, testEnv...),
			DependsOn: []string{"a"}, StopTimeout: 5 * time.Second},
		{Name: "a", Argv: sh(`sleep 0.3; touch "$A"; exec sleep 60`), Env: append([]string{"A=" + readyFile}, testEnv...),
			StopTimeout: 5 * time.Second},
	}, Options{
		Probers: map[string]Prober{"a": fileProber(readyFile)},
		AfterReady: map[string]func(context.Context) error{"a": func(context.Context) error {
			time.Sleep(200 * time.Millisecond) // b must still wait
			hookSawB = h.sup.Service("b").Status()
			close(hookRan)
			return nil
		}},
	})
	h.sup.Start(h.ctx)
	if got := []string{h.sup.Services()[0].Name(), h.sup.Services()[1].Name()}; !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("start order %v, want [a b]", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.sup.WaitReady(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	<-hookRan
	if hookSawB.State != StateWaiting || !hookSawB.StartedAt.IsZero() {
		t.Errorf("b during a's hook: %+v; want waiting, never started", hookSawB)
	}
	waitFor(t, "b's output", 5*time.Second, func() bool { return slices.Contains(h.sup.Service("b").Tail(0), "b-up") })
	// The report's live figures count what the rings hold.
	var held int64
	for _, s := range h.sup.Services() {
		for _, l := range s.Tail(0) {
			held += int64(len(l))
		}
	}
	if got := h.sup.LogBytes(); got != held || got < int64(len("b-up")) {
		t.Errorf("LogBytes = %d, the rings hold %d bytes", got, held)
	}
	st := h.sup.Status()
	for _, s := range st {
		if s.State != StateReady || s.PID == 0 || s.Restarts != 0 || s.LastExit != nil || s.ReadyMs <= 0 {
			t.Errorf("status %+v; want ready, a pid, no restarts or exits, a time to ready", s)
		}
	}
	if st[0].ReadyMs < 250 { // slack for timer granularity
		t.Errorf("a ready after %d ms; its probe file appears after 300 ms", st[0].ReadyMs)
	}
	if !st[1].StartedAt.After(st[0].StartedAt.Add(time.Duration(st[0].ReadyMs) * time.Millisecond)) {
		t.Errorf("b started at %v, before a was ready (%v + %d ms)", st[1].StartedAt, st[0].StartedAt, st[0].ReadyMs)
	}

	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if err := h.sup.Stop(sctx); err != nil {
		t.Fatal(err)
	}
	log := h.console.String()
	ib := strings.Index(log, `msg="service stopped" service=b`)
	ia := strings.Index(log, `msg="service stopped" service=a`)
	if ib < 0 || ia < 0 || ib > ia {
		t.Errorf("want b stopped before a; console:\n%s", log)
	}
	for _, s := range h.sup.Status() {
		if s.State != StateStopped || s.PID != 0 {
			t.Errorf("after Stop: %+v", s)
		}
	}
}

// TestKillRestartsWithBackoff kills a service with SIGKILL twice and sees
// each restart come after the scheduled delay, counted and logged.
func TestKillRestartsWithBackoff(t *testing.T) {
	b := Backoff{Initial: 300 * time.Millisecond, Max: 5 * time.Second, ResetAfter: time.Hour}
	h := newHarness(t, []Spec{{Name: "svc", Argv: []string{"/bin/sleep", "60"}, Env: testEnv, StopTimeout: 5 * time.Second}},
		Options{Backoff: b})
	svc := h.sup.Service("svc")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.sup.WaitReady(ctx, "svc"); err != nil {
		t.Fatal(err)
	}
	for i, want := range []time.Duration{300 * time.Millisecond, 600 * time.Millisecond} {
		old := svc.Status().PID
		if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
			t.Fatalf("kill %d: %v", old, err)
		}
		killed := time.Now()
		var st Status
		waitFor(t, "a restart", 10*time.Second, func() bool {
			st = svc.Status()
			return st.PID != 0 && st.PID != old && st.State == StateReady
		})
		took := time.Since(killed)
		if took < want || took > want+2*time.Second {
			t.Errorf("restart %d came %v after the kill, want about %v", i+1, took, want)
		}
		if st.Restarts != i+1 || st.LastExit == nil || st.LastExit.Signal != syscall.SIGKILL {
			t.Errorf("after kill %d: %+v, want restarts=%d and last exit SIGKILL", i+1, st, i+1)
		}
		line := fmt.Sprintf(`msg="service exited" service=svc signal=killed restarts=%d next_in=%v`, i+1, want)
		if !strings.Contains(h.console.String(), line) {
			t.Errorf("console lacks %s", line)
		}
	}
}

// TestExitLineCarriesOnlyItsRunsOutput: a run that wrote nothing is not
// given the previous run's last line, on its exit line or as its error.
func TestExitLineCarriesOnlyItsRunsOutput(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "ran")
	h := newHarness(t, []Spec{{Name: "svc",
		Argv: sh(`if [ -e ` + mark + ` ]; then exit 4; fi; touch ` + mark + `; echo "first words"; exit 3`),
		Env:  testEnv, StopTimeout: time.Second}},
		Options{Backoff: Backoff{Initial: 20 * time.Millisecond, Max: 40 * time.Millisecond, ResetAfter: time.Hour}})
	svc := h.sup.Service("svc")
	waitFor(t, "two restarts", 10*time.Second, func() bool { return svc.Status().Restarts >= 2 })
	log := h.console.String()
	if !strings.Contains(log, `code=3 restarts=1 next_in=20ms last_output="first words"`) {
		t.Errorf("the first exit line lacks its run's last line:\n%s", log)
	}
	if !strings.Contains(log, `code=4 restarts=2 next_in=40ms`) || strings.Contains(log, `code=4 restarts=2 next_in=40ms last_output`) {
		t.Errorf("the silent second run's exit line is missing or carries the first run's output:\n%s", log)
	}
	if st := svc.Status(); st.LastExit == nil || st.LastExit.Code != 4 || st.LastErrorLine != "first words" {
		t.Errorf("status %+v: want the last exit code 4 and the error line still the first run's", st)
	}
}

// TestCrashLoopShowsTail: a service that fails at once is restarted again
// and again, and each exit shows its code and its last log lines; its
// status carries the error line that says why.
func TestCrashLoopShowsTail(t *testing.T) {
	logDir := t.TempDir()
	const why = `E1122 10:00:00.000000       1 bootstrap.go:1] "x509: certificate signed by unknown authority"`
	h := newHarness(t, []Spec{{Name: "kubelet",
		Argv: sh(`echo "I1122 10:00:00.000000 1 server.go:1] chatter"; echo '` + why + `' >&2; exit 3`),
		Env:  testEnv, StopTimeout: time.Second}},
		Options{LogDir: logDir, Backoff: Backoff{Initial: 20 * time.Millisecond, Max: 40 * time.Millisecond, ResetAfter: time.Hour}})
	svc := h.sup.Service("kubelet")
	waitFor(t, "three restarts", 10*time.Second, func() bool { return svc.Status().Restarts >= 3 })
	st := svc.Status()
	if st.LastExit == nil || st.LastExit.Code != 3 {
		t.Errorf("last exit %v, want code 3", st.LastExit)
	}
	if st.LastErrorLine != why {
		t.Errorf("last error line %q, want %q", st.LastErrorLine, why)
	}
	if !slices.Contains(st.LogTail, why) {
		t.Errorf("status log tail %q lacks the cause", st.LogTail)
	}
	log := h.console.String()
	for _, want := range []string{
		`msg="service exited" service=kubelet code=3 restarts=1 next_in=20ms`,
		`msg="service exited" service=kubelet code=3 restarts=2 next_in=40ms`,
		`msg="service exited" service=kubelet code=3 restarts=3 next_in=40ms`,
		`msg="service log tail" service=kubelet line="` + strings.ReplaceAll(why, `"`, `\"`) + `"`,
		// The run's last line rides on the exit line itself.
		`next_in=20ms last_output="` + strings.ReplaceAll(why, `"`, `\"`) + `"`,
		// The error line reaches the console as it happens, at error level.
		`level=ERROR msg="` + strings.ReplaceAll(why, `"`, `\"`) + `" service=kubelet`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("console lacks %s", want)
		}
	}
	// Info chatter stays off the console (default level) except in tails.
	if strings.Contains(log, `level=INFO msg="I1122`) {
		t.Errorf("info-level service line reached the console at the default level")
	}
	b, err := os.ReadFile(filepath.Join(logDir, "kubelet.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "chatter") || !strings.Contains(string(b), why) || !strings.Contains(string(b), "exited: exit status 3") {
		t.Errorf("kubelet.log lacks the output or the exit:\n%s", b)
	}
}

// TestNotReadyIsKilled: a service that never becomes ready is killed at
// the readiness deadline and restarted, and says why.
func TestNotReadyIsKilled(t *testing.T) {
	h := newHarness(t, []Spec{{Name: "svc", Argv: []string{"/bin/sleep", "60"}, Env: testEnv, StopTimeout: 200 * time.Millisecond}},
		Options{ReadyTimeout: 300 * time.Millisecond, Probers: map[string]Prober{"svc": fileProber("/nonexistent/ready")}})
	svc := h.sup.Service("svc")
	waitFor(t, "a restart", 10*time.Second, func() bool { return svc.Status().Restarts >= 1 })
	st := svc.Status()
	if !strings.Contains(st.LastError, "not ready within 300ms") || st.LastExit == nil || st.LastExit.Signal != syscall.SIGTERM {
		t.Errorf("status %+v; want a not-ready error and a SIGTERM exit", st)
	}
	if !strings.Contains(h.console.String(), `reason="not ready within 300ms`) {
		t.Errorf("console does not give the reason for the exit")
	}
	select {
	case <-svc.Ready():
		t.Error("service reported ready")
	default:
	}
}

// TestStopEscalatesAndNothingRestarts: a service ignoring SIGTERM is
// SIGKILLed after its stop timeout; once one service stops, another that
// crashes is not restarted.
func TestStopEscalatesAndNothingRestarts(t *testing.T) {
	// Ready only once the trap is set, or SIGTERM could beat it.
	trapped := filepath.Join(t.TempDir(), "trapped")
	h := newHarness(t, []Spec{
		{Name: "stubborn", Argv: sh(`trap "" TERM; touch "$F"; exec sleep 60`), Env: append([]string{"F=" + trapped}, testEnv...),
			StopTimeout: 300 * time.Millisecond},
		{Name: "other", Argv: []string{"/bin/sleep", "60"}, Env: testEnv, StopTimeout: time.Second},
	}, Options{Probers: map[string]Prober{"stubborn": fileProber(trapped)}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, n := range []string{"stubborn", "other"} {
		if err := h.sup.WaitReady(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	stubborn := h.sup.Service("stubborn")
	start := time.Now()
	if err := stubborn.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if took := time.Since(start); took < 300*time.Millisecond || took > 3*time.Second {
		t.Errorf("Stop took %v; want the 300ms stop timeout then a kill", took)
	}
	st := stubborn.Status()
	if st.State != StateStopped || st.LastExit == nil || st.LastExit.Signal != syscall.SIGKILL {
		t.Errorf("stubborn after Stop: %+v; want stopped by SIGKILL", st)
	}
	if !strings.Contains(h.console.String(), `msg="service did not stop in time; killing it" service=stubborn`) {
		t.Errorf("console does not say the stop escalated")
	}

	other := h.sup.Service("other")
	pid := other.Status().PID
	syscall.Kill(pid, syscall.SIGKILL)
	waitFor(t, "other's exit", 5*time.Second, func() bool { return other.Status().State == StateExited })
	time.Sleep(300 * time.Millisecond) // more than its backoff
	if st := other.Status(); st.PID != 0 || st.Restarts != 0 || st.State != StateExited {
		t.Errorf("other restarted during shutdown: %+v", st)
	}
	if !strings.Contains(h.console.String(), `msg="service exited during shutdown; not restarted" service=other signal=killed`) {
		t.Errorf("console does not say other exited and was not restarted")
	}
	if err := other.Stop(ctx); err != nil {
		t.Errorf("stopping an exited service: %v", err)
	}
}

// TestStopDuringBackoff: Stop does not wait out a restart delay.
func TestStopDuringBackoff(t *testing.T) {
	h := newHarness(t, []Spec{{Name: "svc", Argv: sh("exit 1"), Env: testEnv, StopTimeout: time.Second}},
		Options{Backoff: Backoff{Initial: time.Minute, Max: time.Minute, ResetAfter: time.Hour}})
	svc := h.sup.Service("svc")
	waitFor(t, "backoff", 5*time.Second, func() bool { return svc.Status().State == StateBackoff })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := svc.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Stop during a one-minute backoff took %v", took)
	}
	if st := svc.Status(); st.State != StateStopped {
		t.Errorf("state %s after Stop", st.State)
	}
}

// TestExecSettings: env, working directory, OOM score adjustment; a
// binary that cannot start is retried and reported; a log directory that
// cannot be written costs the files only, with one warning.
func TestExecSettings(t *testing.T) {
	dir := t.TempDir()
	notDir := filepath.Join(dir, "not-a-dir")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, []Spec{
		{Name: "svc", Argv: sh(`echo "env=$FOO pwd=$(pwd)"; exec sleep 60`), Env: []string{"FOO=bar", "PATH=/bin:/usr/bin"},
			Dir: dir, OOMScoreAdj: 500, StopTimeout: time.Second},
		{Name: "missing", Argv: []string{"/nonexistent/binary"}, StopTimeout: time.Second},
	}, Options{LogDir: notDir})
	svc := h.sup.Service("svc")
	want := "env=bar pwd=" + dir
	waitFor(t, "output", 5*time.Second, func() bool { return slices.Contains(svc.Tail(0), want) })
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", svc.Status().PID))
	if err != nil || strings.TrimSpace(string(b)) != "500" {
		t.Errorf("oom_score_adj = %q, %v; want 500", b, err)
	}
	missing := h.sup.Service("missing")
	waitFor(t, "retries of a missing binary", 5*time.Second, func() bool { return missing.Status().Restarts >= 2 })
	if st := missing.Status(); !strings.Contains(st.LastError, "/nonexistent/binary") {
		t.Errorf("missing binary: last error %q does not name it", st.LastError)
	}
	if !strings.Contains(h.console.String(), `msg="service failed to start" service=missing`) {
		t.Errorf("console does not report the failed start")
	}
	if n := strings.Count(h.console.String(), `msg="service log file not writable; the console and ring still have it" service=svc`); n != 1 {
		t.Errorf("log file warning for svc given %d times, want once", n)
	}
}

func TestNewRejects(t *testing.T) {
	for _, tc := range []struct {
		specs []Spec
		want  string
	}{
		{[]Spec{{Name: "a", Argv: []string{"/bin/true"}, DependsOn: []string{"b"}}, {Name: "b", Argv: []string{"/bin/true"}, DependsOn: []string{"a"}}},
			"dependency cycle: a -> b -> a"},
		{[]Spec{{Name: "a"}}, "service a: argv: empty"},
		{[]Spec{{Name: "a", Argv: []string{"sleep"}}}, `argv[0] "sleep": not an absolute path`},
		{[]Spec{{Name: "a", Argv: []string{"/bin/true"}, Cgroup: "relative"}}, `cgroup "relative"`},
		{[]Spec{{Name: "a", Argv: []string{"/bin/true"}, Ready: Probe{Kind: "tcp"}}}, `probe kind "tcp"`},
	} {
		_, err := New(tc.specs, Options{Reaper: testReaper, CgroupRoot: "/sys/fs/cgroup"})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error containing %q", tc.specs, err, tc.want)
		}
	}
	if _, err := New(nil, Options{}); err == nil {
		t.Error("New without a reaper succeeded")
	}
}

// TestCgroupPlacement: the service runs in its own group from its first
// instruction (CLONE_INTO_CGROUP), on a real cgroup2 hierarchy.
func TestCgroupPlacement(t *testing.T) {
	root := cgroup2Root(t)
	group := "/berth-test.slice/svc"
	// Registered before the harness, so it runs after the harness's Stop.
	t.Cleanup(func() {
		for _, g := range []string{group, "/berth-test.slice"} {
			if err := os.Remove(filepath.Join(root, g)); err != nil {
				t.Errorf("removing test cgroup: %v", err)
			}
		}
	})
	h := newHarness(t, []Spec{{Name: "svc", Argv: sh(`cat /proc/self/cgroup; exec sleep 60`), Env: testEnv,
		Cgroup: group, StopTimeout: time.Second}}, Options{CgroupRoot: root})
	svc := h.sup.Service("svc")
	// The hierarchy may be mounted here besides cgroup v1; its line is "0::".
	waitFor(t, "the child's own view", 5*time.Second, func() bool { return slices.Contains(svc.Tail(0), "0::"+group) })
	procs, err := os.ReadFile(filepath.Join(root, group, "cgroup.procs"))
	if err != nil {
		t.Fatal(err)
	}
	if pid := strconv.Itoa(svc.Status().PID); !slices.Contains(strings.Fields(string(procs)), pid) {
		t.Errorf("pid %s not in %s/cgroup.procs (%q)", pid, group, procs)
	}
}

// cgroup2Root returns a writable cgroup2 mount: /sys/fs/cgroup when it is
// one, else a private mount of the hierarchy (a cgroup v1 host, like the
// development machine, still lets root mount cgroup2 beside it).
func cgroup2Root(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test creates cgroups and needs root (CI runs it as root)")
	}
	var st unix.Statfs_t
	if err := unix.Statfs(cgroup.DefaultRoot, &st); err == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		return cgroup.DefaultRoot
	}
	dir := t.TempDir()
	if err := unix.Mount("none", dir, "cgroup2", 0, ""); err != nil {
		t.Fatalf("mounting cgroup2 at %s: %v", dir, err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// TestHooksSeeLinesAndStates: OnLine gets every output line of its service
// and OnChange every state change, which is how berth follows kubelet's
// registration and keeps boot.json current.
func TestHooksSeeLinesAndStates(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	var states []string
	h := newHarness(t, []Spec{{Name: "svc", Argv: []string{"/bin/sh", "-c", "echo one; echo two; exec sleep 60"}, Env: testEnv, StopTimeout: 5 * time.Second}},
		Options{
			OnLine: map[string]func(string){"svc": func(l string) {
				mu.Lock()
				lines = append(lines, l)
				mu.Unlock()
			}},
			OnChange: func(name string, st State) {
				mu.Lock()
				states = append(states, name+"="+string(st))
				mu.Unlock()
			},
		})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.sup.WaitReady(ctx, "svc"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both lines", 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(lines) == 2
	})
	mu.Lock()
	defer mu.Unlock()
	if lines[0] != "one" || lines[1] != "two" {
		t.Errorf("OnLine saw %q", lines)
	}
	if !slices.Contains(states, "svc="+string(StateReady)) {
		t.Errorf("OnChange saw %v, want svc=%s among them", states, StateReady)
	}
}

// TestCrashLoopPlainLastLine: a program that dies of a bad config with one
// plain line on stderr (no level, as containerd's CLI prints a config
// error) gets that line as its status's error line; a clean exit does not.
func TestCrashLoopPlainLastLine(t *testing.T) {
	const why = "containerd: failed to load TOML from /etc/containerd/config.toml: expected containerd config version equal to or less than `3`, got `99`"
	h := newHarness(t, []Spec{{Name: "containerd",
		Argv: sh(`echo "starting up"; echo '` + why + `' >&2; exit 1`),
		Env:  testEnv, StopTimeout: time.Second}},
		Options{Backoff: Backoff{Initial: 20 * time.Millisecond, Max: 40 * time.Millisecond, ResetAfter: time.Hour}})
	svc := h.sup.Service("containerd")
	waitFor(t, "two restarts", 10*time.Second, func() bool { return svc.Status().Restarts >= 2 })
	if st := svc.Status(); st.LastErrorLine != why {
		t.Errorf("last error line %q, want the plain last line %q", st.LastErrorLine, why)
	}
}

// TestCrashLoopFatalLineAfterErrors: a run that logs an error-level line
// and then dies with a plain line (containerd's CNI complaint at every
// start, then its fatal config error) gets the plain line as its cause;
// a run whose last line is a levelled info line keeps its error line.
func TestCrashLoopFatalLineAfterErrors(t *testing.T) {
	const noise = `time="2026-11-28T17:14:39Z" level=error msg="failed to load cni during init"`
	const why = "containerd: failed to get listener for debug endpoint: listen unix /proc/x.sock: bind: no such file or directory"
	const info = `time="2026-11-28T17:14:40Z" level=info msg="stopping"`
	h := newHarness(t, []Spec{
		{Name: "fatal", Argv: sh(`echo '` + noise + `' >&2; echo '` + why + `' >&2; exit 1`), Env: testEnv, StopTimeout: time.Second},
		{Name: "quiet", Argv: sh(`echo '` + noise + `' >&2; echo '` + info + `' >&2; exit 1`), Env: testEnv, StopTimeout: time.Second},
	}, Options{Backoff: Backoff{Initial: 20 * time.Millisecond, Max: 40 * time.Millisecond, ResetAfter: time.Hour}})
	for name, want := range map[string]string{"fatal": why, "quiet": noise} {
		svc := h.sup.Service(name)
		waitFor(t, name+": two restarts", 10*time.Second, func() bool { return svc.Status().Restarts >= 2 })
		if st := svc.Status(); st.LastErrorLine != want {
			t.Errorf("%s: last error line %q, want %q", name, st.LastErrorLine, want)
		}
	}
}

// TestCrashLoopExitLineOutlivesNextStart: the line a failed run died of
// stays the service's exit error line while the next run starts and logs
// its own error-level noise (containerd's CNI complaint at every start,
// which the join watcher once quoted in place of the fatal line), and a
// clean exit clears it.
func TestCrashLoopExitLineOutlivesNextStart(t *testing.T) {
	const noise = `time="2026-11-30T00:03:08Z" level=error msg="failed to load cni during init"`
	const why = "containerd: failed to get listener for debug endpoint: listen unix /proc/x.sock: bind: no such file or directory"
	dir := t.TempDir()
	died, clean := filepath.Join(dir, "died"), filepath.Join(dir, "clean")
	// Run 1 dies of the fatal line; run 2 logs the noise and waits for
	// the test to let it exit cleanly; run 3 waits for good.
	script := `echo '` + noise + `' >&2
if [ ! -e ` + died + ` ]; then touch ` + died + `; echo '` + why + `' >&2; exit 1; fi
if [ ! -e ` + clean + `.done ]; then while [ ! -e ` + clean + ` ]; do sleep 0.05; done; touch ` + clean + `.done; exit 0; fi
exec sleep 60`
	h := newHarness(t, []Spec{{Name: "containerd", Argv: sh(script), Env: testEnv, StopTimeout: time.Second}},
		Options{Backoff: Backoff{Initial: 20 * time.Millisecond, Max: 40 * time.Millisecond, ResetAfter: time.Hour}})
	svc := h.sup.Service("containerd")
	waitFor(t, "the second run's noise", 10*time.Second, func() bool {
		st := svc.Status()
		return st.Restarts >= 1 && st.LastErrorLine == noise
	})
	if st := svc.Status(); st.ExitErrorLine != why {
		t.Errorf("second run starting: exit error line %q, want what the first run died of, %q", st.ExitErrorLine, why)
	}
	if err := os.WriteFile(clean, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the clean exit", 10*time.Second, func() bool {
		st := svc.Status()
		return st.LastExit != nil && st.LastExit.Success()
	})
	if st := svc.Status(); st.ExitErrorLine != "" {
		t.Errorf("after a clean exit: exit error line %q, want none", st.ExitErrorLine)
	}
}

// TestServiceRlimits: a service with rlimits gets exactly those, on every
// start, in the pid the supervisor tracks (the helper execs in place), and
// the console names the service's argv, not the helper's. Limits within
// the test's own hard ones: raising needs CAP_SYS_RESOURCE.
func TestServiceRlimits(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var nofile unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &nofile); err != nil {
		t.Fatal(err)
	}
	want := rlimit.Limit{Resource: "nofile", Soft: nofile.Max/2 + 1, Hard: nofile.Max}
	dir := t.TempDir()
	h := newHarness(t, []Spec{{
		Name: "lim",
		Argv: sh(`grep "Max open files" /proc/self/limits; echo "pid $$"; touch "$D/up"; exec sleep 60`),
		Env:  append([]string{"D=" + dir}, testEnv...), StopTimeout: 5 * time.Second,
		Rlimits: []rlimit.Limit{want},
	}}, Options{RlimitExec: self, Probers: map[string]Prober{"lim": fileProber(filepath.Join(dir, "up"))}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.sup.WaitReady(ctx, "lim"); err != nil {
		t.Fatal(err)
	}
	svc := h.sup.Service("lim")
	waitFor(t, "the limits line", 5*time.Second, func() bool { return len(svc.Tail(0)) >= 2 })
	tail := svc.Tail(0)
	if f := strings.Fields(tail[0]); len(f) < 5 || f[3] != strconv.FormatUint(want.Soft, 10) || f[4] != strconv.FormatUint(want.Hard, 10) {
		t.Errorf("service sees %q, want %s", tail[0], want)
	}
	if got := fmt.Sprintf("pid %d", svc.Status().PID); tail[1] != got {
		t.Errorf("service says %q, supervisor tracks %q", tail[1], got)
	}
	if log := h.console.String(); strings.Contains(log, rlimit.Command) {
		t.Errorf("console shows the helper:\n%s", log)
	}

	// Without a helper to set them, the plan's limits are an error, not
	// silently dropped.
	if _, err := New([]Spec{{Name: "x", Argv: []string{"/bin/true"}, Rlimits: []rlimit.Limit{want}}},
		Options{Reaper: testReaper}); err == nil || !strings.Contains(err.Error(), "RlimitExec") {
		t.Errorf("New without RlimitExec: %v", err)
	}
}
