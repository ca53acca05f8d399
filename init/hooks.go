package main

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/berth-node/berth/init/plan"
	"github.com/berth-node/berth/runtime/reaper"
)

// hookEnv is the environment of hooks and the debug shell: the kernel
// gives PID 1 next to none.
func hookEnv() []string {
	return []string{"PATH=" + plan.DefaultPath, "HOME=/", "TERM=linux"}
}

// runHooks runs the berth.exec commands one after the other, output on the
// console, and logs each exit as `hook exited cmd=PROG code=N signal=S`
// (code -1 when a signal killed it; signal 0 when none did). A hook runs as
// long as it likes: it is a debugging aid on its own goroutine, and nothing
// waits for it but the next hook.
func runHooks(ctx context.Context, log *slog.Logger, r *reaper.Reaper, console *os.File, hooks [][]string) {
	for _, argv := range hooks {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = hookEnv()
		cmd.Dir = "/"
		if console != nil {
			cmd.Stdout, cmd.Stderr = console, console
		}
		p, err := r.Start(cmd)
		if err != nil {
			log.Error("hook failed to start", "cmd", argv[0], "err", err)
			continue
		}
		log.Info("hook started", "cmd", argv[0], "pid", p.Pid(), "args", len(argv)-1)
		st, err := p.Wait(ctx)
		if err != nil {
			log.Error("waiting for hook", "cmd", argv[0], "err", err)
			return
		}
		log.Info("hook exited", "cmd", argv[0], "code", st.Code, "signal", int(st.Signal))
	}
}

// debugShellMinGap stops a shell that dies at once from spinning.
const debugShellMinGap = time.Second

// debugShell keeps /bin/sh running on /dev/TTY, when the image has one,
// until ctx ends (a shutdown began): the shell then running is left to
// the shutdown's SIGTERM and hangup, and none is started after it.
func debugShell(ctx context.Context, log *slog.Logger, r *reaper.Reaper, tty string) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		log.Info("no /bin/sh in this image; berth.debugshell ignored")
		return
	}
	dev := "/dev/" + tty
	for ctx.Err() == nil {
		started := time.Now()
		f, err := os.OpenFile(dev, os.O_RDWR|syscall.O_NOCTTY, 0)
		if err != nil {
			log.Warn("opening debug shell terminal; giving up", "tty", dev, "err", err)
			return
		}
		cmd := exec.Command("/bin/sh")
		cmd.Env = hookEnv()
		cmd.Dir = "/"
		cmd.Stdin, cmd.Stdout, cmd.Stderr = f, f, f
		// A session of its own with the tty as controlling terminal, so
		// job control and Ctrl-C work in the shell and not on berth.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
		p, err := r.Start(cmd)
		f.Close()
		if err != nil {
			log.Warn("starting debug shell; giving up", "tty", dev, "err", err)
			return
		}
		log.Info("debug shell started", "tty", dev, "pid", p.Pid())
		st, err := p.Wait(ctx)
		if err != nil {
			return
		}
		log.Info("debug shell exited; starting another", "tty", dev, "code", st.Code, "signal", int(st.Signal))
		if wait := debugShellMinGap - time.Since(started); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	}
}
