package report

import (
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
)

// Live is berth's own process as of the last write of boot.json. The
// boot report's RSSKiB is taken once, at the report; boot.json is
// rewritten at every service restart, time sync or notice, so Live lets
// a soak or a fault test tell a leak from the heap's normal breathing:
// RSS moves with the GC's heap goal, while live heap, goroutines and open
// files only grow when something is kept that should not be.
type Live struct {
	AtMs   int64 `json:"atMs"`
	RSSKiB int64 `json:"rssKiB"`
	// HeapLiveKiB is the heap the last GC cycle found reachable.
	HeapLiveKiB int64 `json:"heapLiveKiB"`
	Goroutines  int64 `json:"goroutines"`
	// FDs counts /proc/self/fd: a leaked pipe or socket per restart shows
	// here first.
	FDs int64 `json:"fds"`
}

// ReadLive reads the figures of the calling process; atMs is the caller's
// clock (ms since kernel start).
func ReadLive(atMs int64) (Live, error) {
	l := Live{AtMs: atMs}
	s := []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/sched/goroutines:goroutines"},
	}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		l.HeapLiveKiB = int64(s[0].Value.Uint64() / 1024)
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		l.Goroutines = int64(s[1].Value.Uint64())
	} else {
		l.Goroutines = int64(runtime.NumGoroutine())
	}
	rss, err := ReadRSSKiB("/proc/self/status")
	if err != nil {
		return l, err
	}
	l.RSSKiB = rss
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return l, fmt.Errorf("counting open files: %w", err)
	}
	// ReadDir's own descriptor is closed by now but was listed.
	l.FDs = int64(len(fds)) - 1
	return l, nil
}
