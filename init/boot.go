package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/berth-node/berth/bootlog"
	"github.com/berth-node/berth/cmdline"
	"github.com/berth-node/berth/kmod"
	"github.com/berth-node/berth/manifest"
	"github.com/berth-node/berth/mounts"
	"github.com/berth-node/berth/mounts/verity"
	"github.com/berth-node/berth/network"
	"github.com/berth-node/berth/power"
	"github.com/berth-node/berth/report"
	"github.com/berth-node/berth/runtime/reaper"
	"github.com/berth-node/berth/shutdown"
	"github.com/berth-node/berth/version"
	"golang.org/x/sys/unix"
)

// Paths PID 1 uses.
const (
	procCmdline  = "/proc/cmdline"
	bootIDPath   = "/proc/sys/kernel/random/boot_id"
	devkmsgKnob  = "/proc/sys/kernel/printk_devkmsg"
	cgroupRoot   = "/sys/fs/cgroup"
	newRoot      = "/newroot"
	defaultPATH  = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
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
	// services are stopped in reverse order at shutdown; the supervise
	// phase (a later issue) adds to it with addService, under downMu,
	// since the power server may read it at any time.
	services []shutdown.Stopper
	// sys is what shutdown acts on: shutdown.Linux{} on a node.
	sys      shutdown.System
	timeouts shutdown.Timeouts
	// reportPath is where boot.json goes: report.DefaultPath on a node.
	reportPath string
	// downMu makes shutdowns one at a time.
	downMu sync.Mutex
	// repMu guards rep against the supervisor's updates once services run,
	// and reported says the report is out (later updates rewrite boot.json).
	repMu    sync.Mutex
	reported bool
}

// phase is one step of the boot pipeline. A fatal phase's error ends boot
// and hands over to berth.onfail; other errors go into the report and boot
// goes on.
type phase struct {
	name  string
	fatal bool
	run   func(ctx context.Context, b *boot, log *slog.Logger) error
}

