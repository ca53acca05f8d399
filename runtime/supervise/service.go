package supervise

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/berth-node/berth/plan"
	"github.com/berth-node/berth/runtime/reaper"
	"github.com/berth-node/berth/runtime/supervise/cgroup"
	"github.com/berth-node/berth/runtime/supervise/logring"
	"github.com/berth-node/berth/runtime/supervise/rotate"
)

// State is where a service is in its life.
type State string

// The states, in the order a healthy service passes them.
const (
	StateWaiting  State = "waiting"  // for its dependencies
	StateStarting State = "starting" // exec in progress
	StateRunning  State = "running"  // started, not yet ready
	StateReady    State = "ready"
	StateBackoff  State = "backoff" // exited; restart scheduled
	StateStopping State = "stopping"
	StateStopped  State = "stopped"   // stopped by Stop
	StateExited   State = "exited"    // exited during shutdown; not restarted
	StateAbandon  State = "abandoned" // supervision context ended
)

// Status is a service's state for the boot report.
type Status struct {
	Name     string `json:"name"`
	State    State  `json:"state"`
	PID      int    `json:"pid,omitempty"`
	Restarts int    `json:"restarts"`
	// StartedAt is the first exec; the boot report turns it into time since kernel start.
	StartedAt time.Time `json:"started_at,omitzero"`
	// ReadyMs is from the first exec to the first ready; 0 if never ready.
	ReadyMs    int64              `json:"ready_ms,omitempty"`
	LastExit   *reaper.ExitStatus `json:"last_exit,omitempty"`
	LastExitAt time.Time          `json:"last_exit_at,omitzero"`
	// LastError is the supervisor's last complaint (failed start, not
	// ready in time, hook failure); LastErrorLine the service's own last
	// error-level log line, which usually says why (x509: ...).
	LastError     string   `json:"last_error,omitempty"`
	LastErrorLine string   `json:"last_error_line,omitempty"`
	LogTail       []string `json:"log_tail,omitempty"`
}

// Service is one supervised process. It implements shutdown.Stopper.
type Service struct {
	spec         plan.Service
	sup          *Supervisor
	prober       Prober
	placement    *cgroup.Placement
	deps         []*Service
	ring         *logring.Ring
	file         *rotate.Writer
	log          *slog.Logger
	consoleLevel slog.Level

	readyCh  chan struct{} // closed once first ready and its hook has run
	stopCh   chan struct{} // closed by Stop
	runDone  chan struct{} // closed when run returns
	stopOnce sync.Once

	mu            sync.Mutex
	launched      bool
	stopping      bool
	state         State
	proc          *reaper.Process
	restarts      int
	failures      int
	firstStart    time.Time
	startedAt     time.Time // this run
	readyAt       time.Time // this run; zero until ready
	readyIn       time.Duration
	hookDone      bool
	lastExit      *reaper.ExitStatus
	lastExitAt    time.Time
	lastError     string
	lastErrorLine string
	killReason    string

	fileErrLogged atomic.Bool // not under mu: start writes the file holding mu
}

var errStopping = errors.New("service is stopping")

// Name implements shutdown.Stopper.
func (s *Service) Name() string { return s.spec.Name }

// Ready is closed once the service is first ready and its AfterReady hook
// has run.
func (s *Service) Ready() <-chan struct{} { return s.readyCh }

// Tail returns the last n lines the service wrote (n <= 0: all kept).
func (s *Service) Tail(n int) []string { return s.ring.Tail(n) }

// Status returns the service's state, with the last TailLines log lines.
func (s *Service) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{
		Name:          s.spec.Name,
		State:         s.state,
		Restarts:      s.restarts,
		StartedAt:     s.firstStart,
		ReadyMs:       s.readyIn.Milliseconds(),
		LastExitAt:    s.lastExitAt,
		LastError:     s.lastError,
		LastErrorLine: s.lastErrorLine,
		LogTail:       s.ring.Tail(s.sup.opts.TailLines),
	}
	if s.proc != nil {
		st.PID = s.proc.Pid()
	}
	if s.lastExit != nil {
		e := *s.lastExit
		st.LastExit = &e
	}
	return st
}

func (s *Service) setState(st State) {
	s.mu.Lock()
	s.state = st
	s.mu.Unlock()
	s.notify()
}

// notify tells Options.OnChange the current state; called with s.mu not
// held, after the transitions an operator cares about (started, ready,
// exited, stopped).
func (s *Service) notify() {
	if fn := s.sup.opts.OnChange; fn != nil {
		s.mu.Lock()
		st := s.state
		s.mu.Unlock()
		fn(s.spec.Name, st)
	}
}

