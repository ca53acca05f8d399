package main

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"
)

// safeGo runs fn in a goroutine; a panic is logged with its stack instead
// of taking PID 1, and with it the kernel, down.
func safeGo(log *slog.Logger, name string, fn func()) {
	go func() {
		defer recoverLog(log, name)
		fn()
	}()
}

// safeLoop is safeGo for goroutines PID 1 cannot do without (the reaper,
// signal and power button handling): after a panic fn starts again, a
// second later so a panic on every call cannot spin.
func safeLoop(log *slog.Logger, name string, fn func()) {
	go func() {
		for {
			if !runRecovered(log, name, fn) {
				return
			}
			time.Sleep(time.Second)
			log.Warn("restarting after panic", "goroutine", name)
		}
	}()
}

// runRecovered runs fn and reports whether it panicked.
func runRecovered(log *slog.Logger, name string, fn func()) (panicked bool) {
	defer func() {
		if r := recover(); r != nil {
			panicked = true
			logPanic(log, name, r)
		}
	}()
	fn()
	return false
}

func recoverLog(log *slog.Logger, name string) {
	if r := recover(); r != nil {
		logPanic(log, name, r)
	}
}

func logPanic(log *slog.Logger, name string, r any) {
	log.Error("panic recovered", "goroutine", name, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
}

// callRecovered runs fn and turns a panic into an error, so a bug in a boot
// phase becomes a fatal boot error with a message, not a kernel panic.
func callRecovered(log *slog.Logger, name string, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			logPanic(log, name, r)
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return fn()
}
