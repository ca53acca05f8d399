package main

import (
	"context"
	"log/slog"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/berth-node/berth/internal/safe"
	"golang.org/x/sys/unix"
)

func TestGCSettings(t *testing.T) {
	env := func(kv map[string]string) func(string) string {
		return func(k string) string { return kv[k] }
	}
	for _, tc := range []struct {
		env   map[string]string
		procs int
		want  runtimeSettings
	}{
		{nil, 2, runtimeSettings{pid1GCPercent, pid1MemoryLimit, -1}},
		{nil, pid1MaxProcs, runtimeSettings{pid1GCPercent, pid1MemoryLimit, -1}},
		{nil, 96, runtimeSettings{pid1GCPercent, pid1MemoryLimit, pid1MaxProcs}},
		{map[string]string{"GOGC": "off"}, 2, runtimeSettings{-1, pid1MemoryLimit, -1}},
		{map[string]string{"GOMEMLIMIT": "64MiB"}, 2, runtimeSettings{pid1GCPercent, -1, -1}},
		{map[string]string{"GOGC": "200", "GOMEMLIMIT": "1GiB", "GOMAXPROCS": "96"}, 96, runtimeSettings{-1, -1, -1}},
	} {
		if got := gcSettings(env(tc.env), tc.procs); got != tc.want {
			t.Errorf("env %v, %d Ps: %+v, want %+v", tc.env, tc.procs, got, tc.want)
		}
	}
}

// TestTrimMemoryReturnsFreedHeap: garbage the collector has freed goes
// back to the kernel on the next tick, and the loop ends with its context.
func TestTrimMemoryReturnsFreedHeap(t *testing.T) {
	released := func() uint64 {
		s := []metrics.Sample{{Name: "/memory/classes/heap/released:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	// 16 MiB, of which half must come back: what other goroutines of the
	// test binary allocate between the collection and the release may
	// reuse some freed pages (make test-unit once saw 1.8 of 4 MiB come
	// back, with 2 wanted).
	garbage := make([][]byte, 0, 64)
	for range 64 {
		garbage = append(garbage, make([]byte, 256<<10))
	}
	// Taken while the 16 MiB are live: they may have reused pages
	// released before.
	before := released()
	runtime.KeepAlive(garbage) // dead from here on
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	safe.Go(slog.New(slog.DiscardHandler), "trim", func() { defer close(done); trimMemory(ctx, time.Millisecond) },
		func(p *safe.Panic) { t.Errorf("trimMemory panicked: %v", p) })
	deadline := time.Now().Add(5 * time.Second)
	for released() < before+(8<<20) {
		if time.Now().After(deadline) {
			t.Fatalf("released heap %d bytes, was %d with 16 MiB of it live: want 8 MiB more", released(), before)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
}

// TestSetTHPDisabled: the flag PID 1 sets is the one rlimit-exec clears.
func TestSetTHPDisabled(t *testing.T) {
	get := func() uintptr {
		r, _, errno := unix.Syscall6(unix.SYS_PRCTL, unix.PR_GET_THP_DISABLE, 0, 0, 0, 0, 0)
		if errno != 0 {
			t.Fatalf("PR_GET_THP_DISABLE: %v", errno)
		}
		return r
	}
	was := get()
	defer func() { _ = setTHPDisabled(was == 1) }()
	for _, on := range []bool{true, false} {
		if err := setTHPDisabled(on); err != nil {
			t.Fatal(err)
		}
		if got := get() == 1; got != on {
			t.Errorf("after setTHPDisabled(%v), PR_GET_THP_DISABLE says %v", on, got)
		}
	}
}

func TestReexecForTHP(t *testing.T) {
	for _, tc := range []struct {
		disabled bool
		argv0    string
		want     bool
	}{
		{false, "/init", true},
		{false, "/sbin/init", true},
		// After the exec: once only.
		{true, "/init", false},
		// Not a path exec can take without /proc.
		{false, "init", false},
		{false, "", false},
	} {
		if got := reexecForTHP(tc.disabled, tc.argv0); got != tc.want {
			t.Errorf("reexecForTHP(%v, %q) = %v, want %v", tc.disabled, tc.argv0, got, tc.want)
		}
	}
}
