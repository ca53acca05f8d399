package main

import (
	"runtime/debug"
)

// PID 1's garbage collector settings. Go's defaults (GOGC=100, no memory
// limit) let the heap grow to twice what survived the last collection, and
// PID 1's heap breathes with every restart, notice and boot.json rewrite
// for as long as the node runs: each MiB it is let grow is a MiB that
// kubelet's reservations must cover and pods lose (issue 17: RSS while
// supervising at most 15 MiB). The live heap after boot is a few MiB (the
// module index the hotplug loop keeps, the plan, the report), so:
//   - GOGC 50 keeps the heap goal at 1.5 times the live heap; the extra GC
//     cycles cost microseconds on a heap this small.
//   - A soft memory limit of pid1MemoryLimit makes the collector run
//     before the Go runtime's total memory (heap, stacks, metadata) passes
//     it, and the scavenger return freed pages to the kernel to stay under
//     it. It is soft: were the live heap ever larger (a huge user data), Go
//     would exceed it rather than fail, with the GC's CPU use capped.
//
// GOGC or GOMEMLIMIT on the kernel command line (the kernel passes
// unknown key=value words to init's environment) override these, for
// measuring.
const (
	pid1GCPercent   = 50
	pid1MemoryLimit = 12 << 20
)

// gcSettings decides PID 1's GC percent and memory limit; a negative value
// leaves the runtime's own setting (from the environment) alone.
func gcSettings(getenv func(string) string) (percent int, limit int64) {
	percent, limit = pid1GCPercent, pid1MemoryLimit
	if getenv("GOGC") != "" {
		percent = -1
	}
	if getenv("GOMEMLIMIT") != "" {
		limit = -1
	}
	return percent, limit
}

// tuneGC applies gcSettings. It runs first thing in PID 1, before the boot
// allocates anything worth collecting.
func tuneGC(getenv func(string) string) {
	percent, limit := gcSettings(getenv)
	if percent >= 0 {
		debug.SetGCPercent(percent)
	}
	if limit >= 0 {
		debug.SetMemoryLimit(limit)
	}
}
