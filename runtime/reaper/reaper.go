// Package reaper reaps every child of berth (PID 1 inherits all orphans)
// without ever stealing the exit status of a child that berth started itself.
//
// The trap it avoids: os/exec's Cmd.Wait waits for one pid while a wait4(-1)
// loop reaps any pid; whichever runs first wins, and the loser sees
// "waitid: no child processes". Here there is exactly one waiter, the
// reaper, as in Talos's machined: Start holds the reaper's lock across
// fork/exec and the registration of the new pid, and the reap loop calls
// wait4 under the same lock, so no exit can be reaped before interest in it
// is registered. Statuses of registered pids go to their Process; every other
// pid is an orphan, counted and logged at debug level.
//
// Callers never call cmd.Wait (it would race, and fail with ECHILD). Because
// cmd.Wait is also what joins os/exec's I/O copying goroutines and closes
// the pipes it made, Start accepts only commands whose Stdin, Stdout and
// Stderr are nil or *os.File (os/exec hands those to the child directly, with
// no goroutine): use os.Pipe and own both ends, not an io.Writer or
// cmd.StdoutPipe. Likewise exec.CommandContext's watcher goroutine is only
// joined by cmd.Wait, so commands with Cancel or WaitDelay set are refused:
// bound the wait with Process.Wait's context and kill explicitly instead.
//
// So in PID 1 every program must be run through the Reaper: Exec replaces
// cmd.Run, CombinedOutput replaces cmd.CombinedOutput. A cmd.Run anywhere
// else in berth would lose its child's status to the reap loop.
//
// It works when berth is not PID 1 too, once the process is a child
// subreaper (prctl PR_SET_CHILD_SUBREAPER), which is how its tests run.
package reaper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// ExitStatus is how a child ended.
type ExitStatus struct {
	// Code is the exit code, or -1 when the child was killed by a signal.
	Code int `json:"code"`
	// Signal is the signal that killed the child, 0 if it exited.
	Signal syscall.Signal `json:"signal,omitempty"`
}

// String reads like os.ProcessState's: "exit status 3" or "signal: killed".
func (s ExitStatus) String() string {
	if s.Signal != 0 {
		return "signal: " + s.Signal.String()
	}
	return fmt.Sprintf("exit status %d", s.Code)
}

// Success reports whether the child exited with code 0.
func (s ExitStatus) Success() bool { return s.Signal == 0 && s.Code == 0 }

// fromWaitStatus converts a wait4 status. Stopped/continued statuses are
// never asked for (no WUNTRACED/WCONTINUED), so exit or signal is all there is.
func fromWaitStatus(ws unix.WaitStatus) ExitStatus {
	if ws.Signaled() {
		return ExitStatus{Code: -1, Signal: syscall.Signal(ws.Signal())}
	}
	return ExitStatus{Code: ws.ExitStatus()}
}

// Reaper owns wait4 for the whole process. Create one with New, run Run in
// one goroutine for the life of the process, start children with Start.
type Reaper struct {
	log *slog.Logger

	// mu is held across cmd.Start + registration and across each wait4, so
	// a registered child's status can only ever go to its Process.
	mu      sync.Mutex
	procs   map[int]*Process
	orphans uint64
}

// Process is a child started through the Reaper.
type Process struct {
	pid  int
	cmd  *exec.Cmd
	done chan struct{}
	// mu orders Signal against the release of cmd.Process after reaping.
	mu       sync.Mutex
	released bool
	// status is written once before done is closed.
	status ExitStatus
}

// New returns a Reaper. Nothing is reaped until Run is called.
func New(log *slog.Logger) *Reaper {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Reaper{log: log, procs: make(map[int]*Process)}
}

// Run reaps children on every SIGCHLD until ctx is done. Start it before
// any child exists; statuses of children that exit before Run starts are not
// lost (they stay zombies until the first pass, which Run makes at once).
func (r *Reaper) Run(ctx context.Context) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, unix.SIGCHLD)
	defer signal.Stop(sigs)
	for {
		r.ReapOnce()
		select {
		case <-ctx.Done():
			return
		case <-sigs:
		}
	}
}