func (s *Service) now() time.Time { return s.sup.opts.Clock.Now() }

// run is the service's life: wait for dependencies, then start, wait for
// the exit, back off, start again, until Stop or ctx ends.
func (s *Service) run(ctx context.Context) {
	defer close(s.runDone)
	if !s.waitDeps(ctx) {
		s.finish(ctx)
		return
	}
	for {
		proc, output, err := s.start()
		if errors.Is(err, errStopping) {
			s.finish(ctx)
			return
		}
		if err != nil {
			s.mu.Lock()
			s.lastError = err.Error()
			s.mu.Unlock()
			s.log.Error("service failed to start", "err", err)
		} else if s.notify(); !s.supervise(ctx, proc, output) {
			s.finish(ctx)
			return
		}

		s.mu.Lock()
		if s.stopping || s.sup.isFrozen() {
			stopping, exit := s.stopping, s.lastExit
			s.mu.Unlock()
			if !stopping && exit != nil {
				s.log.Warn("service exited during shutdown; not restarted", exitAttrs(*exit)...)
			}
			s.finish(ctx)
			return
		}
		var healthy time.Duration
		if !s.readyAt.IsZero() {
			healthy = s.now().Sub(s.readyAt)
		}
		s.failures = s.sup.opts.Backoff.Failures(s.failures, healthy)
		delay := s.sup.opts.Backoff.Delay(s.failures)
		s.restarts++
		s.state = StateBackoff
		exit, reason, restarts := s.lastExit, s.killReason, s.restarts
		s.mu.Unlock()
		s.notify()

		attrs := []any{"restarts", restarts, "next_in", delay.String()}
		if err != nil {
			attrs = append(attrs, "err", err)
		} else {
			attrs = append(exitAttrs(*exit), attrs...)
		}
		if reason != "" {
			attrs = append(attrs, "reason", reason)
		}
		s.log.Warn("service exited", attrs...)
		for _, l := range s.ring.Tail(s.sup.opts.TailLines) {
			s.log.Warn("service log tail", "line", l)
		}

		select {
		case <-s.sup.opts.Clock.After(delay):
		case <-s.stopCh:
			s.finish(ctx)
			return
		case <-s.sup.frozen:
			s.finish(ctx)
			return
		case <-ctx.Done():
			s.finish(ctx)
			return
		}
	}
}

func exitAttrs(e reaper.ExitStatus) []any {
	if e.Signal != 0 {
		return []any{"signal", e.Signal.String()}
	}
	return []any{"code", e.Code}
}

// finish records why run ended.
func (s *Service) finish(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.stopping, s.firstStart.IsZero() && s.sup.isFrozen():
		s.state = StateStopped
	case s.sup.isFrozen():
		s.state = StateExited
	case ctx.Err() != nil:
		s.state = StateAbandon
	}
}

// waitDeps blocks until every dependency is ready. A dependency that never
// becomes ready is loud on its own (each of its starts is bounded by
// ReadyTimeout and logs its exit); here a periodic line says who waits.
func (s *Service) waitDeps(ctx context.Context) bool {
	for _, d := range s.deps {
		for waiting := true; waiting; {
			select {
			case <-d.readyCh:
				waiting = false
			case <-s.stopCh:
				return false
			case <-s.sup.frozen:
				return false
			case <-ctx.Done():
				return false
			case <-s.sup.opts.Clock.After(30 * time.Second):
				st := d.Status()
				s.log.Warn("still waiting for dependency", "dependency", d.Name(), "dependency_state", st.State,
					"dependency_restarts", st.Restarts)
			}
		}
	}
	return true
}

