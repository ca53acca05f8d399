// Package shutdown is PID 1's way down: stop services in reverse start
// order, kill whatever is left (SIGTERM, a grace period, SIGKILL), sync,
// unmount, and reboot(2) into poweroff, restart or halt. Every step has a
// deadline and logs one line, because a node that hangs on the way down is
// as broken as one that never came up.
//
// What happens (Sequence) is separate from the syscalls (System), so the
// order and the deadlines are tested without root.
package shutdown

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berth-node/berth/init/power"
	"github.com/berth-node/berth/internal/safe"
	"github.com/berth-node/berth/mounts"
	"golang.org/x/sys/unix"
)

// Stopper is a service berth started; Stop must return by ctx's deadline.
type Stopper interface {
	Name() string
	Stop(ctx context.Context) error
}

// Bounded is a Stopper whose stop needs more than Timeouts.Service: the
// wait for kubelet's shutdown inhibitor lasts as long as kubelet's
// shutdownGracePeriod, which the configuration can change at run time.
type Bounded interface {
	StopTimeout() time.Duration
}

// Step is one finished step of the sequence, for the boot report.
type Step struct {
	Name       string `json:"name"`
	DurationMs int64  `json:"durationMs"`
	Error      string `json:"error,omitempty"`
}

// System is the acting half: the calls that touch the machine.
type System interface {
	// KillAll sends sig to every process but PID 1 (kill(-1, sig)).
	KillAll(sig syscall.Signal) error
	// HangUp sends SIGHUP to every user process that has a controlling
	// terminal, as systemd-shutdown does after its SIGTERM: an
	// interactive shell (berth.debugshell's, or one a berth.exec hook
	// started) ignores SIGTERM and exits on a hangup, while a daemon
	// with no terminal would take SIGHUP as "reload" and is not sent it.
	HangUp() error
	// Remaining lists pids of user processes still alive (not PID 1, not
	// kernel threads, not zombies).
	Remaining() ([]int, error)
	Sync()
	UnmountAll(ctx context.Context, log *slog.Logger) error
	// Reboot ends the machine; it returns only on failure.
	Reboot(mode power.Mode) error
}

// Timeouts bound each step.
type Timeouts struct {
	Service time.Duration // each service's Stop
	Grace   time.Duration // after SIGTERM, before SIGKILL
	Kill    time.Duration // after SIGKILL, for the last exits
	Sync    time.Duration
	Unmount time.Duration
	Poll    time.Duration // how often to look for remaining processes
}

// DefaultTimeouts suit a node: services get long enough for kubelet to
// drain, the rest is quick.
func DefaultTimeouts() Timeouts {
	return Timeouts{
		Service: 30 * time.Second,
		Grace:   5 * time.Second,
		Kill:    2 * time.Second,
		Sync:    10 * time.Second,
		Unmount: 10 * time.Second,
		Poll:    100 * time.Millisecond,
	}
}

// Run shuts the real machine down. It returns only if reboot(2) failed.
func Run(ctx context.Context, log *slog.Logger, services []Stopper, mode power.Mode) error {
	return Sequence(ctx, log, Linux{}, services, mode, DefaultTimeouts())
}

// Sequence runs the shutdown steps against sys. It returns only if
// sys.Reboot returned.
func Sequence(ctx context.Context, log *slog.Logger, sys System, services []Stopper, mode power.Mode, t Timeouts) error {
	return SequenceWith(ctx, log, sys, services, mode, t, nil)
}

