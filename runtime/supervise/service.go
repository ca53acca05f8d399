package supervise

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/berth-node/berth/internal/safe"
	"github.com/berth-node/berth/runtime/reaper"
	"github.com/berth-node/berth/runtime/rlimit"
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
	StartedAt time.Time `json:"startedAt,omitzero"`
	// ReadyMs is from the first exec to the first ready; 0 if never ready.
	ReadyMs    int64              `json:"readyMs,omitempty"`
	LastExit   *reaper.ExitStatus `json:"lastExit,omitempty"`
	LastExitAt time.Time          `json:"lastExitAt,omitzero"`
	// LastError is the supervisor's last complaint (failed start, not
	// ready in time, hook failure, a panic in berth's own code supervising
	// it: "supervising NAME: panic: ...", "readiness probe: panic: ...",
	// "reading the output: panic: ..."); LastErrorLine the service's own last
	// error-level log line, which usually says why (x509: ...).
	LastError     string `json:"lastError,omitempty"`
	LastErrorLine string `json:"lastErrorLine,omitempty"`
	// ExitErrorLine is the line the last run that failed died of; it stays
	// while the next run starts up, whose own error lines (containerd's
	// CNI complaint at every start) go to LastErrorLine and are no cause.
	// Empty until a run fails, and again once a run exits cleanly.
	ExitErrorLine string   `json:"exitErrorLine,omitempty"`
	LogTail       []string `json:"logTail,omitempty"`
}

