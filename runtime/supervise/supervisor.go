// Package supervise runs berth's long-lived services (containerd, kubelet)
// as PID 1: it starts them in dependency order once what they depend on is
// ready, places each in its own cgroup v2 group at exec time, restarts them
// with exponential backoff, captures their output to the console, a ring
// buffer and rotated files, and stops them in reverse order at shutdown.
//
// What is decided (backoff schedule, start and stop order, line levels,
// the version reply) is pure and lives in its own files; this file and
// service.go act. Children are started and reaped through runtime/reaper,
// since berth, as PID 1, reaps every process.
package supervise

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/berth-node/berth/runtime/reaper"
	"github.com/berth-node/berth/runtime/supervise/cgroup"
	"github.com/berth-node/berth/runtime/supervise/logring"
	"github.com/berth-node/berth/runtime/supervise/rotate"
)

// DefaultLogDir is where service logs are written on a node.
const DefaultLogDir = "/var/log/berth"

// Clock is the supervisor's time source; tests may fake it.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Options configure a Supervisor. Zero fields take the defaults noted.
type Options struct {
	// Reaper starts and reaps the children; required.
	Reaper *reaper.Reaper
	// Log is the console.
	Log *slog.Logger
	// LogDir holds <service>.log files; empty writes none (berth passes
	// DefaultLogDir).
	LogDir string
	// LogMaxBytes is the size at which a log file rotates (4 MiB), and
	// LogKeep how many rotated files are kept (0: 3; negative: none, the
	// file is truncated instead).
	LogMaxBytes int64
	LogKeep     int
	// CgroupRoot is the cgroup2 mount; empty starts services in berth's
	// own group (berth passes cgroup.DefaultRoot).
	CgroupRoot string
	// Verbose sends every service line of Info and above to the console.
	// Otherwise only lines that look like errors go there (so kubelet's
	// chatter and warnings do not drown the boot lines); ConsoleLevel
	// overrides per service. Every line still reaches the ring and file.
	Verbose      bool
	ConsoleLevel map[string]slog.Level
	// Backoff is the restart schedule (DefaultBackoff).
	Backoff Backoff
	// ReadyTimeout bounds each start's wait for readiness (2 min); a
	// service not ready by then is killed and restarted, loudly.
	ReadyTimeout time.Duration
	// ProbeInterval is the time between readiness checks (200 ms), and
	// ProbeTimeout bounds one check (2 s).
	ProbeInterval time.Duration
	ProbeTimeout  time.Duration
	// AfterReady runs, by service name, once the service is first ready and
	// before its dependents start (PID 1 waits for the FORWARD policy after
	// containerd's; the image imports wait for kubelet's health, not here). It is
	// retried on the next readiness if the service died during it; any
	// other failure is logged and dependents start anyway.
	AfterReady  map[string]func(ctx context.Context) error
	HookTimeout time.Duration // bounds one AfterReady call (5 min)
	// OnLine, by service name, sees every line of the service's output, on
	// the service's reader goroutine (berth watches kubelet's for the node's
	// registration and the reason it fails). It must not block.
	OnLine map[string]func(line string)
	// OnChange is called after every state change of any service (berth
	// rewrites /run/berth/boot.json so restarts show there). It is called
	// without locks held and must not block.
	OnChange func(service string, state State)
	// RlimitExec is the program that sets a service's Rlimits and execs
	// it (berth itself, kubelet.BerthPath; see package rlimit). Required
	// when a service has Rlimits.
	RlimitExec string
	// Probers replace the plan's probe for a service (tests).
	Probers map[string]Prober
	// TailLines are shown on the console at each exit (20); the ring keeps
	// RingLines lines (1000) and at most RingBytes bytes (256 KiB).
	TailLines int
	RingLines int
	RingBytes int
	// DefaultStopTimeout applies to a service whose spec has none (10 s).
	DefaultStopTimeout time.Duration
	Clock              Clock

	// testHook, when set (tests only), is called on the service's
	// goroutines at the named stages ("start": before each start, on the
	// service's goroutine; "supervise": with the process running, on the
	// same; "line": before each output line, on the reader), so a test can
	// make them panic.
	testHook func(service, stage string)
}

func (o *Options) setDefaults() {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.LogMaxBytes <= 0 {
		o.LogMaxBytes = 4 << 20
	}
	if o.LogKeep == 0 {
		o.LogKeep = 3
	}
	if o.Backoff == (Backoff{}) {
		o.Backoff = DefaultBackoff()
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 2 * time.Minute
	}
	if o.ProbeInterval <= 0 {
		o.ProbeInterval = 200 * time.Millisecond
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = 2 * time.Second
	}
	if o.HookTimeout <= 0 {
		o.HookTimeout = 5 * time.Minute
	}
	if o.TailLines <= 0 {
		o.TailLines = 20
	}
	if o.RingLines <= 0 {
		o.RingLines = 1000
	}
	if o.RingBytes <= 0 {
		o.RingBytes = 256 << 10
	}
	if o.DefaultStopTimeout <= 0 {
		o.DefaultStopTimeout = 10 * time.Second
	}
	if o.Clock == nil {
		o.Clock = realClock{}
	}
}

// Supervisor owns the node's services.
type Supervisor struct {
	opts     Options
	services []*Service // start order
	byName   map[string]*Service

	startOnce  sync.Once
	freezeOnce sync.Once
	frozen     chan struct{} // closed at the first Stop: nothing restarts after
}