// SequenceWith is Sequence that also hands each finished step to onStep
// (when not nil), so PID 1 can put the steps in boot.json as they end.
func SequenceWith(ctx context.Context, log *slog.Logger, sys System, services []Stopper, mode power.Mode, t Timeouts, onStep func(Step)) error {
	log = log.With("phase", "shutdown")
	step := func(name string, start time.Time, err error) {
		if onStep == nil {
			return
		}
		st := Step{Name: name, DurationMs: time.Since(start).Milliseconds()}
		if err != nil {
			st.Error = err.Error()
		}
		onStep(st)
	}
	log.Info("shutting down", "mode", mode.String(), "services", len(services))

	for i := len(services) - 1; i >= 0; i-- {
		s := services[i]
		start := time.Now()
		limit := t.Service
		if b, ok := s.(Bounded); ok {
			limit = max(limit, b.StopTimeout())
		}
		sctx, cancel := context.WithTimeout(ctx, limit)
		err := bounded(sctx, log, "stop "+s.Name(), func() error { return s.Stop(sctx) })
		cancel()
		step("stop "+s.Name(), start, err)
		if err != nil {
			log.Warn("service did not stop cleanly", "service", s.Name(), "duration_ms", time.Since(start).Milliseconds(), "err", err)
		} else {
			log.Info("service stopped", "service", s.Name(), "duration_ms", time.Since(start).Milliseconds())
		}
	}

	start := time.Now()
	killRemaining(ctx, log, sys, t)
	step("kill remaining", start, nil)

	start = time.Now()
	sctx, cancel := context.WithTimeout(ctx, t.Sync)
	if err := bounded(sctx, log, "sync", func() error { sys.Sync(); return nil }); err != nil {
		step("sync", start, err)
		log.Warn("sync did not finish", "duration_ms", time.Since(start).Milliseconds(), "err", err)
	} else {
		step("sync", start, nil)
		log.Info("synced", "duration_ms", time.Since(start).Milliseconds())
	}
	cancel()

	start = time.Now()
	uctx, cancel := context.WithTimeout(ctx, t.Unmount)
	if err := bounded(uctx, log, "unmount", func() error { return sys.UnmountAll(uctx, log) }); err != nil {
		step("unmount", start, err)
		log.Warn("unmount incomplete", "duration_ms", time.Since(start).Milliseconds(), "err", err)
	} else {
		step("unmount", start, nil)
		log.Info("unmounted", "duration_ms", time.Since(start).Milliseconds())
	}
	cancel()

	log.Info("calling reboot", "mode", mode.String())
	err := sys.Reboot(mode)
	log.Error("reboot failed", "mode", mode.String(), "err", err)
	return fmt.Errorf("reboot(%s): %w", mode, err)
}

// killRemaining sends SIGTERM to all, waits up to the grace period for
// them to go, then SIGKILLs the rest and waits briefly for the exits.
func killRemaining(ctx context.Context, log *slog.Logger, sys System, t Timeouts) {
	pids, err := sys.Remaining()
	if err != nil {
		log.Warn("listing processes", "err", err)
	}
	if err == nil && len(pids) == 0 {
		log.Info("no processes left")
		return
	}
	start := time.Now()
	if err := sys.KillAll(unix.SIGTERM); err != nil {
		log.Warn("sending SIGTERM to all", "err", err)
	}
	if err := sys.HangUp(); err != nil {
		log.Warn("sending SIGHUP to the processes on a terminal", "err", err)
	}
	if left := waitGone(ctx, sys, t.Grace, t.Poll); len(left) == 0 {
		log.Info("processes exited after SIGTERM", "count", len(pids), "duration_ms", time.Since(start).Milliseconds())
		return
	} else {
		log.Warn("processes still running after grace period, sending SIGKILL", "pids", fmtPids(left), "grace_ms", t.Grace.Milliseconds())
	}
	if err := sys.KillAll(unix.SIGKILL); err != nil {
		log.Warn("sending SIGKILL to all", "err", err)
	}
	if left := waitGone(ctx, sys, t.Kill, t.Poll); len(left) > 0 {
		log.Warn("processes survived SIGKILL (stuck in the kernel?)", "pids", fmtPids(left))
		return
	}
	log.Info("processes killed", "duration_ms", time.Since(start).Milliseconds())
}

// waitGone polls until no process is left or d passes; it returns what is
// left at the end.
func waitGone(ctx context.Context, sys System, d, poll time.Duration) []int {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		left, err := sys.Remaining()
		if err == nil && len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return left
		case <-deadline.C:
			left, _ = sys.Remaining()
			return left
		case <-tick.C:
		}
	}
}

func fmtPids(p []int) string {
	const show = 20
	var b strings.Builder
	for i, pid := range p {
		if i == show {
			fmt.Fprintf(&b, ",...(%d more)", len(p)-show)
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(pid))
	}
	return b.String()
}

