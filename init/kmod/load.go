package kmod

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/berth-node/berth/internal/safe"
	"golang.org/x/sys/unix"
)

// loader loads one module file. EEXIST (already loaded) must be returned
// as is; the caller treats it as success.
type loader func(path string) error

// finitModule is the real loader. Our image ships uncompressed .ko files,
// so finit_module(2) on the file is all it takes.
func finitModule(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.FinitModule(int(f.Fd()), "", 0)
}

// procModules returns the names of the modules loaded now, from
// /proc/modules, so that they are not read and offered to the kernel again.
// An unreadable /proc/modules is not fatal: EEXIST catches those anyway.
func procModules() map[string]bool {
	out := map[string]bool{}
	f, err := os.Open("/proc/modules")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if name, _, ok := strings.Cut(sc.Text(), " "); ok {
			out[name] = true
		}
	}
	return out
}

// defaultWorkers bounds how many finit_module calls run at once. Much of a
// module's load is the kernel relocating and initialising it on one CPU,
// and some inits wait for their device's probe, so a few more than the
// usual 1-2 vCPUs keeps them busy without flooding the scheduler.
const defaultWorkers = 4

// session is the state of one Load or Coldplug call: which modules are in
// the kernel (loaded before or by us) and which failed. Only the goroutine
// that calls its methods touches it; loader calls run on workers.
type session struct {
	ix      *Index
	log     *slog.Logger
	load    loader
	workers int
	present map[string]bool
	failed  map[string]error
	loaded  []string // by this session, in plan order
	errs    []error
}

func newSession(ix *Index, log *slog.Logger, load loader, present map[string]bool) *session {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &session{ix: ix, log: log, load: load, workers: defaultWorkers, present: present, failed: map[string]error{}}
}

type loadResult struct {
	name string
	err  error
	took time.Duration
}

// loadAll loads the plan's modules, up to s.workers at once; a module
// starts only when everything it must come after has finished, so the
// kernel always finds its symbols. A failure is recorded and logged, and
// the modules that depend on the failed one are skipped (they would fail on
// unknown symbols), but the others still load. The modules loaded are
// appended to s.loaded in plan order, not completion order, so the boot
// report does not change from boot to boot.
func (s *session) loadAll(ctx context.Context, p loadPlan) {
	var todo []string
	for _, n := range p.order {
		if !s.present[n] && s.failed[n] == nil {
			todo = append(todo, n)
		}
	}
	if len(todo) == 0 {
		return
	}
	var (
		started  = map[string]bool{}
		finished = map[string]bool{}
		loaded   = map[string]bool{}
		running  = map[string]time.Time{}
		results  = make(chan loadResult, len(todo)) // buffered: a worker never blocks, even after we stop waiting
	)
	done := func(n string) bool { return finished[n] || s.present[n] || s.failed[n] != nil }
	for {
		for _, n := range todo {
			if len(running) >= s.workers {
				break
			}
			if started[n] || !allDone(p.after[n], done) {
				continue
			}
			started[n] = true
			if err := ctx.Err(); err != nil {
				s.fail(n, fmt.Errorf("loading module %s: %w", n, err), p.softOnly[n])
				finished[n] = true
				continue
			}
			if d := s.failedDep(n); d != "" {
				s.fail(n, fmt.Errorf("loading module %s: skipped, its dependency %s failed", n, d), p.softOnly[n])
				finished[n] = true
				continue
			}
			running[n] = time.Now()
			s.startLoad(n, s.ix.Path(n), results)
		}
		if len(running) == 0 {
			break
		}
		var r loadResult
		select {
		case r = <-results:
		case <-ctx.Done():
			// finit_module cannot be interrupted; stop waiting for it and
			// say which modules were still loading at the deadline.
			for n := range running {
				s.fail(n, fmt.Errorf("loading module %s: still loading after %s: %w", n, time.Since(running[n]).Round(time.Millisecond), ctx.Err()), p.softOnly[n])
			}
			for _, n := range todo {
				if !started[n] {
					s.fail(n, fmt.Errorf("loading module %s: %w", n, ctx.Err()), p.softOnly[n])
				}
			}
			s.appendLoaded(todo, loaded)
			return
		}
		delete(running, r.name)
		finished[r.name] = true
		path := s.ix.Path(r.name)
		switch {
		case r.err == nil:
			s.present[r.name] = true
			loaded[r.name] = true
			s.log.Debug("module loaded", "module", r.name, "ms", r.took.Milliseconds())
		case errors.Is(r.err, unix.EEXIST):
			s.present[r.name] = true
		default:
			s.fail(r.name, fmt.Errorf("loading module %s from %s: %w", r.name, path, r.err), p.softOnly[r.name])
		}
	}
	for _, n := range todo {
		if !started[n] {
			// Unreachable with a plan from Index.plan, which orders every
			// module after what it waits for; kept so a bug cannot hang boot.
			s.fail(n, fmt.Errorf("loading module %s: never became ready (dependency cycle?)", n), p.softOnly[n])
		}
	}
	s.appendLoaded(todo, loaded)
}

// startLoad loads one module on a worker goroutine, which sends exactly one
// result: the load's, or, if the loader panics, the panic as that
// module's load error, so the loop never waits for a result that cannot
// come. results has room for every module of the pass.
func (s *session) startLoad(name, path string, results chan<- loadResult) {
	start := time.Now()
	sent := false // only touched on the worker's goroutine
	safe.Go(s.log, "load module "+name, func() {
		err := s.load(path)
		sent = true
		results <- loadResult{name: name, err: err, took: time.Since(start)}
	}, func(p *safe.Panic) {
		if !sent {
			results <- loadResult{name: name, err: p, took: time.Since(start)}
		}
	})
}

func allDone(names []string, done func(string) bool) bool {
	for _, n := range names {
		if !done(n) {
			return false
		}
	}
	return true
}

// failedDep names a hard dependency of the module that failed, or "".
func (s *session) failedDep(name string) string {
	for _, d := range s.ix.Deps(name) {
		if s.failed[d] != nil {
			return d
		}
	}
	return ""
}

func (s *session) appendLoaded(order []string, loaded map[string]bool) {
	for _, n := range order {
		if loaded[n] {
			s.loaded = append(s.loaded, n)
		}
	}
}

// fail records a module that did not load. A module wanted only as a soft
// dependency is no error: modprobe would not fail for it either.
func (s *session) fail(name string, err error, softOnly bool) {
	s.failed[name] = err
	if softOnly {
		s.log.Info("optional soft dependency not loaded", "module", name, "err", err)
		return
	}
	s.errs = append(s.errs, err)
	s.log.Warn("module not loaded", "module", name, "err", err)
}

// Load loads the named modules (names or aliases, '-' or '_') and their
// dependencies, and returns the modules this call loaded, dependencies
// first. Modules already in the kernel or builtin are skipped silently. A
// module that fails does not stop the others: all failures come back
// joined.
func Load(ctx context.Context, log *slog.Logger, ix *Index, names ...string) ([]string, error) {
	return load(ctx, newSession(ix, log, finitModule, procModules()), names)
}

func load(ctx context.Context, s *session, names []string) ([]string, error) {
	p, err := s.ix.plan(names)
	if err != nil {
		s.errs = append(s.errs, err)
		s.log.Warn("modules not found", "err", err)
	}
	s.loadAll(ctx, p)
	return s.loaded, errors.Join(s.errs...)
}
