package main

import (
	"context"
	"errors"
	"github.com/berth-node/berth/update/agent"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-node/berth/config/accepts"
	"github.com/berth-node/berth/config/cmdline"
	"github.com/berth-node/berth/config/imds"
	"github.com/berth-node/berth/config/manifest"
	"github.com/berth-node/berth/config/nocloud"
	"github.com/berth-node/berth/config/nodeconfig"
	"github.com/berth-node/berth/config/sources"
	"github.com/berth-node/berth/init/analyze"
	"github.com/berth-node/berth/init/bootlog"
	"github.com/berth-node/berth/init/kmod"
	"github.com/berth-node/berth/init/plan"
	"github.com/berth-node/berth/init/power"
	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/init/shutdown"
	"github.com/berth-node/berth/internal/safe"
	"github.com/berth-node/berth/internal/version"
	"github.com/berth-node/berth/mounts/localstorage"
	"github.com/berth-node/berth/network"
	"github.com/berth-node/berth/network/timesync"
	"github.com/berth-node/berth/runtime/reaper"
)

// Paths PID 1 uses.
const (
	procCmdline  = "/proc/cmdline"
	bootIDPath   = "/proc/sys/kernel/random/boot_id"
	devkmsgKnob  = "/proc/sys/kernel/printk_devkmsg"
	printkLevels = "/proc/sys/kernel/printk"
	printkIgnore = "/sys/module/printk/parameters/ignore_loglevel"
	newRoot      = "/newroot"
	modulesRoot  = "/lib/modules"
	selfStatus   = "/proc/self/status"
	powerBacklog = 4
)

// boot is PID 1's state, passed to every phase. Phases run one after the
// other on the main goroutine, so fields need no lock; goroutines started
// along the way get what they need as arguments.
type boot struct {
	log   *slog.Logger
	out   *bootlog.Output
	level *slog.LevelVar
	clock report.Clock
	rep   *report.Report
	cfg   cmdline.Config
	// cl is the parsed kernel command line, for phases with keys of their
	// own (network, config).
	cl *cmdline.Cmdline
	// node is what the node phases (network, config, plan, storage,
	// apply) decided and did.
	node   nodeState
	sigs   *power.Signals
	power  chan power.Request
	reaper *reaper.Reaper
	// console is /dev/console, where hooks write and the report goes.
	console *os.File
	// services are stopped in reverse order at shutdown; each phase adds
	// its own (storage, services, logind) with addStopper, under downMu,
	// since the power server may read it at any time.
	services []shutdown.Stopper
	// sys is what shutdown acts on: shutdown.Linux{} on a node.
	sys      shutdown.System
	timeouts shutdown.Timeouts
	// reportPath is where boot.json goes: report.DefaultPath on a node.
	reportPath string
	// shellCtx ends when a shutdown begins (endShell): the debug shell
	// is not started again after that, and the shutdown's hangup ends the
	// one running. Nil where main did not make them (tests).
	shellCtx context.Context
	endShell context.CancelFunc
	// downMu makes shutdowns one at a time.
	downMu sync.Mutex
	// repMu guards rep against the supervisor's updates once services run,
	// and reported says the report is out (later updates rewrite boot.json).
	repMu    sync.Mutex
	reported bool
	// serviceLogBytes, once services run, gives the service output held
	// in memory, for the report's live figures. Guarded by repMu.
	serviceLogBytes func() int64
}

// nodeState is what the node phases found and decided, in phase order.
type nodeState struct {
	manifest *manifest.Manifest
	// kmod is the module index in use, kmodNext the root's while it loads
	// (boot.moduleIndex).
	kmod     *kmod.Index
	kmodNext chan *kmod.Index
	// acceptsNext brings the manifest's accepts, decoded beside the
	// phases before config (boot.accepts); nil when it has none.
	acceptsNext chan *accepts.Accepts
	// source is where user data comes from (the source phase); seed is
	// the NoCloud seed when that is the source.
	source   *sources.Decision
	seed     *nocloud.Inspection
	net      *network.Result
	netH     *network.Handle
	instance *imds.Metadata
	config   *nodeconfig.Result
	plan     *plan.Plan
	storage  *localstorage.Result
	// time is the running NTP client; timeStop stops it (startTime).
	time     *timesync.Client
	timeStop context.CancelFunc
	// blockedModules are the modules user data blocks, once the apply
	// phase has read them: the hotplug loop asks (moduleBlocked) from its
	// own goroutine.
	blockedModules atomic.Pointer[map[string]bool]
}