// pipeline is the boot, in order. Later issues add network, inputs, plan,
// apply and supervise here.
func pipeline() []phase {
	return []phase{
		{name: "early", fatal: true, run: phaseEarly},
		{name: "modules", fatal: false, run: phaseModules},
		{name: "root", fatal: true, run: phaseRoot},
		{name: "network", fatal: false, run: phaseNetwork},
		{name: "config", fatal: true, run: phaseConfig},
		{name: "plan", fatal: true, run: phasePlan},
		{name: "storage", fatal: true, run: phaseStorage},
		{name: "apply", fatal: true, run: phaseApply},
		{name: "services", fatal: false, run: phaseSupervise},
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
	defer func() {
		// Last line of defence: whatever happens above, PID 1 stays. The
		// sleep (not select{}) keeps a timer pending, so the runtime can
		// never declare a deadlock and exit.
		if r := recover(); r != nil {
			logPanic(log, "main", r)
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
		err := callRecovered(plog, p.name, func() error { return p.run(ctx, b, plog) })
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
	if rss, err := report.ReadRSSKiB(selfStatus); err != nil {
		log.Warn("reading RSS for the boot report", "err", err)
	} else {
		b.rep.RSSKiB = rss
	}
	b.repMu.Lock()
	b.rep.EndMs = b.clock().Milliseconds()
	line, err := b.rep.Line()
	if err != nil {
		log.Error("encoding boot report", "err", err)
	} else {
		b.out.WriteLine(line)
		if err := b.rep.Write(b.reportPath); err != nil {
			log.Warn("writing boot report", "err", err)
		}
	}
	b.reported = true
	b.repMu.Unlock()
	log.Info("boot finished", "ok", b.rep.OK, "berth_ms", b.rep.EndMs-b.rep.KernelToInitMs, "rss_kib", b.rep.RSSKiB)

	if b.cfg.DebugShell != "" && b.reaper != nil {
		dlog := b.log.With("phase", "debugshell")
		safeGo(dlog, "debugshell", func() { debugShell(ctx, dlog, b.reaper, b.cfg.DebugShell) })
	}
	if fatal != nil {
		b.onFail(ctx, b.cfg.OnFail)
		return
	}
	if len(b.cfg.Exec) > 0 && b.reaper != nil {
		hlog := b.log.With("phase", "hooks")
		safeGo(hlog, "hooks", func() { runHooks(ctx, hlog, b.reaper, b.console, b.cfg.Exec) })
	}
}

// startPowerServer acts on power requests (signals, power button) for as
// long as PID 1 lives.
func (b *boot) startPowerServer(ctx context.Context) {
	safeLoop(b.log, "power-server", func() {
		for {
			select {
			case <-ctx.Done():
				return
			case req := <-b.power:
				b.shutdown(ctx, req.Mode)
			}
		}
	})
}

// addService registers a started service for the shutdown sequence.
func (b *boot) addService(s shutdown.Stopper) {
	b.downMu.Lock()
	defer b.downMu.Unlock()
	b.services = append(b.services, s)
}

// shutdown runs the shutdown sequence; one at a time, since a power
// request and berth.onfail may both ask. It returns only if the sequence
// failed to end the machine.
func (b *boot) shutdown(ctx context.Context, mode power.Mode) {
	b.downMu.Lock()
	defer b.downMu.Unlock()
	if err := callRecovered(b.log, "shutdown", func() error {
		return shutdown.Sequence(ctx, b.log, b.sys, b.services, mode, b.timeouts)
	}); err != nil {
		b.log.Error("shutdown did not end the machine; waiting for another request", "phase", "shutdown", "err", err)
	}
}

// onFailAction is the decision half of berth.onfail.
type onFailAction struct {
	stay  bool
	mode  power.Mode
	delay time.Duration
}

func decideOnFail(o cmdline.OnFail) onFailAction {
	switch o.Action {
	case cmdline.Stay:
		return onFailAction{stay: true}
	case cmdline.Halt:
		return onFailAction{mode: power.Halt}
	case cmdline.PowerOff:
		return onFailAction{mode: power.PowerOff}
	}
	return onFailAction{mode: power.Reboot, delay: o.Delay}
}

// onFail follows the berth.onfail policy after a fatal boot error. A power
// request during the reboot countdown is served meanwhile by the power
// server, and ends the machine first.
func (b *boot) onFail(ctx context.Context, o cmdline.OnFail) {
	log := b.log.With("phase", "onfail")
	a := decideOnFail(o)
	if a.stay {
		log.Error("boot failed; staying up as berth.onfail asks (power button and signals still work)", "policy", o.String())
		return // the power server goes on serving requests
	}
	log.Error("boot failed; following berth.onfail", "policy", o.String(), "action", a.mode.String(), "in_s", int(a.delay/time.Second))
	if a.delay > 0 {
		deadline := time.NewTimer(a.delay)
		defer deadline.Stop()
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		left := a.delay
	wait:
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				left -= 10 * time.Second
				if left > 0 {
					log.Error("boot failed; "+a.mode.String()+" soon", "in_s", int(left/time.Second))
				}
			case <-deadline.C:
				break wait
			}
		}
	}
	b.shutdown(ctx, a.mode)
}

// phaseEarly mounts the pseudo-filesystems, opens the console, reads the
// command line and starts the reaper and power handling.
func phaseEarly(ctx context.Context, b *boot, log *slog.Logger) error {
	var errs []error
	// The early mounts come before the console: /dev/console and /dev/kmsg
	// only exist once devtmpfs is on /dev. Lines logged until then wait in
	// the bootlog.Output.
	if err := mounts.Apply(ctx, log, mounts.EarlyTable()); err != nil {
		errs = append(errs, fmt.Errorf("early mounts: %w", err))
	}
	b.console = openConsole(log, b.out)
	os.Setenv("PATH", defaultPATH)

	if data, err := os.ReadFile(procCmdline); err != nil {
		log.Warn("reading kernel command line; using defaults", "file", procCmdline, "err", err)
	} else {
		b.cl = cmdline.Parse(string(data))
		cfg, warns := cmdline.Decode(b.cl)
		b.cfg = cfg
		b.level.Set(cfg.LogLevel)
		for _, w := range warns {
			log.Warn(w)
		}
		log.Debug("kernel command line", "cmdline", strings.TrimSpace(string(data)))
	}
	log.Info("boot policy", "onfail", b.cfg.OnFail.String(), "root", rootName(b.cfg.Root), "hooks", len(b.cfg.Exec))

	if err := mounts.EnableControllers(cgroupRoot); err != nil {
		errs = append(errs, fmt.Errorf("enabling cgroup controllers under %s: %w", cgroupRoot, err))
	}

	b.reaper = reaper.New(b.log.With("phase", "reaper"))
	safeLoop(log, "reaper", func() { b.reaper.Run(ctx) })

	plog := b.log.With("phase", "power")
	safeLoop(plog, "signals", func() { b.sigs.Run(ctx, plog, b.power) })
	if err := power.TrapCtrlAltDel(); err != nil {
		log.Warn("Ctrl-Alt-Del will reboot without an orderly shutdown", "err", err)
	}
	if btn, err := power.OpenACPIButton(); err != nil {
		log.Warn("ACPI power button not watched; use SIGTERM to shut down", "err", err)
	} else {
		safeLoop(plog, "acpi-button", func() { btn.Run(ctx, plog, b.power) })
	}
	return errors.Join(errs...)
}

func rootName(r string) string {
	if r == "" {
		return "none"
	}
	return r
}

// openConsole opens /dev/console for berth's lines and for fds 0-2 (so
// hooks, and Go's own crash output, land on it too) and /dev/kmsg, and
// points the log there. Failures are not fatal: berth runs on without a
// console rather than not at all.
func openConsole(log *slog.Logger, out *bootlog.Output) *os.File {
	console, err := os.OpenFile("/dev/console", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		console = nil
	} else {
		for fd := 0; fd <= 2; fd++ {
			if int(console.Fd()) != fd {
				_ = unix.Dup3(int(console.Fd()), fd, 0)
			}
		}
	}
	// Userspace writes to /dev/kmsg are rate limited (10 per 5 s) unless
	// this knob says on; berth's lines are few and all wanted.
	_ = os.WriteFile(devkmsgKnob, []byte("on\n"), 0o644)
	kmsg, kerr := os.OpenFile("/dev/kmsg", os.O_WRONLY, 0)
	switch {
	case console != nil && kerr == nil:
		out.Attach(console, kmsg)
	case console != nil:
		out.Attach(console, nil)
		log.Warn("opening /dev/kmsg; logging to the console only", "err", kerr)
	case kerr == nil:
		out.Attach(nil, kmsg)
		log.Warn("opening /dev/console; logging to /dev/kmsg only", "err", err)
	}
	return console
}

// phaseModules loads the image manifest's preload list and the modules of
// present devices by modalias. Nothing here is fatal: a node may still
// boot without a module, and the report says which failed.
func phaseModules(ctx context.Context, b *boot, log *slog.Logger) error {
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return fmt.Errorf("uname: %w", err)
	}
	dir := modulesRoot + "/" + unix.ByteSliceToString(uts.Release[:])
	ix, err := kmod.LoadIndex(dir)
	if err != nil {
		return fmt.Errorf("loading module index from %s: %w", dir, err)
	}
	b.node.kmod = ix
	var errs []error
	var preload []string
	if m, err := manifest.Load(manifest.DefaultPath); err != nil {
		errs = append(errs, fmt.Errorf("no preload list: %w", err))
	} else {
		preload = m.Preload
		b.node.manifest = m
	}
	// No settle wait on the boot path: devices that drivers add late are
	// the hotplug loop's, which runs for as long as PID 1 does.
	loaded, err := kmod.LoadAndColdplug(ctx, log, ix, "/sys", kmod.Options{Preload: preload, NoSettle: true})
	b.rep.Modules = append(b.rep.Modules, loaded...)
	if err != nil {
		errs = append(errs, fmt.Errorf("loading modules: %w", err))
	}
	hlog := b.log.With("phase", "hotplug")
	safeGo(hlog, "hotplug", func() {
		err := kmod.Hotplug(ctx, hlog, ix, "/sys", func(mods []string) {
			hlog.Info("modules loaded for a new device", "modules", mods)
		})
		if err != nil {
			hlog.Warn("no module loading for devices added after boot", "err", err)
		}
	})
	log.Info("modules loaded", "count", len(b.rep.Modules))
	return errors.Join(errs...)
}

// phaseRoot moves onto the read-only root image before any service starts:
// runc cannot pivot_root out of an initramfs.
//
// A disk boot (berth.verity= on the command line, put there by the image
// build) takes the root from the disk's verity-protected partition instead.
func phaseRoot(ctx context.Context, b *boot, log *slog.Logger) error {
	if v, ok := b.cl.Get(verity.ParamKey); ok {
		return switchToVerityRoot(ctx, b, log, v)
	}
	if b.cfg.Root == "" {
		log.Info("staying on the initramfs (berth.root=none)")
		return nil
	}
	res, err := mounts.SwitchRoot(ctx, log, mounts.SwitchRootOptions{
		Image:   b.cfg.Root,
		NewRoot: newRoot,
		Carry:   []string{modulesRoot, "/etc/berth"},
	})
	if err != nil {
		hint := "berth.root=none boots without one"
		if errors.Is(err, fs.ErrNotExist) {
			hint += "; a disk image's command line must carry " + verity.ParamKey + "="
		}
		return fmt.Errorf("switching to root image %s (%s): %w", b.cfg.Root, hint, err)
	}
	b.rep.Root = res
	return nil
}
