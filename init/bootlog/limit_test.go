package bootlog

import (
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a test's time since boot, moved by hand.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Duration      { return time.Duration(c.ns.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// fakeTimers records AfterFunc calls for the test to fire.
type fakeTimers struct {
	mu    sync.Mutex
	delay []time.Duration
	fns   []func()
}

func (f *fakeTimers) afterFunc(d time.Duration, fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delay = append(f.delay, d)
	f.fns = append(f.fns, fn)
}

func newLimited(lim Limit) (*slog.Logger, *Handler, *fakeClock, *syncBuffer, *syncBuffer) {
	var console, kmsg syncBuffer
	out := NewOutput()
	out.Attach(&console, &kmsg)
	clock := &fakeClock{}
	h := New(out, Options{Clock: clock.now, Limit: lim})
	return slog.New(h), h, clock, &console, &kmsg
}

func lines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

var (
	stampRE   = regexp.MustCompile(`^\[ *(\d+)ms\] `)
	summaryRE = regexp.MustCompile(`suppressed (\d+) repeats of "([^"]*)"`)
)

// TestLimitFlood: 10,000 identical lines over 50 s are at most Burst lines
// plus one summary per window, on the console and in kmsg, and every line
// is accounted for: written or counted in a summary.
func TestLimitFlood(t *testing.T) {
	l, h, clock, console, kmsg := newLimited(Limit{})
	const total = 10000
	for i := 0; i < total; i++ {
		l.Warn("disk not ready", "phase", "storage", "attempt", i)
		clock.advance(5 * time.Millisecond)
	}
	h.Flush()

	perWindow := map[int64]int{}
	written, suppressed := 0, 0
	for _, ln := range lines(console.String()) {
		m := stampRE.FindStringSubmatch(ln)
		if m == nil {
			t.Fatalf("malformed line %q", ln)
		}
		ms, _ := strconv.ParseInt(m[1], 10, 64)
		if s := summaryRE.FindStringSubmatch(ln); s != nil {
			n, _ := strconv.Atoi(s[1])
			suppressed += n
			if ms == (total * 5 * time.Millisecond).Milliseconds() {
				continue // Flush's summary, after the last window
			}
		} else {
			written++
		}
		perWindow[ms/DefaultLimitWindow.Milliseconds()]++
	}
	if len(perWindow) != 5 {
		t.Errorf("lines fall in %d windows, want 5: %v", len(perWindow), perWindow)
	}
	for w, n := range perWindow {
		if n > DefaultLimitBurst+1 {
			t.Errorf("window %d holds %d lines, want at most %d", w, n, DefaultLimitBurst+1)
		}
	}
	if written+suppressed != total {
		t.Errorf("%d written + %d suppressed = %d, want %d: a line was lost", written, suppressed, written+suppressed, total)
	}
	if c, k := len(lines(console.String())), len(lines(kmsg.String())); c != k {
		t.Errorf("console has %d lines, kmsg %d: both must be limited alike", c, k)
	}
}

func TestLimitSummaryLine(t *testing.T) {
	l, _, clock, console, kmsg := newLimited(Limit{Burst: 2, Window: time.Second})
	p := l.With("phase", "dhcp")
	for i := 0; i < 7; i++ {
		p.Warn("renewal failed", "err", "timeout")
	}
	clock.advance(time.Second)
	p.Warn("renewal failed", "err", "timeout")
	want := `[     0ms] dhcp: renewal failed level=WARN err=timeout
[     0ms] dhcp: renewal failed level=WARN err=timeout
[  1000ms] dhcp: suppressed 5 repeats of "renewal failed" level=WARN window=1s
[  1000ms] dhcp: renewal failed level=WARN err=timeout
`
	if got := console.String(); got != want {
		t.Errorf("console:\n%s\nwant:\n%s", got, want)
	}
	if k := lines(kmsg.String()); len(k) != 4 || k[2] != `<7>berth: dhcp: suppressed 5 repeats of "renewal failed" level=WARN window=1s` {
		t.Errorf("kmsg summary: %q", k)
	}
}

// TestLimitIndependent: keys are phase plus message; a flood of one does
// not touch another, in another phase or with another message.
func TestLimitIndependent(t *testing.T) {
	l, _, _, console, _ := newLimited(Limit{Burst: 3})
	for i := 0; i < 100; i++ {
		l.Info("flood", "phase", "a")
		if i%10 == 0 {
			l.Info("flood", "phase", "b")
			l.Info("other", "phase", "a")
		}
	}
	counts := map[string]int{}
	for _, ln := range lines(console.String()) {
		counts[stampRE.ReplaceAllString(ln, "")]++
	}
	for line, want := range map[string]int{"a: flood": 3, "b: flood": 3, "a: other": 3} {
		if counts[line] != want {
			t.Errorf("%q written %d times, want %d (all: %v)", line, counts[line], want, counts)
		}
	}
}

// TestLimitExempt: the FATAL line and the boot report are never
// suppressed; other errors are.
func TestLimitExempt(t *testing.T) {
	l, _, _, console, _ := newLimited(Limit{Burst: 1})
	for i := 0; i < 20; i++ {
		l.Error("FATAL: root: no image", "phase", "root")
		l.Info(`BERTH-REPORT {"ok":false}`)
		l.Error("renewal failed")
	}
	out := console.String()
	if n := strings.Count(out, "FATAL: root: no image"); n != 20 {
		t.Errorf("FATAL written %d times, want 20", n)
	}
	if n := strings.Count(out, "BERTH-REPORT"); n != 20 {
		t.Errorf("BERTH-REPORT written %d times, want 20", n)
	}
	if n := strings.Count(out, "-: renewal failed"); n != 1 {
		t.Errorf("non-FATAL error written %d times, want 1", n)
	}
	// A warning that merely starts with FATAL is not the FATAL line.
	l.Warn("FATAL-looking warning")
	l.Warn("FATAL-looking warning")
	if n := strings.Count(console.String(), "FATAL-looking warning"); n != 1 {
		t.Errorf("warning starting with FATAL written %d times, want 1", n)
	}
}

// TestLimitBoundedKeys: distinct messages without end keep at most MaxKeys
// tracked, and an evicted key with suppressed lines gets its summary.
func TestLimitBoundedKeys(t *testing.T) {
	l, h, _, console, _ := newLimited(Limit{Burst: 1, MaxKeys: 16})
	for i := 0; i < 5; i++ {
		l.Info("first")
	}
	for i := 0; i < 20000; i++ {
		l.Info(fmt.Sprintf("distinct %d", i))
		if n, m := h.lim.order.Len(), len(h.lim.keys); n > 16 || m > 16 {
			t.Fatalf("after %d distinct messages: %d keys in order, %d in map; want at most 16", i+1, n, m)
		}
	}
	if !strings.Contains(console.String(), `suppressed 4 repeats of "first"`) {
		t.Error("evicting a key lost its suppressed count")
	}
	if n := len(lines(console.String())); n != 1+20000+1 {
		t.Errorf("%d lines, want every distinct message, one \"first\" and its summary", n)
	}
}

// TestLimitTimer: with a timer, the summary comes when the window ends,
// with nothing else logged.
func TestLimitTimer(t *testing.T) {
	var timers fakeTimers
	l, _, clock, console, _ := newLimited(Limit{Burst: 2, Window: 10 * time.Second, AfterFunc: timers.afterFunc})
	l.Info("tick")
	l.Info("tick")
	if len(timers.fns) != 0 {
		t.Fatal("a timer was armed with nothing suppressed")
	}
	clock.advance(3 * time.Second)
	for i := 0; i < 5; i++ {
		l.Info("tick")
	}
	if len(timers.fns) != 1 || timers.delay[0] != 7*time.Second {
		t.Fatalf("timers %v, want one for the 7s left of the window", timers.delay)
	}
	clock.advance(7 * time.Second)
	timers.fns[0]()
	if !strings.HasSuffix(console.String(), "[ 10000ms] -: suppressed 5 repeats of \"tick\" window=10s\n") {
		t.Errorf("no summary at the window's end:\n%s", console.String())
	}
	if len(timers.fns) != 1 {
		t.Errorf("re-armed with nothing left to summarize: %v", timers.delay)
	}
}

func TestLimitTimerDefaults(t *testing.T) {
	out := NewOutput()
	if l := newLimiter(Limit{}, SinceBoot, true, out); l.cfg.AfterFunc == nil || l.cfg.Burst != DefaultLimitBurst || l.cfg.Window != DefaultLimitWindow || l.cfg.MaxKeys != DefaultLimitMaxKeys {
		t.Errorf("real clock: defaults not applied: %+v", l.cfg)
	}
	if l := newLimiter(Limit{}, fixedClock(0), false, out); l.cfg.AfterFunc != nil {
		t.Error("a test's clock got a real timer")
	}
	if l := newLimiter(Limit{Off: true}, SinceBoot, true, out); l != nil {
		t.Error("Off still limits")
	}
}

func TestLimitConcurrent(t *testing.T) {
	l, _, _, console, _ := newLimited(Limit{})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				l.Info("hello", "phase", "p", "g", g)
			}
		}()
	}
	wg.Wait()
	if n := len(lines(console.String())); n != DefaultLimitBurst {
		t.Errorf("%d lines from 8000 identical ones, want %d", n, DefaultLimitBurst)
	}
}

// TestLimitDebugWholeLines: debug lines that differ in attributes are all
// written (every module loaded); one repeated whole is limited.
func TestLimitDebugWholeLines(t *testing.T) {
	var console syncBuffer
	out := NewOutput()
	out.Attach(&console, nil)
	l := slog.New(New(out, Options{Level: slog.LevelDebug, Clock: fixedClock(0), Limit: Limit{Burst: 2}}))
	for i := 0; i < 30; i++ {
		l.Debug("module loaded", "module", fmt.Sprintf("mod%d", i))
		l.Debug("polling", "dev", "nvme0")
	}
	if n := strings.Count(console.String(), "module loaded"); n != 30 {
		t.Errorf("%d distinct debug lines written, want 30", n)
	}
	if n := strings.Count(console.String(), "polling"); n != 2 {
		t.Errorf("a debug line repeated whole written %d times, want 2", n)
	}
}