// moduleBlocked says whether user data blocks module name (a
// kmod.Name); false until the apply phase has run.
func (n *nodeState) moduleBlocked(name string) bool {
	m := n.blockedModules.Load()
	return m != nil && (*m)[name]
}

// releaseInputs drops what the node phases decided from once the services
// run: the merged NodeConfig and its sources' record, the instance
// metadata, the network result and the plan with every rendered file. The
// files are on disk, the supervisor and the shutdown stoppers hold their
// own copies of what they need, and the report holds its sections; kept,
// these would stay reachable for the node's life, and the GC's heap goal
// with them (issue 17). The manifest stays (the image imports may still
// be reading it), as do the module index (hotplug), the DHCP handle
// (renewals) and the NTP client.
func (n *nodeState) releaseInputs() {
	n.config, n.instance, n.net, n.plan, n.acceptsNext, n.seed = nil, nil, nil, nil, nil, nil
}

// phase is one step of the boot pipeline. A fatal phase's error ends boot
// and hands over to berth.onfail; other errors go into the report and boot
// goes on.
type phase struct {
	name  string
	fatal bool
	run   func(ctx context.Context, b *boot, log *slog.Logger) error
}

// pipeline is the boot, in order: the table of contents of this package.
// Each entry's function lives in phase_<name>.go.
func pipeline() []phase {
	return []phase{
		{name: "early", fatal: true, run: phaseEarly},
		{name: "modules", fatal: false, run: phaseModules},
		{name: "root", fatal: true, run: phaseRoot},
		{name: "source", fatal: true, run: phaseSource},
		{name: "network", fatal: false, run: phaseNetwork},
		{name: "time", fatal: false, run: phaseTime},
		{name: "config", fatal: true, run: phaseConfig},
		{name: "plan", fatal: true, run: phasePlan},
		{name: "storage", fatal: true, run: phaseStorage},
		{name: "host", fatal: false, run: phaseHost},
		{name: "apply", fatal: true, run: phaseApply},
		{name: "services", fatal: false, run: phaseServices},
	}
}

// pid1 is the PID 1 path. It never returns.
func pid1() {
	// First, before anything can go wrong: without a subscription Go's
	// reaction to SIGTERM is to exit, and PID 1 exiting panics the kernel.
	sigs := power.NotifySignals()
	start := bootlog.SinceBoot()
	// The kernel's random pool seeds slowly on VMs without RDRAND or
	// virtio-rng; DHCP transaction IDs and TLS need it. Start it now so it
	// overlaps the modules and root phases.
	network.StartEntropy()

	out := bootlog.NewOutput()
	level := new(slog.LevelVar)
	log := slog.New(bootlog.New(out, bootlog.Options{Level: level}))
	b := &boot{
		log:   log,
		out:   out,
		level: level,
		clock: bootlog.SinceBoot,
		rep: &report.Report{
			SchemaVersion:  report.SchemaVersion,
			Version:        version.Version,
			KernelToInitMs: start.Milliseconds(),
			Phases:         []report.Phase{},
			Modules:        []string{},
		},
		cfg:        cmdline.Config{OnFail: cmdline.OnFail{Action: cmdline.Reboot, Delay: cmdline.DefaultRebootDelay}, Root: cmdline.DefaultRoot},
		cl:         &cmdline.Cmdline{},
		sigs:       sigs,
		power:      make(chan power.Request, powerBacklog),
		sys:        shutdown.Linux{},
		timeouts:   shutdown.DefaultTimeouts(),
		reportPath: report.DefaultPath,
	}
	ctx := context.Background()
	b.shellCtx, b.endShell = context.WithCancel(ctx)
	defer func() {
		// Last line of defence: whatever happens above, PID 1 stays. The
		// sleep (not select{}) keeps a timer pending, so the runtime can
		// never declare a deadlock and exit.
		if r := recover(); r != nil {
			safe.Log(log, "main", r)
		}
		for {
			time.Sleep(time.Hour)
		}
	}()
	// Power requests are served from the start, not after boot: an EC2
	// stop during a slow or stuck phase must still shut down in order.
	b.startPowerServer(ctx)
	log.Info("berth starting", "phase", "early", "version", version.Version)
	err := b.run(ctx, pipeline())
	b.finish(ctx, err)
}

// run runs the phases in order and returns the first fatal error, as
// "phase: error".
func (b *boot) run(ctx context.Context, phases []phase) error {
	for _, p := range phases {
		plog := b.log.With("phase", p.name)
		t := b.rep.Start(plog, b.clock, p.name)
		err := safe.Call(plog, p.name, func() error { return p.run(ctx, b, plog) })
		t.End(err)
		if err != nil && p.fatal {
			return &fatalError{phase: p.name, err: err}
		}
	}
	return nil
}

