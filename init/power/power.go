// Package power turns the outside world's requests to go down into one
// stream of Requests for PID 1: SIGTERM (poweroff), SIGINT, which the kernel
// sends for Ctrl-Alt-Del once berth asks it to (reboot), and the ACPI power
// button (poweroff), which EC2 stop/terminate and QEMU's system_powerdown
// press.
//
// The power button is read from the ACPI "acpi_event" generic netlink
// family rather than from /dev/input/event*: the family is built into the
// kernel and exists from the first instant, so there is nothing to rescan
// when the `button` module loads later, no dependence on the `evdev`
// module, and one socket opened once serves the whole boot.
package power

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"runtime"

	"golang.org/x/sys/unix"
)

// Mode is how the machine goes down.
type Mode int

// The modes.
const (
	PowerOff Mode = iota
	Reboot
	Halt
)

func (m Mode) String() string {
	switch m {
	case PowerOff:
		return "poweroff"
	case Reboot:
		return "reboot"
	case Halt:
		return "halt"
	}
	return "unknown"
}

// Request asks PID 1 to shut down.
type Request struct {
	Mode   Mode
	Reason string
}

// Signals is PID 1's signal subscription. Create it first thing in main:
// until Go has a channel for SIGTERM, the runtime's default action for it
// is to exit, and PID 1 exiting panics the kernel.
type Signals struct {
	ch chan os.Signal
}

// NotifySignals subscribes to the signals PID 1 acts on or must survive.
func NotifySignals() *Signals {
	s := &Signals{ch: make(chan os.Signal, 8)}
	// SIGPIPE is subscribed, not ignored: a write to a closed pipe on fd 1
	// or 2 would otherwise end the process, and SIG_IGN, unlike a handler,
	// would be inherited by every program berth starts.
	signal.Notify(s.ch, unix.SIGTERM, unix.SIGINT, unix.SIGQUIT, unix.SIGHUP,
		unix.SIGUSR1, unix.SIGUSR2, unix.SIGPWR, unix.SIGPIPE)
	return s
}

// Decide maps a signal to a request; ok is false for signals that are only
// logged. SIGQUIT is for a goroutine dump, handled by the caller.
func Decide(sig os.Signal) (Request, bool) {
	switch sig {
	case unix.SIGTERM:
		return Request{Mode: PowerOff, Reason: "SIGTERM"}, true
	case unix.SIGINT:
		return Request{Mode: Reboot, Reason: "SIGINT (Ctrl-Alt-Del)"}, true
	case unix.SIGPWR:
		return Request{Mode: PowerOff, Reason: "SIGPWR"}, true
	}
	return Request{}, false
}

// Run turns signals into requests on out until ctx ends. SIGQUIT logs a
// dump of every goroutine, the one debugging aid that needs no shell.
func (s *Signals) Run(ctx context.Context, log *slog.Logger, out chan<- Request) {
	for {
		select {
		case <-ctx.Done():
			return
		case sig := <-s.ch:
			if sig == unix.SIGQUIT {
				buf := make([]byte, 1<<20)
				n := runtime.Stack(buf, true)
				log.Warn("SIGQUIT: goroutine dump", "stacks", string(buf[:n]))
				continue
			}
			if sig == unix.SIGPIPE {
				continue // the failed write reports EPIPE itself
			}
			req, ok := Decide(sig)
			if !ok {
				log.Info("signal ignored", "signal", sig.String())
				continue
			}
			log.Info("shutdown requested", "reason", req.Reason, "mode", req.Mode.String())
			select {
			case out <- req:
			case <-ctx.Done():
				return
			}
		}
	}
}

// TrapCtrlAltDel tells the kernel to send SIGINT to PID 1 on Ctrl-Alt-Del
// instead of rebooting at once without syncing disks.
func TrapCtrlAltDel() error {
	if err := unix.Reboot(unix.LINUX_REBOOT_CMD_CAD_OFF); err != nil {
		return &os.SyscallError{Syscall: "reboot(CAD_OFF)", Err: err}
	}
	return nil
}