// New checks the specs and orders them; nothing starts until Start.
func New(specs []Spec, opts Options) (*Supervisor, error) {
	if opts.Reaper == nil {
		return nil, errors.New("supervisor: no reaper")
	}
	opts.setDefaults()
	nodes := make([]Node, len(specs))
	for i, s := range specs {
		nodes[i] = Node{Name: s.Name, DependsOn: s.DependsOn}
	}
	order, err := StartOrder(nodes)
	if err != nil {
		return nil, fmt.Errorf("ordering services: %w", err)
	}
	sup := &Supervisor{opts: opts, byName: make(map[string]*Service), frozen: make(chan struct{})}
	specByName := make(map[string]Spec, len(specs))
	for _, s := range specs {
		specByName[s.Name] = s
	}
	for _, name := range order {
		svc, err := sup.newService(specByName[name])
		if err != nil {
			return nil, fmt.Errorf("service %s: %w", name, err)
		}
		sup.services = append(sup.services, svc)
		sup.byName[name] = svc
	}
	return sup, nil
}

func (sup *Supervisor) newService(spec Spec) (*Service, error) {
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return nil, errors.New("argv: empty")
	}
	if !filepath.IsAbs(spec.Argv[0]) {
		// PID 1 has no PATH worth trusting; the plan names binaries fully.
		return nil, fmt.Errorf("argv[0] %q: not an absolute path", spec.Argv[0])
	}
	if len(spec.Rlimits) > 0 && sup.opts.RlimitExec == "" {
		return nil, errors.New("rlimits: no Options.RlimitExec to set them with")
	}
	for _, l := range spec.Rlimits {
		if err := l.Check(); err != nil {
			return nil, err
		}
	}
	prober, ok := sup.opts.Probers[spec.Name]
	if !ok {
		var err error
		if prober, err = NewProber(spec.Ready); err != nil {
			return nil, fmt.Errorf("ready: %w", err)
		}
	}
	svc := &Service{
		spec:    spec,
		sup:     sup,
		prober:  prober,
		ring:    logring.New(sup.opts.RingLines, sup.opts.RingBytes),
		log:     sup.opts.Log.With("service", spec.Name),
		readyCh: make(chan struct{}),
		stopCh:  make(chan struct{}),
		runDone: make(chan struct{}),
		state:   StateWaiting,
	}
	if svc.spec.StopTimeout <= 0 {
		svc.spec.StopTimeout = sup.opts.DefaultStopTimeout
	}
	svc.consoleLevel = slog.LevelError
	if sup.opts.Verbose {
		svc.consoleLevel = slog.LevelInfo
	}
	if l, ok := sup.opts.ConsoleLevel[spec.Name]; ok {
		svc.consoleLevel = l
	}
	if spec.Cgroup != "" && sup.opts.CgroupRoot != "" {
		p, err := cgroup.Plan(sup.opts.CgroupRoot, spec.Cgroup)
		if err != nil {
			return nil, err
		}
		svc.placement = &p
	}
	if sup.opts.LogDir != "" {
		svc.file = rotate.New(filepath.Join(sup.opts.LogDir, spec.Name+".log"), sup.opts.LogMaxBytes, sup.opts.LogKeep)
	}
	for _, d := range spec.DependsOn {
		svc.deps = append(svc.deps, sup.byName[d]) // ordered: deps exist already
	}
	return svc, nil
}

// Start launches every service; each waits for its dependencies to be
// ready, so Start returns at once. Cancelling ctx abandons supervision
// (no more restarts) without killing anything; Stop is what stops. A
// panic in a service's supervision is that service's failure (see
// Service.launch), never PID 1's exit.
func (sup *Supervisor) Start(ctx context.Context) {
	sup.startOnce.Do(func() {
		for _, s := range sup.services {
			s.mu.Lock()
			s.launched = true
			s.mu.Unlock()
			s.launch(ctx, nil)
		}
	})
}

// Services returns the services in start order. Each is a
// shutdown.Stopper; shutdown.Sequence stops them from the last.
func (sup *Supervisor) Services() []*Service { return append([]*Service(nil), sup.services...) }

// Service returns the named service, or nil.
func (sup *Supervisor) Service(name string) *Service { return sup.byName[name] }

// WaitReady waits until the named service is first ready (and its
// AfterReady hook has run), or ctx ends.
func (sup *Supervisor) WaitReady(ctx context.Context, name string) error {
	s := sup.byName[name]
	if s == nil {
		return fmt.Errorf("waiting for service %q: no such service", name)
	}
	select {
	case <-s.readyCh:
		return nil
	case <-ctx.Done():
		st := s.Status()
		return fmt.Errorf("waiting for service %s to be ready (state %s, restarts %d, last error %q): %w",
			name, st.State, st.Restarts, st.LastError, ctx.Err())
	}
}

// Stop stops every service, dependents first, each bounded by its stop
// timeout and by ctx. Restarts end at once, for all services.
func (sup *Supervisor) Stop(ctx context.Context) error {
	sup.freeze()
	var errs []error
	for i := len(sup.services) - 1; i >= 0; i-- {
		if err := sup.services[i].Stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Status returns every service's status, in start order.
func (sup *Supervisor) Status() []Status {
	out := make([]Status, len(sup.services))
	for i, s := range sup.services {
		out[i] = s.Status()
	}
	return out
}

// LogBytes is the service output held in memory: every service's last
// lines, each ring bounded by RingLines and RingBytes.
func (sup *Supervisor) LogBytes() int64 {
	var n int64
	for _, s := range sup.services {
		n += int64(s.ring.Bytes())
	}
	return n
}

func (sup *Supervisor) freeze() { sup.freezeOnce.Do(func() { close(sup.frozen) }) }

func (sup *Supervisor) isFrozen() bool {
	select {
	case <-sup.frozen:
		return true
	default:
		return false
	}
}