// fatalError is a fatal phase's error; it reads "phase: error".
type fatalError struct {
	phase string
	err   error
}

func (e *fatalError) Error() string { return e.phase + ": " + e.err.Error() }

func (e *fatalError) Unwrap() error { return e.err }

// finish prints and stores the report and starts the debugging hooks, or
// follows berth.onfail after a fatal error.
func (b *boot) finish(ctx context.Context, fatal error) {
	log := b.log.With("phase", "report")
	if fatal != nil {
		// On the failed phase's own line prefix, so a grep for the phase
		// finds the FATAL line too.
		flog := log
		var fe *fatalError
		if errors.As(fatal, &fe) {
			flog = b.log.With("phase", fe.phase)
		}
		flog.Error("FATAL: " + fatal.Error())
		b.rep.OK = false
		b.rep.Error = fatal.Error()
	} else {
		b.rep.OK = true
	}
	if id, err := os.ReadFile(bootIDPath); err == nil {
		b.rep.BootID = strings.TrimSpace(string(id))
	}
	// A boot that failed before the services phase has not started the
	// update agent; on trial, it is rolled back below.
	var upd *agent.Options
	if fatal != nil {
		upd = b.updateOptions(b.log.With("phase", "update"))
	}
	b.node.releaseInputs()
	// Boot's garbage (user data, rendered files, image import buffers,
	// JSON) is dead by now; hand its pages back to the kernel at once
	// rather than when the scavenger gets to them, so the node starts with
	// PID 1 at its working set and the report's RSS says what that is.
	debug.FreeOSMemory()
	if rss, err := report.ReadRSSKiB(selfStatus); err != nil {
		log.Warn("reading RSS for the boot report", "err", err)
	} else {
		b.rep.RSSKiB = rss
	}
	if cpu, err := report.ReadCPU(); err != nil {
		log.Warn("reading CPU time for the boot report", "err", err)
	} else {
		b.rep.CPU = &cpu
	}
	b.repMu.Lock()
	b.rep.EndMs = b.clock().Milliseconds()
	b.rep.EndWall = time.Now()
	// The split reads every section; a bug there must cost the split, not
	// the report.
	var split report.Split
	if err := safe.Call(log, "split", func() (err error) { split, err = analyze.SplitOf(b.rep); return err }); err != nil {
		log.Warn("splitting boot time into berth's work and waits", "err", err)
	} else {
		b.rep.Split = &split
	}
	line, err := b.rep.Line()
	if err != nil {
		log.Error("encoding boot report", "err", err)
	} else {
		b.out.WriteLine(line)
		if err := b.writeReport(); err != nil {
			log.Warn("writing boot report", "err", err)
		}
	}
	b.reported = true
	b.repMu.Unlock()
	finished := []any{"ok", b.rep.OK, "berth_ms", b.rep.EndMs - b.rep.KernelToInitMs, "rss_kib", b.rep.RSSKiB}
	if sp := b.rep.Split; sp != nil {
		finished = append(finished, "own_ms", sp.BerthMs, "waits_ms", sp.WaitMs)
	}
	if c := b.rep.CPU; c != nil {
		finished = append(finished, "cpu_ms", c.UserMs+c.SysMs, "children_cpu_ms", c.ChildrenUserMs+c.ChildrenSysMs)
	}
	log.Info("boot finished", finished...)

	b.goSafe(log, "live", func() { b.refreshLive(ctx, liveRefresh) })
	b.goSafe(log, "trim", func() { trimMemory(ctx, trimInterval) })
	if b.cfg.DebugShell != "" && b.reaper != nil {
		dlog := b.log.With("phase", "debugshell")
		sctx := ctx
		if b.shellCtx != nil {
			sctx = b.shellCtx
		}
		b.goSafe(dlog, "debugshell", func() { debugShell(sctx, dlog, b.reaper, b.cfg.DebugShell) })
	}
	if fatal != nil {
		// A version on trial that cannot boot is rolled back now,
		// whatever berth.onfail says: the previous one can.
		if upd != nil && agent.FailTrial(ctx, *upd, fatal.Error()) {
			b.onFail(ctx, cmdline.OnFail{Action: cmdline.Reboot, Delay: trialFailDelay})
			return
		}
		b.onFail(ctx, b.cfg.OnFail)
		return
	}
	if len(b.cfg.Exec) > 0 && b.reaper != nil {
		hlog := b.log.With("phase", "hooks")
		b.goSafe(hlog, "hooks", func() { runHooks(ctx, hlog, b.reaper, b.console, b.cfg.Exec) })
	}
}
