package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/berth-node/berth/config/cmdline"
	"github.com/berth-node/berth/init/bootlog"
	"github.com/berth-node/berth/init/plan"
	"github.com/berth-node/berth/init/power"
	"github.com/berth-node/berth/internal/safe"
	"github.com/berth-node/berth/mounts"
	"github.com/berth-node/berth/runtime/reaper"
	"golang.org/x/sys/unix"
)

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
	os.Setenv("PATH", plan.DefaultPath)

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

	if err := mounts.EnableControllers(mounts.CgroupRoot); err != nil {
		errs = append(errs, fmt.Errorf("enabling cgroup controllers under %s: %w", mounts.CgroupRoot, err))
	}

	b.reaper = reaper.New(b.log.With("phase", "reaper"))
	safe.Loop(log, "reaper", func() { b.reaper.Run(ctx) })

	plog := b.log.With("phase", "power")
	safe.Loop(plog, "signals", func() { b.sigs.Run(ctx, plog, b.power) })
	if err := power.TrapCtrlAltDel(); err != nil {
		log.Warn("Ctrl-Alt-Del will reboot without an orderly shutdown", "err", err)
	}
	if btn, err := power.OpenACPIButton(); err != nil {
		log.Warn("ACPI power button not watched; use SIGTERM to shut down", "err", err)
	} else {
		safe.Loop(plog, "acpi-button", func() { btn.Run(ctx, plog, b.power) })
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
	echoes := false
	if console != nil && kerr == nil {
		levels, _ := os.ReadFile(printkLevels)
		ignore, _ := os.ReadFile(printkIgnore)
		if echoes = consoleEchoesDebug(levels, ignore); echoes {
			// bootlog's debug-priority copy would still reach the console
			// a second time (`debug`, loglevel=8, ignore_loglevel): the
			// console keeps one copy, and dmesg goes without berth's.
			_ = kmsg.Close()
			kmsg, kerr = nil, errors.New("the kernel's console log level prints debug records; berth's lines would show twice")
		}
	}
	switch {
	case console != nil && kerr == nil:
		out.Attach(console, kmsg)
	case console != nil && echoes:
		out.Attach(console, nil)
		log.Info("berth's lines go to the console only", "why", kerr)
	case console != nil:
		out.Attach(console, nil)
		log.Warn("opening /dev/kmsg; logging to the console only", "err", kerr)
	case kerr == nil:
		out.Attach(nil, kmsg)
		log.Warn("opening /dev/console; logging to /dev/kmsg only", "err", err)
	}
	return console
}

// consoleEchoesDebug says whether the kernel prints KERN_DEBUG records on
// the console: its console log level (the first field of
// /proc/sys/kernel/printk) is above 7, or printk.ignore_loglevel is set.
// Unreadable files mean no: the usual levels leave debug out.
func consoleEchoesDebug(printk, ignoreLoglevel []byte) bool {
	if strings.TrimSpace(string(ignoreLoglevel)) == "Y" {
		return true
	}
	f := strings.Fields(string(printk))
	if len(f) == 0 {
		return false
	}
	level, err := strconv.Atoi(f[0])
	return err == nil && level > 7
}
