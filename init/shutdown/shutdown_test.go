package shutdown

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-node/berth/init/power"
)

// fakeSystem records every call in order. Processes "exit" after two
// Remaining polls once SIGTERM was sent, or never when ignoreTERM is set
// (then only SIGKILL ends them, or a hangup when exitOnHUP is set too:
// an interactive shell).
type fakeSystem struct {
	mu         sync.Mutex
	calls      []string
	pids       []int
	ignoreTERM bool
	exitOnHUP  bool
	termSent   bool
	hupSent    bool
	killSent   bool
	polls      int
	rebootErr  error
	hangSync   bool
}

func (f *fakeSystem) rec(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
}

func (f *fakeSystem) KillAll(sig syscall.Signal) error {
	f.rec("kill " + sig.String())
	f.mu.Lock()
	defer f.mu.Unlock()
	if sig == syscall.SIGTERM {
		f.termSent = true
	}
	if sig == syscall.SIGKILL {
		f.killSent = true
	}
	return nil
}

func (f *fakeSystem) Remaining() ([]int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.killSent || (f.termSent && (!f.ignoreTERM || (f.exitOnHUP && f.hupSent))) {
		f.polls++
		if f.polls > 2 {
			return nil, nil
		}
	}
	return f.pids, nil
}

func (f *fakeSystem) HangUp() error {
	f.rec("hangup")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hupSent = true
	return nil
}

func (f *fakeSystem) Sync() {
	f.rec("sync")
	if f.hangSync {
		time.Sleep(time.Hour)
	}
}

func (f *fakeSystem) UnmountAll(ctx context.Context, log *slog.Logger) error {
	f.rec("unmount")
	return nil
}

func (f *fakeSystem) Reboot(mode power.Mode) error {
	f.rec("reboot " + mode.String())
	if f.rebootErr != nil {
		return f.rebootErr
	}
	return errors.New("fake reboot returned")
}

type fakeService struct {
	name  string
	sys   *fakeSystem
	hang  bool
	err   error
	sawDL bool
}

func (s *fakeService) Name() string { return s.name }

func (s *fakeService) Stop(ctx context.Context) error {
	_, s.sawDL = ctx.Deadline()
	s.sys.rec("stop " + s.name)
	if s.hang {
		<-ctx.Done()
		return ctx.Err()
	}
	return s.err
}