// ReapOnce reaps every child that has exited, without blocking. Run calls
// it on each SIGCHLD; it is exported for callers that must be sure nothing
// is left (for example shutdown, after killing everything).
func (r *Reaper) ReapOnce() {
	for {
		if !r.reapOne() {
			return
		}
	}
}

// reapOne reaps at most one child and reports whether it did.
func (r *Reaper) reapOne() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ws unix.WaitStatus
	pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
	if errors.Is(err, unix.EINTR) {
		return true
	}
	if err != nil || pid <= 0 {
		// ECHILD (no children at all) or 0 (children, none exited).
		return false
	}
	st := fromWaitStatus(ws)
	if p, ok := r.procs[pid]; ok {
		delete(r.procs, pid)
		p.status = st
		// The pidfd os/exec may hold for this child is useless now; release
		// it so it does not leak (cmd.Wait, which would, is never called).
		p.mu.Lock()
		_ = p.cmd.Process.Release()
		p.released = true
		p.mu.Unlock()
		close(p.done)
		return true
	}
	r.orphans++
	r.log.Debug("reaped orphan", "pid", pid, "status", st.String())
	return true
}

// Orphans is how many children not started through Start were reaped.
func (r *Reaper) Orphans() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.orphans
}

// Start starts cmd and registers it, atomically with respect to reaping.
// cmd's Stdin, Stdout and Stderr must be nil or *os.File, and cmd must not
// come from exec.CommandContext (see the package doc). Never call cmd.Wait:
// use Process.Wait.
func (r *Reaper) Start(cmd *exec.Cmd) (*Process, error) {
	if err := checkCmd(cmd); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// If exec fails after fork, os/exec reaps its own failed child by pid
	// inside Start; holding mu keeps our wait4(-1) from stealing that one.
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	p := &Process{pid: cmd.Process.Pid, cmd: cmd, done: make(chan struct{})}
	r.procs[p.pid] = p
	return p, nil
}

func checkCmd(cmd *exec.Cmd) error {
	if cmd == nil {
		return errors.New("starting a process: nil command")
	}
	for _, s := range []struct {
		name string
		v    any
	}{{"Stdin", cmd.Stdin}, {"Stdout", cmd.Stdout}, {"Stderr", cmd.Stderr}} {
		if s.v == nil {
			continue
		}
		if _, ok := s.v.(*os.File); !ok {
			return fmt.Errorf("starting %s: cmd.%s is a %T; the reaper needs nil or an *os.File "+
				"(os/exec's copy goroutines are only joined by cmd.Wait, which must not be called)", cmd.Path, s.name, s.v)
		}
	}
	if cmd.Cancel != nil || cmd.WaitDelay != 0 {
		return fmt.Errorf("starting %s: command has Cancel or WaitDelay (exec.CommandContext); "+
			"use exec.Command and bound Process.Wait with a context instead", cmd.Path)
	}
	return nil
}

// Pid is the child's process id.
func (p *Process) Pid() int { return p.pid }

// Done is closed when the child has been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Signal sends sig to the child if it has not been reaped yet. It goes through
// os.Process, which uses a pidfd where the kernel has them, so a recycled pid
// is never signalled.
func (p *Process) Signal(sig os.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.released {
		return os.ErrProcessDone
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signalling pid %d (%s): %w", p.pid, p.cmd.Path, err)
	}
	return nil
}

// Wait returns the child's exit status once it has been reaped, or ctx's
// error if ctx ends first (the child keeps running; Wait may be called
// again). It may be called any number of times, from any goroutine.
func (p *Process) Wait(ctx context.Context) (ExitStatus, error) {
	select {
	case <-p.done:
		return p.status, nil
	case <-ctx.Done():
		return ExitStatus{}, fmt.Errorf("waiting for pid %d (%s): %w", p.pid, p.cmd.Path, ctx.Err())
	}
}