// start execs the service in its cgroup with its output on a pipe. It runs
// under s.mu so Stop either sees the process or stops it from starting.
func (s *Service) start() (*reaper.Process, chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping || s.sup.isFrozen() {
		return nil, nil, errStopping
	}
	s.state = StateStarting
	s.killReason = ""
	s.readyAt = time.Time{}

	cmd := exec.Command(s.spec.Argv[0], s.spec.Argv[1:]...)
	// The plan's Env is the whole environment; a nil Env would hand the
	// service berth's own.
	cmd.Env = append([]string{}, s.spec.Env...)
	cmd.Dir = s.spec.Dir
	// Its own process group, so a signal meant for berth's group (a test's
	// ^C) does not reach the services.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if s.placement != nil {
		cg, err := cgroup.Prepare(s.log, *s.placement)
		if err != nil {
			return nil, nil, fmt.Errorf("placing %s in its cgroup: %w", s.spec.Name, err)
		}
		defer cg.Close()
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = int(cg.Fd())
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("creating output pipe for %s: %w", s.spec.Name, err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	proc, err := s.sup.opts.Reaper.Start(cmd)
	pw.Close() // the child holds its own copy; EOF comes when it (and its children) close theirs
	if err != nil {
		pr.Close()
		return nil, nil, err
	}
	now := s.now()
	s.proc = proc
	s.state = StateRunning
	s.startedAt = now
	if s.firstStart.IsZero() {
		s.firstStart = now
	}
	s.writeFile(fmt.Sprintf("--- berth: started pid %d at %s: %s", proc.Pid(), now.UTC().Format(time.RFC3339Nano),
		strings.Join(s.spec.Argv, " ")))
	// Written after exec, so anything the service forks in the first
	// instants keeps berth's score; containerd and kubelet fork nothing
	// that early, and the alternative (changing berth's own score around
	// the fork) would race with the other services' starts.
	if s.spec.OOMScoreAdj != 0 {
		path := "/proc/" + strconv.Itoa(proc.Pid()) + "/oom_score_adj"
		// Not WriteFileAtomic: a procfs knob cannot be replaced by rename.
		if err := os.WriteFile(path, []byte(strconv.Itoa(s.spec.OOMScoreAdj)), 0); err != nil {
			s.log.Warn("setting OOM score adjustment", "pid", proc.Pid(), "path", path, "err", err)
		}
	}
	s.log.Info("service started", "pid", proc.Pid(), "cgroup", s.spec.Cgroup)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer pr.Close()
		readLines(pr, s.line)
	}()
	return proc, done, nil
}

// supervise waits for one run to end, probing for readiness meanwhile. It
// returns false if supervision was abandoned (ctx ended) with the process
// still running.
func (s *Service) supervise(ctx context.Context, proc *reaper.Process, output chan struct{}) bool {
	pctx, cancel := context.WithCancel(ctx)
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		s.probe(pctx, proc)
	}()
	var st reaper.ExitStatus
	select {
	case <-proc.Done():
		st, _ = proc.Wait(context.Background()) // already done: returns at once
	case <-ctx.Done():
		cancel()
		<-probed
		return false
	}
	cancel()
	<-probed
	// Let the reader catch the last lines before the tail is shown; a
	// grandchild holding the pipe open must not hold the restart up.
	select {
	case <-output:
	case <-time.After(time.Second):
	}
	s.mu.Lock()
	s.proc = nil
	s.lastExit = &st
	s.lastExitAt = s.now()
	s.mu.Unlock()
	s.writeFile(fmt.Sprintf("--- berth: pid %d exited: %s", proc.Pid(), st))
	return true
}

// probe checks readiness until it succeeds, the run ends (ctx), or
// ReadyTimeout passes, in which case the service is killed so its exit
// and log tail are shown and it is restarted on the backoff schedule.
func (s *Service) probe(ctx context.Context, proc *reaper.Process) {
	if s.prober == nil {
		s.markReady(ctx, proc, "started")
		return
	}
	o := s.sup.opts
	rctx, cancel := context.WithTimeout(ctx, o.ReadyTimeout)
	defer cancel()
	var lastErr error
	for {
		cctx, ccancel := context.WithTimeout(rctx, o.ProbeTimeout)
		detail, err := s.prober.Check(cctx)
		ccancel()
		if err == nil {
			s.markReady(ctx, proc, detail)
			return
		}
		lastErr = err
		t := time.NewTimer(o.ProbeInterval)
		select {
		case <-t.C:
			continue
		case <-rctx.Done():
			t.Stop()
		}
		if ctx.Err() != nil {
			return // the run ended first
		}
		reason := fmt.Sprintf("not ready within %v: %v", o.ReadyTimeout, lastErr)
		s.mu.Lock()
		s.killReason, s.lastError = reason, reason
		s.mu.Unlock()
		s.log.Error("service not ready; killing it to restart", "pid", proc.Pid(), "err", lastErr,
			"timeout", o.ReadyTimeout.String())
		s.terminate(ctx, proc)
		return
	}
}

// terminate sends SIGTERM, then SIGKILL after the stop timeout.
func (s *Service) terminate(ctx context.Context, proc *reaper.Process) {
	_ = proc.Signal(syscall.SIGTERM)
	t := time.NewTimer(s.spec.StopTimeout)
	defer t.Stop()
	select {
	case <-proc.Done():
	case <-ctx.Done():
	case <-t.C:
		_ = proc.Signal(syscall.SIGKILL)
	}
}