func fastTimeouts() Timeouts {
	return Timeouts{Service: 50 * time.Millisecond, Grace: 100 * time.Millisecond, Kill: 50 * time.Millisecond,
		Sync: 50 * time.Millisecond, Unmount: 50 * time.Millisecond, Poll: 5 * time.Millisecond}
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestSequenceOrder(t *testing.T) {
	sys := &fakeSystem{pids: []int{10, 11}}
	svcs := []Stopper{&fakeService{name: "containerd", sys: sys}, &fakeService{name: "kubelet", sys: sys, err: errors.New("boom")}}
	err := Sequence(context.Background(), discard(), sys, svcs, power.PowerOff, fastTimeouts())
	if err == nil {
		t.Fatal("Sequence returned nil after reboot returned")
	}
	want := []string{"stop kubelet", "stop containerd", "kill terminated", "hangup", "sync", "unmount", "reboot poweroff"}
	if !reflect.DeepEqual(sys.calls, want) {
		t.Errorf("calls = %q\nwant    %q", sys.calls, want)
	}
	for _, s := range svcs {
		if !s.(*fakeService).sawDL {
			t.Errorf("service %s stopped without a deadline", s.Name())
		}
	}
}

func TestSequenceSIGKILLAfterGrace(t *testing.T) {
	sys := &fakeSystem{pids: []int{10}, ignoreTERM: true}
	start := time.Now()
	Sequence(context.Background(), discard(), sys, nil, power.Reboot, fastTimeouts())
	want := []string{"kill terminated", "hangup", "kill killed", "sync", "unmount", "reboot reboot"}
	if !reflect.DeepEqual(sys.calls, want) {
		t.Errorf("calls = %q\nwant    %q", sys.calls, want)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("SIGKILL came after %v, before the 100ms grace period", d)
	}
}

// A shell that ignores SIGTERM (the debug shell) goes on the hangup that
// follows it: no SIGKILL, no grace period spent.
func TestSequenceHangUpEndsShells(t *testing.T) {
	sys := &fakeSystem{pids: []int{10}, ignoreTERM: true, exitOnHUP: true}
	Sequence(context.Background(), discard(), sys, nil, power.PowerOff, fastTimeouts())
	want := []string{"kill terminated", "hangup", "sync", "unmount", "reboot poweroff"}
	if !reflect.DeepEqual(sys.calls, want) {
		t.Errorf("calls = %q\nwant    %q", sys.calls, want)
	}
}

func TestSequenceNothingToKill(t *testing.T) {
	sys := &fakeSystem{}
	Sequence(context.Background(), discard(), sys, nil, power.Halt, fastTimeouts())
	want := []string{"sync", "unmount", "reboot halt"}
	if !reflect.DeepEqual(sys.calls, want) {
		t.Errorf("calls = %q\nwant    %q", sys.calls, want)
	}
}

// Every step is bounded: a service that never stops and a sync that
// hangs cannot keep the machine up.
func TestSequenceBounded(t *testing.T) {
	sys := &fakeSystem{hangSync: true}
	svcs := []Stopper{&fakeService{name: "stuck", sys: sys, hang: true}}
	done := make(chan error, 1)
	go func() { done <- Sequence(context.Background(), discard(), sys, svcs, power.PowerOff, fastTimeouts()) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Sequence still running after 5s with 50ms step limits")
	}
	sys.mu.Lock()
	defer sys.mu.Unlock()
	want := []string{"stop stuck", "sync", "unmount", "reboot poweroff"}
	if !reflect.DeepEqual(sys.calls, want) {
		t.Errorf("calls = %q\nwant    %q", sys.calls, want)
	}
}

func TestSequenceLogs(t *testing.T) {
	var buf strings.Builder
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), nil))
	sys := &fakeSystem{pids: []int{10}, ignoreTERM: true, rebootErr: errors.New("EPERM")}
	err := Sequence(context.Background(), log, sys, nil, power.PowerOff, fastTimeouts())
	if err == nil || !strings.Contains(err.Error(), "reboot(poweroff)") {
		t.Errorf("err = %v", err)
	}
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	for _, s := range []string{"phase=shutdown", `msg="shutting down" phase=shutdown mode=poweroff`, "sending SIGKILL", "pids=10", "synced", "unmounted", `msg="reboot failed"`} {
		if !strings.Contains(out, s) {
			t.Errorf("log lacks %q:\n%s", s, out)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestParseStat(t *testing.T) {
	tests := []struct {
		in   string
		want Stat
		user bool
	}{
		{"1 (berth) S 0 1 1 0 -1 4194560 100 0", Stat{1, 'S', 0, 0, 4194560}, true},
		{"2 (kthreadd) S 0 0 0 0 -1 2129984 0 0", Stat{2, 'S', 0, 0, 2129984}, false},
		{"15 (kworker/0:1-events) I 2 0 0 0 -1 69238880 0 0", Stat{15, 'I', 2, 0, 69238880}, false},
		{"300 (a (b) c) R 1 300 300 0 -1 4194304 0 0", Stat{300, 'R', 1, 0, 4194304}, true},
		{"301 (zombie) Z 1 300 300 0 -1 4194308 0 0", Stat{301, 'Z', 1, 0, 4194308}, false},
		// The debug shell on ttyS1 (major 4, minor 65: 4<<8 | 65).
		{"230 (sh) S 1 230 230 1089 230 4194560 0 0", Stat{230, 'S', 1, 1089, 4194560}, true},
	}
	for _, tt := range tests {
		got, err := ParseStat(tt.in)
		if err != nil || got != tt.want || got.IsUser() != tt.user {
			t.Errorf("ParseStat(%q) = %+v (user %v), %v; want %+v user %v", tt.in, got, got.IsUser(), err, tt.want, tt.user)
		}
	}
	for _, bad := range []string{"", "1 berth S", "x (a) S 0 0 0 0 0 0", "1 (a) S", "1 (a) S x 0 0 0 0 0", "1 (a) SS 0 0 0 0 0 0", "1 (a) S 0 0 0 tty 0 0"} {
		if _, err := ParseStat(bad); err == nil {
			t.Errorf("ParseStat(%q) gave no error", bad)
		}
	}
}

// TestLinuxRemaining reads this machine's real /proc: a child we start
// must be listed, and this process must not.
func TestLinuxRemaining(t *testing.T) {
	p, err := os.StartProcess("/bin/sleep", []string{"sleep", "5"}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { p.Kill(); p.Wait() }()
	pids, err := Linux{}.Remaining()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, pid := range pids {
		if pid == os.Getpid() {
			t.Error("Remaining lists this process")
		}
		if pid == p.Pid {
			found = true
		}
	}
	if !found {
		t.Errorf("Remaining = %v lacks child %d", pids, p.Pid)
	}
}

// FuzzParseStat: /proc text; no panic, and a parse that succeeds has a
// one-letter state.
func FuzzParseStat(f *testing.F) {
	f.Add("300 (a (b) c) R 1 300 300 0 -1 4194304 0 0")
	f.Fuzz(func(t *testing.T, s string) {
		st, err := ParseStat(s)
		if err == nil && st.State == 0 {
			t.Fatalf("parsed %q with no state", s)
		}
		_ = fmt.Sprint(st.IsUser())
	})
}

// slowStopper needs longer than Timeouts.Service and says so.
type slowStopper struct {
	fakeService
	need time.Duration
}

func (s *slowStopper) StopTimeout() time.Duration { return s.need }

func (s *slowStopper) Stop(ctx context.Context) error {
	s.sys.rec("stop " + s.name)
	select {
	case <-time.After(s.need / 2):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestSequenceSteps: every step reaches onStep in order with its
// duration, and a Bounded stopper gets its own bound, not Service's.
func TestSequenceSteps(t *testing.T) {
	sys := &fakeSystem{}
	slow := &slowStopper{fakeService: fakeService{name: "logind", sys: sys}, need: 400 * time.Millisecond}
	svcs := []Stopper{&fakeService{name: "kubelet", sys: sys}, slow}
	var steps []Step
	SequenceWith(context.Background(), discard(), sys, svcs, power.PowerOff, fastTimeouts(), func(s Step) { steps = append(steps, s) })
	var names []string
	for _, s := range steps {
		names = append(names, s.Name)
	}
	want := []string{"stop logind", "stop kubelet", "kill remaining", "sync", "unmount"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("steps = %q, want %q", names, want)
	}
	if steps[0].Error != "" || steps[0].DurationMs < 150 {
		t.Errorf("the bounded stopper's step = %+v: cut at Service's 50ms?", steps[0])
	}
}
