package report

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
)

// Live is berth's own process as of the last write of boot.json. The
// boot report's RSSKiB is taken once, at the report; boot.json is
// rewritten at every service restart, time sync or notice, and once a
// minute while supervising, so Live lets a soak or a fault test tell a
// leak from the heap's normal breathing: RSS moves with the GC's heap
// goal, while live heap, goroutines and open files only grow when
// something is kept that should not be.
type Live struct {
	AtMs   int64 `json:"atMs"`
	RSSKiB int64 `json:"rssKiB"`
	// RSSAnonKiB and RSSFileKiB split RSSKiB (with RSSShmemKiB) as the
	// kernel counts it: anonymous pages are Go's heap, stacks and runtime
	// metadata; file pages are the binary's text and rodata that have run
	// or been read. berth runs from the initramfs, whose pages are in
	// memory whether mapped or not, so file pages cost the node nothing
	// beyond what the initramfs already holds; anonymous pages do.
	RSSAnonKiB  int64 `json:"rssAnonKiB"`
	RSSFileKiB  int64 `json:"rssFileKiB"`
	RSSShmemKiB int64 `json:"rssShmemKiB"`
	// HeapLiveKiB is the heap the last GC cycle found reachable.
	HeapLiveKiB int64 `json:"heapLiveKiB"`
	// GoHeapKiB is the heap's spans Go holds from the kernel (objects,
	// free and unused, not released); StacksKiB the goroutines' stacks;
	// GoOtherKiB the rest Go has mapped and not released (GC metadata,
	// profiling buckets, the runtime's own structures).
	GoHeapKiB  int64 `json:"goHeapKiB"`
	StacksKiB  int64 `json:"stacksKiB"`
	GoOtherKiB int64 `json:"goOtherKiB"`
	Goroutines int64 `json:"goroutines"`
	// FDs counts /proc/self/fd: a leaked pipe or socket per restart shows
	// here first.
	FDs int64 `json:"fds"`
	// ServiceLogsKiB is the service output berth keeps in memory (each
	// service's last lines, for a crash loop's cause), part of the live
	// heap. It fills over the node's first hours up to its bound (1000
	// lines or 256 KiB a service), which a soak must not take for a leak.
	// Set by the caller, 0 before services run.
	ServiceLogsKiB int64 `json:"serviceLogsKiB"`
}

// liveSamples are the runtime/metrics ReadLive reads, in the order it
// reads them back.
func liveSamples() []metrics.Sample {
	names := []string{
		"/gc/heap/live:bytes",
		"/sched/goroutines:goroutines",
		"/memory/classes/heap/objects:bytes",
		"/memory/classes/heap/free:bytes",
		"/memory/classes/heap/unused:bytes",
		"/memory/classes/heap/stacks:bytes",
		"/memory/classes/os-stacks:bytes",
		"/memory/classes/total:bytes",
		"/memory/classes/heap/released:bytes",
	}
	s := make([]metrics.Sample, len(names))
	for i, n := range names {
		s[i].Name = n
	}
	return s
}

// ReadLive reads the figures of the calling process; atMs is the caller's
// clock (ms since kernel start).
func ReadLive(atMs int64) (Live, error) {
	l := Live{AtMs: atMs}
	s := liveSamples()
	metrics.Read(s)
	kib := func(i int) int64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return int64(s[i].Value.Uint64() / 1024)
	}
	l.HeapLiveKiB = kib(0)
	if s[1].Value.Kind() == metrics.KindUint64 {
		l.Goroutines = int64(s[1].Value.Uint64())
	} else {
		l.Goroutines = int64(runtime.NumGoroutine())
	}
	l.GoHeapKiB = kib(2) + kib(3) + kib(4)
	l.StacksKiB = kib(5) + kib(6)
	l.GoOtherKiB = max(0, kib(7)-kib(8)-l.GoHeapKiB-l.StacksKiB)
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return l, fmt.Errorf("reading RSS: %w", err)
	}
	m, err := ParseMemKiB(f)
	f.Close()
	if err != nil {
		return l, fmt.Errorf("/proc/self/status: %w", err)
	}
	l.RSSKiB, l.RSSAnonKiB, l.RSSFileKiB, l.RSSShmemKiB = m.RSS, m.Anon, m.File, m.Shmem
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return l, fmt.Errorf("counting open files: %w", err)
	}
	// ReadDir's own descriptor is closed by now but was listed.
	l.FDs = int64(len(fds)) - 1
	return l, nil
}

// MemKiB is a process's resident memory from /proc/PID/status.
type MemKiB struct {
	RSS, Anon, File, Shmem int64
}

// ParseMemKiB finds VmRSS and its split (RssAnon, RssFile, RssShmem) in
// /proc/PID/status text. VmRSS is required; kernels before 4.5 lack the
// split, which then reads 0.
func ParseMemKiB(r io.Reader) (MemKiB, error) {
	var m MemKiB
	fields := map[string]*int64{"VmRSS:": &m.RSS, "RssAnon:": &m.Anon, "RssFile:": &m.File, "RssShmem:": &m.Shmem}
	seenRSS := false
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		dst := fields[key+":"]
		if !ok || dst == nil {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return m, fmt.Errorf("%s line %q: want \"N kB\"", key, sc.Text())
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || n < 0 {
			return m, fmt.Errorf("%s line %q: bad number", key, sc.Text())
		}
		*dst = n
		seenRSS = seenRSS || key == "VmRSS"
	}
	if err := sc.Err(); err != nil {
		return m, err
	}
	if !seenRSS {
		return m, fmt.Errorf("no VmRSS line")
	}
	return m, nil
}