func (s *Service) markReady(ctx context.Context, proc *reaper.Process, detail string) {
	s.mu.Lock()
	now := s.now()
	s.readyAt = now
	if s.state == StateRunning {
		s.state = StateReady
	}
	if s.readyIn == 0 {
		s.readyIn = max(now.Sub(s.firstStart), time.Millisecond)
	}
	sinceStart := now.Sub(s.startedAt)
	hookDone := s.hookDone
	s.mu.Unlock()
	s.notify()
	s.log.Info("service ready", "pid", proc.Pid(), "detail", detail, "ready_ms", sinceStart.Milliseconds())
	if hookDone {
		return
	}
	if hook := s.sup.opts.AfterReady[s.spec.Name]; hook != nil {
		start := time.Now()
		hctx, cancel := context.WithTimeout(ctx, s.sup.opts.HookTimeout)
		err := hook(hctx)
		cancel()
		if err != nil && ctx.Err() != nil {
			// The service died under the hook: run it again next time.
			s.log.Warn("after-ready hook interrupted by the service's exit", "err", err)
			return
		}
		if err != nil {
			s.mu.Lock()
			s.lastError = "after-ready hook: " + err.Error()
			s.mu.Unlock()
			s.log.Error("after-ready hook failed; starting dependents anyway", "err", err,
				"duration_ms", time.Since(start).Milliseconds())
		} else {
			s.log.Info("after-ready hook done", "duration_ms", time.Since(start).Milliseconds())
		}
	}
	s.mu.Lock()
	s.hookDone = true
	s.mu.Unlock()
	close(s.readyCh)
}

// line takes one line of the service's output.
func (s *Service) line(l string) {
	s.ring.Add(l)
	s.writeFile(l)
	lvl := Classify(l)
	if lvl >= slog.LevelError {
		s.mu.Lock()
		s.lastErrorLine = l
		s.mu.Unlock()
	}
	if lvl >= s.consoleLevel {
		s.log.Log(context.Background(), lvl, l)
	}
	if fn := s.sup.opts.OnLine[s.spec.Name]; fn != nil {
		fn(l)
	}
}

func (s *Service) writeFile(l string) {
	if s.file == nil {
		return
	}
	if _, err := s.file.Write([]byte(l + "\n")); err != nil {
		// Once is enough: the same broken disk would repeat it per line.
		if !s.fileErrLogged.Swap(true) {
			s.log.Warn("service log file not writable; the console and ring still have it", "err", err)
		}
	}
}

// Stop implements shutdown.Stopper: it ends restarts (for every service,
// so nothing restarts during shutdown), sends SIGTERM, waits up to the
// service's stop timeout, then SIGKILLs. It returns by ctx's deadline.
func (s *Service) Stop(ctx context.Context) error {
	s.sup.freeze()
	s.mu.Lock()
	s.stopping = true
	s.stopOnce.Do(func() { close(s.stopCh) })
	proc, launched := s.proc, s.launched
	if proc != nil {
		s.state = StateStopping
	}
	s.mu.Unlock()

	if proc != nil {
		wait := s.spec.StopTimeout
		// Keep time for SIGKILL and its reaping inside the caller's bound.
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, max(time.Until(dl)-killReserve(time.Until(dl)), 0))
		}
		start := time.Now()
		s.log.Info("stopping service", "pid", proc.Pid(), "timeout", wait.String())
		_ = proc.Signal(syscall.SIGTERM)
		t := time.NewTimer(wait)
		select {
		case <-proc.Done():
			t.Stop()
		case <-t.C:
			s.log.Warn("service did not stop in time; killing it", "pid", proc.Pid(), "waited", wait.String())
			_ = proc.Signal(syscall.SIGKILL)
			if _, err := proc.Wait(ctx); err != nil {
				return fmt.Errorf("stopping %s: killed, not reaped: %w", s.spec.Name, err)
			}
		}
		st, _ := proc.Wait(ctx)
		s.log.Info("service stopped", "pid", proc.Pid(), "exit", st.String(), "duration_ms", time.Since(start).Milliseconds())
	}
	if launched {
		select {
		case <-s.runDone:
		case <-ctx.Done():
			return fmt.Errorf("stopping %s: %w", s.spec.Name, ctx.Err())
		}
	}
	s.setState(StateStopped)
	return nil
}

// killReserve is the part of a stop deadline kept for SIGKILL.
func killReserve(remaining time.Duration) time.Duration {
	return min(remaining/10, 2*time.Second)
}