// Service is one supervised process. It implements shutdown.Stopper.
type Service struct {
	spec         Spec
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
	exitErrorLine string
	// runErrorLine says the current run logged an error-level line;
	// without one, a failed run's last line becomes lastErrorLine.
	runErrorLine bool
	// runLines counts the current run's output lines (the reader adds,
	// start resets), so that a run that wrote nothing is not given the
	// previous run's last line; lastOutput is the last run's last line.
	runLines   atomic.Int64
	lastOutput string
	killReason string

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
		ExitErrorLine: s.exitErrorLine,
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
// exited, stopped). A panic in OnChange is logged and is no failure of the
// service: it is the report's, not the service's.
func (s *Service) notify() {
	if fn := s.sup.opts.OnChange; fn != nil {
		s.mu.Lock()
		st := s.state
		s.mu.Unlock()
		_ = safe.Call(s.log, "state change hook", func() error {
			fn(s.spec.Name, st)
			return nil
		})
	}
}

func (s *Service) now() time.Time { return s.sup.opts.Clock.Now() }

// launch runs the service's life (run) on a goroutine of its own. A panic
// there is a bug in berth, not in the service, but it is handled as the
// service's failure, and supervision goes on: the panic is recorded in the
// service's status and runPanicked launches a new goroutine, which stops
// whatever process the dead one left running and restarts the service on
// the backoff schedule, as after an exit. after is nil at the first launch
// and the panic's error after one.
func (s *Service) launch(ctx context.Context, after error) {
	safe.Go(s.log, "supervise "+s.spec.Name, func() {
		s.run(ctx, after)
		close(s.runDone)
	}, func(p *safe.Panic) { s.runPanicked(ctx, p) })
}

// runPanicked handles a panic that ended the service's goroutine, on that
// goroutine after the recovery (safe.Go's onPanic, where a second panic
// would end PID 1). So it does only what cannot panic: no callbacks, no
// test clock. A new goroutine takes over unless supervision is ending, at
// most one per safe.LoopDelay, so that a panic on every pass cannot spin.
func (s *Service) runPanicked(ctx context.Context, p *safe.Panic) {
	err := fmt.Errorf("supervising %s: %w", s.spec.Name, p)
	s.mu.Lock()
	s.lastError = err.Error()
	s.mu.Unlock()
	t := time.NewTimer(safe.LoopDelay)
	select {
	case <-t.C:
	case <-s.stopCh:
	case <-s.sup.frozen:
	case <-ctx.Done():
	}
	t.Stop()
	if s.ending(ctx) {
		// Stop, or the shutdown's Stop of this service to come, ends a
		// process still running; an abandoned one is left, as ever.
		s.finish(ctx)
		close(s.runDone)
		return
	}
	s.log.Warn("service supervision restarting after a panic", "err", err)
	s.launch(ctx, err)
}

// ending reports whether supervision is over: the service or the node is
// stopping, or the supervision context ended.
func (s *Service) ending(ctx context.Context) bool {
	s.mu.Lock()
	stopping := s.stopping
	s.mu.Unlock()
	return stopping || s.sup.isFrozen() || ctx.Err() != nil
}

// run is the service's life: wait for dependencies, then start, wait for
// the exit, back off, start again, until Stop or ctx ends. after, when not
// nil, is the panic that ended the previous goroutine running it: that
// counts as a failed run, so run first stops the process it left (nothing
// watches it any more, and a second instance must not start beside it) and
// backs off.
func (s *Service) run(ctx context.Context, after error) {
	if after != nil {
		s.stopLeftover(ctx)
		if !s.backoff(ctx, after) {
			return
		}
	}
	if !s.waitDeps(ctx) {
		s.finish(ctx)
		return
	}
	for {
		s.testHook("start")
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
		if !s.backoff(ctx, err) {
			return
		}
	}
}

// backoff follows a run that ended, the process's exit (err nil; s.lastExit
// says how) or a failure (err): it counts the restart, says why, shows the
// log tail and waits out the delay. It returns false, with why recorded,
// when supervision ends instead. s.mu is only ever held here (and
// everywhere on the service's goroutines without a deferred unlock) around
// plain assignments, so a panic cannot leave it locked.
func (s *Service) backoff(ctx context.Context, err error) bool {
	now := s.now()
	s.mu.Lock()
	stopping, frozen := s.stopping, s.sup.isFrozen()
	exit, readyAt, failures, lastOutput := s.lastExit, s.readyAt, s.failures, s.lastOutput
	s.mu.Unlock()
	if stopping || frozen {
		if !stopping && exit != nil {
			s.log.Warn("service exited during shutdown; not restarted", exitAttrs(*exit)...)
		}
		s.finish(ctx)
		return false
	}
	var healthy time.Duration
	if !readyAt.IsZero() {
		healthy = now.Sub(readyAt)
	}
	failures = s.sup.opts.Backoff.Failures(failures, healthy)
	delay := s.sup.opts.Backoff.Delay(failures)
	s.mu.Lock()
	s.failures = failures
	s.restarts++
	s.state = StateBackoff
	reason, restarts := s.killReason, s.restarts
	s.mu.Unlock()
	s.notify()

	attrs := []any{"restarts", restarts, "next_in", delay.String()}
	switch {
	case err != nil:
		attrs = append(attrs, "err", err)
	case exit != nil:
		attrs = append(exitAttrs(*exit), attrs...)
	}
	if reason != "" {
		attrs = append(attrs, "reason", reason)
	}
	// The last line a program wrote before it died is most often why
	// ("containerd: toml: cannot decode ..."): it rides on the exit line
	// itself, since the console's repeat limit shows only the first lines
	// of a long tail, and a crash loop's later tails not at all.
	if exit != nil && lastOutput != "" {
		attrs = append(attrs, "last_output", lastOutput)
	}
	s.log.Warn("service exited", attrs...)
	for _, l := range s.ring.Tail(s.sup.opts.TailLines) {
		s.log.Warn("service log tail", "line", l)
	}

	select {
	case <-s.sup.opts.Clock.After(delay):
		return true
	case <-s.stopCh:
	case <-s.sup.frozen:
	case <-ctx.Done():
	}
	s.finish(ctx)
	return false
}

// stopLeftover stops the process that a panicked run left running, if any,
// as a service not ready in time is stopped (SIGTERM, SIGKILL after the
// stop timeout), and records its exit.
func (s *Service) stopLeftover(ctx context.Context) {
	s.mu.Lock()
	proc := s.proc
	s.mu.Unlock()
	if proc == nil {
		return
	}
	s.log.Error("stopping the service's process: its supervision panicked", "pid", proc.Pid())
	s.terminate(ctx, proc)
	var st reaper.ExitStatus
	select {
	case <-proc.Done():
		st, _ = proc.Wait(context.Background()) // already done: returns at once
	case <-ctx.Done():
		return // abandoned: left running, as supervise leaves it
	}
	now := s.now()
	s.mu.Lock()
	s.proc = nil
	s.lastExit = &st
	s.lastExitAt = now
	s.mu.Unlock()
	s.writeFile(fmt.Sprintf("--- berth: pid %d exited: %s", proc.Pid(), st))
}

func (s *Service) testHook(stage string) {
	if h := s.sup.opts.testHook; h != nil {
		h(s.spec.Name, stage)
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

	argv := s.spec.Argv
	if len(s.spec.Rlimits) > 0 {
		// Through berth, which sets them and execs the service in the
		// same process: see package rlimit for why not prlimit(2).
		argv = rlimit.Args(s.sup.opts.RlimitExec, s.spec.Rlimits, argv)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
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
	s.proc = proc // first: should anything below panic, the process is not lost (stopLeftover)
	s.runErrorLine = false
	s.runLines.Store(0)
	now := s.now()
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
	// The reader closes done at the end of the output, even after a
	// panic: then the lines stop (the status says why), but the pipe is
	// still drained, so the service neither blocks on a full pipe nor dies
	// of SIGPIPE for berth's bug.
	done := make(chan struct{})
	safe.Go(s.log, "output of "+s.spec.Name, func() {
		readLines(pr, s.line)
		pr.Close()
		close(done)
	}, func(p *safe.Panic) {
		s.mu.Lock()
		s.lastError = "reading the output: " + p.Error() + "; the rest of this run's output is discarded"
		s.mu.Unlock()
		s.log.Error("service output reader panicked; the rest of this run's output is discarded", "pid", proc.Pid(), "err", p)
		_, _ = io.Copy(io.Discard, pr)
		pr.Close()
		close(done)
	})
	return proc, done, nil
}

// supervise waits for one run to end, probing for readiness meanwhile. It
// returns false if supervision was abandoned (ctx ended) with the process
// still running.
func (s *Service) supervise(ctx context.Context, proc *reaper.Process, output chan struct{}) bool {
	pctx, cancel := context.WithCancel(ctx)
	probed := make(chan struct{}) // closed when the probe is over, panic or not
	// On every way out, a panic included: a probe outliving its run would
	// kill, or mark ready, the next one.
	defer func() {
		cancel()
		<-probed
	}()
	safe.Go(s.log, "probe "+s.spec.Name, func() {
		s.probe(pctx, proc)
		close(probed)
	}, func(p *safe.Panic) {
		s.probePanicked(pctx, proc, p)
		close(probed)
	})
	s.testHook("supervise")
	var st reaper.ExitStatus
	select {
	case <-proc.Done():
		st, _ = proc.Wait(context.Background()) // already done: returns at once
	case <-ctx.Done():
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
	now := s.now()
	// A program that dies of a bad config often says why in one plain
	// last line on stderr, with no level ("containerd: failed to get
	// listener for debug endpoint ..."): when the run failed, that last
	// line is the cause, unless it is a levelled line below error and
	// the run logged an error before it. An earlier error-level line
	// alone is not enough: containerd logs one about its CNI config at
	// every start, and the join watcher quoted that instead of the line
	// containerd died of.
	last := ""
	if t := s.ring.Tail(1); len(t) == 1 && s.runLines.Load() > 0 {
		last = t[0]
	}
	s.mu.Lock()
	s.proc = nil
	s.lastExit = &st
	s.lastExitAt = now
	s.lastOutput = last
	if last != "" && !st.Success() {
		if lvl, levelled := lineLevel(last); !s.runErrorLine || !levelled || lvl >= slog.LevelError {
			s.lastErrorLine = last
		}
	}
	// What this run died of, in its own words: none for a clean exit, nor
	// for a silent run (lastErrorLine would be an earlier run's).
	s.exitErrorLine = ""
	if !st.Success() && (last != "" || s.runErrorLine) {
		s.exitErrorLine = s.lastErrorLine
	}
	s.mu.Unlock()
	s.writeFile(fmt.Sprintf("--- berth: pid %d exited: %s", proc.Pid(), st))
	return true
}

// probePanicked makes a panic in the readiness check the failure of this
// run's probe: as for a service not ready in time, the process is stopped,
// the status says why, and it is restarted on the backoff schedule. It
// runs on the probe's goroutine after the recovery, and does only what
// cannot panic.
func (s *Service) probePanicked(ctx context.Context, proc *reaper.Process, p *safe.Panic) {
	if ctx.Err() != nil {
		return // the run ended first
	}
	reason := "readiness probe: " + p.Error()
	s.mu.Lock()
	s.killReason, s.lastError = reason, reason
	s.mu.Unlock()
	s.log.Error("service readiness probe panicked; killing it to restart", "pid", proc.Pid(), "err", p)
	s.terminate(ctx, proc)
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
	now := s.now()
	s.mu.Lock()
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
		// A panic in the hook is the hook's failure, like its errors.
		err := safe.Call(s.log, "after-ready hook of "+s.spec.Name, func() error { return hook(hctx) })
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
	s.testHook("line")
	s.ring.Add(l)
	s.runLines.Add(1)
	s.writeFile(l)
	lvl := Classify(l)
	if lvl >= slog.LevelError {
		s.mu.Lock()
		s.lastErrorLine = l
		s.runErrorLine = true
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
