package main

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"time"

	"golang.org/x/sys/unix"
)

// PID 1's Go runtime settings. Go's defaults (GOGC=100, no memory
// limit) let the heap grow to twice what survived the last collection, and
// PID 1's heap breathes with every restart, notice and boot.json rewrite
// for as long as the node runs: each MiB it is let grow is a MiB that
// kubelet's reservations must cover and pods lose (issue 17: RSS while
// supervising at most 15 MiB). The live heap while supervising is about
// 1.2 MiB on a joined node and 0.85 MiB with no config (boot.json's live
// section: the report, the module index the hotplug loop keeps, the
// packages' own tables), so:
//   - GOGC 50 keeps the heap goal at 1.5 times the live heap; the extra GC
//     cycles cost microseconds on a heap this small.
//   - A soft memory limit of pid1MemoryLimit makes the collector run
//     before the Go runtime's total memory (heap, stacks, metadata) passes
//     it, and the scavenger return freed pages to the kernel to stay under
//     it. It is soft: were the live heap ever larger (a huge user data), Go
//     would exceed it rather than fail, with the GC's CPU use capped.
//   - No transparent huge pages. With THP on (Debian's kernel: always),
//     the kernel backs Go's heap arena and the runtime's metadata with
//     2 MiB pages: on a joined node 6 MiB of arena resident for 3.5 MiB
//     of heap and stacks, and a 2 MiB page of metadata, and khugepaged
//     collapses again what the scavenger returns. The setting
//     (PR_SET_THP_DISABLE) is inherited, so `berth rlimit-exec` clears it
//     before it execs a service: containerd, kubelet and the pods get the
//     kernel's policy. PID 1 sets it and execs itself once
//     (startWithoutTHP), because by main the runtime's first allocations
//     have already faulted a 2 MiB page into the arena, which the flag
//     does not undo. Measured on a joined node under TCG (make soak, 4
//     minutes): RSS 16.8–18.7 MiB and climbing with THP, 16.1–16.4 flat
//     with the flag set late, 13.8–14.0 flat with the exec (anon 8.5,
//     6.2, 4.1 MiB).
//   - At most pid1MaxProcs Ps. Go gives every P its own allocation cache
//     and, at the first GC, a mark worker goroutine, and runs up to
//     GOMAXPROCS threads: on a 64-vCPU instance that is about 2 MiB of
//     RSS more than with 2 (measured with a small Go program: RssAnon
//     1.6 MiB at GOMAXPROCS=2, 1.9 at 16, 3.7 at 64). PID 1's own work is
//     a few seconds of CPU at boot, mostly one goroutine at a time, and
//     goroutines blocked in syscalls (module loads, disk reads) give up
//     their P, so 4 Ps keep the boot's overlap.
//
// GOGC, GOMEMLIMIT or GOMAXPROCS on the kernel command line (the kernel
// passes unknown key=value words to init's environment) override these,
// for measuring.
const (
	pid1GCPercent   = 50
	pid1MemoryLimit = 12 << 20
	pid1MaxProcs    = 4
)

// runtimeSettings are PID 1's GC percent, memory limit and GOMAXPROCS; a
// negative value leaves the runtime's own setting (from the environment
// or, for procs, the CPU count) alone.
type runtimeSettings struct {
	percent int
	limit   int64
	procs   int
}

// gcSettings decides PID 1's runtime settings on a machine whose Go
// runtime starts with procs Ps.
func gcSettings(getenv func(string) string, procs int) runtimeSettings {
	s := runtimeSettings{percent: pid1GCPercent, limit: pid1MemoryLimit, procs: -1}
	if getenv("GOGC") != "" {
		s.percent = -1
	}
	if getenv("GOMEMLIMIT") != "" {
		s.limit = -1
	}
	if getenv("GOMAXPROCS") == "" && procs > pid1MaxProcs {
		s.procs = pid1MaxProcs
	}
	return s
}

// tuneGC applies gcSettings. It runs first thing in PID 1, before the boot
// allocates anything worth collecting or starts a goroutine.
func tuneGC(getenv func(string) string) {
	s := gcSettings(getenv, runtime.GOMAXPROCS(0))
	if s.percent >= 0 {
		debug.SetGCPercent(s.percent)
	}
	if s.limit >= 0 {
		debug.SetMemoryLimit(s.limit)
	}
	if s.procs > 0 {
		runtime.GOMAXPROCS(s.procs)
	}
	// Set already when startWithoutTHP's exec happened; if it did not,
	// from here on at least. A kernel without THP refuses the call, which
	// then has nothing to do.
	_ = setTHPDisabled(true)
}

// reexecForTHP says whether PID 1 should set the no-THP flag and exec
// itself: only when the flag is not set yet (after the exec it is, so this
// happens once) and argv0 is a path the exec can use (the kernel runs
// /init or init= by absolute path; /proc is not mounted yet for
// /proc/self/exe).
func reexecForTHP(thpDisabled bool, argv0 string) bool {
	return !thpDisabled && filepath.IsAbs(argv0)
}

// startWithoutTHP makes PID 1 run without transparent huge pages from its
// first allocation: it sets the flag, which exec keeps, and execs itself.
// Any failure leaves PID 1 running as it is, with tuneGC setting the flag
// late; nothing can be logged yet.
func startWithoutTHP(args, env []string) {
	r, _, errno := unix.Syscall6(unix.SYS_PRCTL, unix.PR_GET_THP_DISABLE, 0, 0, 0, 0, 0)
	if errno != 0 || !reexecForTHP(r == 1, args[0]) {
		return
	}
	if setTHPDisabled(true) != nil {
		return
	}
	_ = unix.Exec(args[0], args, env)
}

// setTHPDisabled sets or clears the calling process's "no transparent huge
// pages" flag, which its children inherit.
func setTHPDisabled(disabled bool) error {
	v := uintptr(0)
	if disabled {
		v = 1
	}
	if err := unix.Prctl(unix.PR_SET_THP_DISABLE, v, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl PR_SET_THP_DISABLE %d: %w", v, err)
	}
	return nil
}

// trimInterval is how often PID 1 hands its free heap back to the kernel
// while supervising.
const trimInterval = time.Minute

// trimMemory returns the heap's free pages to the kernel every interval
// until ctx ends. Between boot.json rewrites, restarts and notices the
// heap grows to its goal and the background scavenger gives the excess
// back only slowly, keeping about 10% over the goal; on a heap of 1.6 MiB
// live a forced collection costs well under a millisecond of CPU, and
// returns the 1–2 MiB of freed pages the node would otherwise not get
// back.
func trimMemory(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			debug.FreeOSMemory()
		}
	}
}
