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

// session is the state of one Load or Coldplug call: which modules are in
// the kernel (loaded before or by us) and which failed.
type session struct {
	ix      *Index
	log     *slog.Logger
	load    loader
	present map[string]bool
	failed  map[string]error
	loaded  []string // by this session, in load order
	errs    []error
}

func newSession(ix *Index, log *slog.Logger, load loader, present map[string]bool) *session {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &session{ix: ix, log: log, load: load, present: present, failed: map[string]error{}}
}

// loadAll loads modules in the given order (dependencies first, as Resolve
// returns them). A failure is recorded and logged, and the modules that
// depend on the failed one are skipped (they would fail on unknown
// symbols), but the others still load.
func (s *session) loadAll(ctx context.Context, order []string) {
	for _, name := range order {
		if s.present[name] || s.failed[name] != nil {
			continue
		}
		if err := ctx.Err(); err != nil {
			s.fail(name, fmt.Errorf("loading module %s: %w", name, err))
			continue
		}
		var depErr error
		for _, d := range s.ix.Deps(name) {
			if s.failed[d] != nil {
				depErr = fmt.Errorf("loading module %s: skipped, its dependency %s failed", name, d)
				break
			}
		}
		if depErr != nil {
			s.fail(name, depErr)
			continue
		}
		path := s.ix.Path(name)
		start := time.Now()
		err := s.load(path)
		switch {
		case err == nil:
			s.present[name] = true
			s.loaded = append(s.loaded, name)
			s.log.Debug("module loaded", "module", name, "ms", time.Since(start).Milliseconds())
		case errors.Is(err, unix.EEXIST):
			s.present[name] = true
		default:
			s.fail(name, fmt.Errorf("loading module %s from %s: %w", name, path, err))
		}
	}
}

func (s *session) fail(name string, err error) {
	s.failed[name] = err
	s.errs = append(s.errs, err)
	s.log.Warn("module not loaded", "module", name, "err", err)
}

// Load loads the named modules (names or aliases, '-' or '_') and their
// dependencies, and returns the modules this call loaded, in load order.
// Modules already in the kernel or builtin are skipped silently. A module
// that fails does not stop the others: all failures come back joined.
func Load(ctx context.Context, log *slog.Logger, ix *Index, names ...string) ([]string, error) {
	return load(ctx, newSession(ix, log, finitModule, procModules()), names)
}

func load(ctx context.Context, s *session, names []string) ([]string, error) {
	order, err := s.ix.Resolve(names...)
	if err != nil {
		s.errs = append(s.errs, err)
		s.log.Warn("modules not found", "err", err)
	}
	s.loadAll(ctx, order)
	return s.loaded, errors.Join(s.errs...)
}