// bounded runs fn and gives up waiting at ctx's end; fn keeps running in
// the background then (sync and umount cannot be interrupted), which is the
// best PID 1 can do on the way down. A panic in fn is logged (as name) and
// is fn's error: the shutdown goes on to its next step.
func bounded(ctx context.Context, log *slog.Logger, name string, fn func() error) error {
	// One send, fn's or its panic's (fn's send is the goroutine's last
	// statement: nothing can panic after it), into room for one, so the
	// goroutine never blocks once nobody waits.
	done := make(chan error, 1)
	safe.Go(log, "shutdown: "+name, func() { done <- fn() }, func(p *safe.Panic) { done <- p })
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Linux is the real System.
type Linux struct {
	// Proc is the procfs mount; empty means /proc.
	Proc string
}

// KillAll implements System.
func (Linux) KillAll(sig syscall.Signal) error {
	err := unix.Kill(-1, sig)
	if err == unix.ESRCH { // nothing to signal
		return nil
	}
	return err
}

// Remaining implements System.
func (l Linux) Remaining() ([]int, error) {
	users, err := l.users()
	if err != nil {
		return nil, err
	}
	out := make([]int, 0, len(users))
	for _, st := range users {
		out = append(out, st.Pid)
	}
	return out, nil
}

// HangUp implements System.
func (l Linux) HangUp() error {
	users, err := l.users()
	if err != nil {
		return err
	}
	var errs []error
	for _, st := range users {
		if st.TTY == 0 {
			continue
		}
		if err := unix.Kill(st.Pid, unix.SIGHUP); err != nil && err != unix.ESRCH {
			errs = append(errs, fmt.Errorf("SIGHUP to pid %d: %w", st.Pid, err))
		}
	}
	return errors.Join(errs...)
}

// users lists the user processes (Stat.IsUser) in /proc but this one.
func (l Linux) users() ([]Stat, error) {
	proc := l.Proc
	if proc == "" {
		proc = "/proc"
	}
	ents, err := os.ReadDir(proc)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", proc, err)
	}
	self := os.Getpid()
	var out []Stat
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile(filepath.Join(proc, e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		st, err := ParseStat(string(b))
		if err != nil {
			continue
		}
		if st.IsUser() {
			out = append(out, st)
		}
	}
	return out, nil
}

// Sync implements System.
func (Linux) Sync() { unix.Sync() }

// UnmountAll implements System.
func (Linux) UnmountAll(ctx context.Context, log *slog.Logger) error {
	return mounts.UnmountAll(ctx, log)
}

// Reboot implements System.
func (Linux) Reboot(mode power.Mode) error {
	cmd := unix.LINUX_REBOOT_CMD_POWER_OFF
	switch mode {
	case power.Reboot:
		cmd = unix.LINUX_REBOOT_CMD_RESTART
	case power.Halt:
		cmd = unix.LINUX_REBOOT_CMD_HALT
	}
	return unix.Reboot(cmd)
}

// Stat is what shutdown needs from /proc/PID/stat.
type Stat struct {
	Pid   int
	State byte
	PPid  int
	// TTY is tty_nr, the controlling terminal's device number; 0 for none.
	TTY   int
	Flags uint64
}

// pfKthread is PF_KTHREAD in the flags field.
const pfKthread = 0x00200000

// IsUser reports whether the process is one kill(-1) can end: not a
// kernel thread, not already a zombie.
func (s Stat) IsUser() bool {
	return s.Flags&pfKthread == 0 && s.Pid != 2 && s.PPid != 2 && s.State != 'Z' && s.State != 'X'
}

// ParseStat decodes the fields of /proc/PID/stat that shutdown needs. The
// command name is in parentheses and may itself hold spaces and ')', so
// fields are counted from the last ')'.
func ParseStat(s string) (Stat, error) {
	open := strings.IndexByte(s, '(')
	closeP := strings.LastIndexByte(s, ')')
	if open < 0 || closeP < open {
		return Stat{}, fmt.Errorf("stat %q: no (comm)", s)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(s[:open]))
	if err != nil {
		return Stat{}, fmt.Errorf("stat %q: pid: %w", s, err)
	}
	f := strings.Fields(s[closeP+1:])
	// state ppid pgrp session tty_nr tpgid flags
	if len(f) < 7 || len(f[0]) != 1 {
		return Stat{}, fmt.Errorf("stat %q: too few fields", s)
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return Stat{}, fmt.Errorf("stat %q: ppid: %w", s, err)
	}
	tty, err := strconv.Atoi(f[4])
	if err != nil {
		return Stat{}, fmt.Errorf("stat %q: tty_nr: %w", s, err)
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	if err != nil {
		return Stat{}, fmt.Errorf("stat %q: flags: %w", s, err)
	}
	return Stat{Pid: pid, State: f[0][0], PPid: ppid, TTY: tty, Flags: flags}, nil
}
