// Package safe is how berth starts goroutines. berth is PID 1: a panic
// that escapes any goroutine ends the process, and the kernel panics when
// PID 1 exits. So no code that ships uses a bare go statement
// (internal/boundary checks); it calls Go or Loop here, which recover,
// log the panic with its stack, and hand it to the caller as an error, so
// that the panic becomes the failure of the service or phase that owned
// the goroutine, reported like any other failure.
package safe

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"
)

// Panic is a recovered panic, as an error.
type Panic struct {
	// Goroutine names what was running: a service, a phase, a worker.
	Goroutine string
	Value     any
	Stack     []byte
}

// Error reads "panic: VALUE"; the caller's own wrapping names what
// panicked, as it would for any error.
func (p *Panic) Error() string {
	return fmt.Sprintf("panic: %v", p.Value)
}

// Go runs fn on a new goroutine. A panic in fn is recovered, logged at
// error level with its stack, and passed to onPanic when it is not nil.
// onPanic runs on fn's goroutine, after the recovery.
func Go(log *slog.Logger, name string, fn func(), onPanic func(*Panic)) {
	go func() {
		if p := run(log, name, fn); p != nil && onPanic != nil {
			onPanic(p)
		}
	}()
}

// Call runs fn on the calling goroutine and returns a panic as a *Panic
// error, so a bug in a phase becomes that phase's error.
func Call(log *slog.Logger, name string, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			p := &Panic{Goroutine: name, Value: r, Stack: debug.Stack()}
			logPanic(log, p)
			err = p
		}
	}()
	return fn()
}

// LoopDelay is how long Loop waits before it starts fn again after a
// panic, so that a panic on every call cannot spin.
const LoopDelay = time.Second

// Loop is Go for goroutines PID 1 cannot do without (the reaper, signal
// and power button handling): after a panic fn starts again, LoopDelay
// later. It returns at once; the goroutine ends when fn returns normally.
func Loop(log *slog.Logger, name string, fn func()) {
	loop(log, name, fn, LoopDelay)
}

func loop(log *slog.Logger, name string, fn func(), delay time.Duration) {
	go func() {
		for run(log, name, fn) != nil {
			time.Sleep(delay)
			log.Warn("restarting after panic", "goroutine", name)
		}
	}()
}

// run runs fn and returns the panic it recovered, if any.
func run(log *slog.Logger, name string, fn func()) (p *Panic) {
	defer func() {
		if r := recover(); r != nil {
			p = &Panic{Goroutine: name, Value: r, Stack: debug.Stack()}
			logPanic(log, p)
		}
	}()
	fn()
	return nil
}

// Log logs a panic that PID 1's last-resort recover caught outside Go,
// Call or Loop (its own main goroutine).
func Log(log *slog.Logger, name string, r any) {
	logPanic(log, &Panic{Goroutine: name, Value: r, Stack: debug.Stack()})
}

func logPanic(log *slog.Logger, p *Panic) {
	if log == nil {
		return
	}
	log.Error("panic recovered", "goroutine", p.Goroutine, "panic", fmt.Sprint(p.Value), "stack", string(p.Stack))
}
