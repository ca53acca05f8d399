package bootlog

import (
	"container/list"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/berth-node/berth/init/report"
)

// Defaults of Limit. Ten lines a phase and message may say in ten seconds
// is more than any of berth's own loops needs to show it is looping; the
// serial console runs at 115200 baud, about 11 KiB/s for the whole node, so
// a retry loop logging freely would bury everything else, the kernel's
// lines included.
const (
	DefaultLimitBurst   = 10
	DefaultLimitWindow  = 10 * time.Second
	DefaultLimitMaxKeys = 256
)

// Limit bounds repeated lines: a phase and message (attributes aside, as
// a retry loop's attempt=N differs every time) written more than Burst
// times in one Window is suppressed until the window ends, and then one
// summary line says how many were:
//
//	[ 11234ms] dhcp: suppressed 9990 repeats of "renewal failed" level=WARN window=10s
//
// FATAL errors are never suppressed, nor a BERTH-REPORT line. Debug lines
// are limited only when repeated whole, attributes included. The summary
// comes at the window's end (when AfterFunc can schedule it) or with the
// next line berth logs after it, whichever is first.
type Limit struct {
	// Off turns the limit off.
	Off bool
	// Burst lines of one phase and message are written per window; 0
	// means DefaultLimitBurst.
	Burst int
	// Window is how long a phase and message is counted from its first
	// line; 0 means DefaultLimitWindow.
	Window time.Duration
	// MaxKeys bounds the phases and messages tracked at once, so a flood
	// of distinct lines costs no memory; the oldest is forgotten (its
	// summary written first). 0 means DefaultLimitMaxKeys.
	MaxKeys int
	// AfterFunc schedules the end-of-window summary. Nil means
	// time.AfterFunc when Options.Clock is nil (real time), and no timer
	// when the clock is a test's: summaries then come with the next line.
	AfterFunc func(d time.Duration, f func())
}

// limitKey is what makes two lines "the same": phase and message, or for
// debug lines, phase and the whole line.
type limitKey struct {
	phase, msg string
}

// limitEntry counts one key's lines in its current window.
type limitEntry struct {
	key limitKey
	// start is when the window began: the key's first line in it.
	start time.Duration
	// seen counts the window's lines, written and suppressed.
	seen       int
	suppressed int
	// level is the highest level suppressed, for the summary's level.
	level slog.Level
}

// limiter is shared by every Handler derived from one New.
type limiter struct {
	cfg   Limit
	clock func() time.Duration
	out   *Output

	mu sync.Mutex
	// keys index order, which holds *limitEntry oldest window first: new
	// keys go to the back and a key whose window ends is removed, so the
	// front is always the next to expire and the first to evict.
	keys  map[limitKey]*list.Element
	order *list.List
	// armed says a summary timer is pending.
	armed bool
}

func newLimiter(cfg Limit, clock func() time.Duration, realClock bool, out *Output) *limiter {
	if cfg.Off {
		return nil
	}
	if cfg.Burst <= 0 {
		cfg.Burst = DefaultLimitBurst
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultLimitWindow
	}
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = DefaultLimitMaxKeys
	}
	if cfg.AfterFunc == nil && realClock {
		cfg.AfterFunc = func(d time.Duration, f func()) { time.AfterFunc(d, f) }
	}
	return &limiter{cfg: cfg, clock: clock, out: out, keys: map[limitKey]*list.Element{}, order: list.New()}
}

// exempt says a line is never suppressed: the FATAL line is the one an
// operator looks for first, and the boot report is parsed by machines.
func exempt(r slog.Record) bool {
	return (r.Level >= slog.LevelError && strings.HasPrefix(r.Message, "FATAL")) ||
		strings.HasPrefix(r.Message, strings.TrimSpace(report.Prefix))
}

// write formats and writes a line unless its key is over the limit (a
// suppressed line costs no formatting). The decision and the write happen
// under one lock, so a summary always precedes the next window's first
// line.
func (l *limiter) write(phase, keyMsg string, level slog.Level, body []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock()
	l.expireLocked(now)
	key := limitKey{phase, keyMsg}
	el, ok := l.keys[key]
	if !ok {
		if l.order.Len() >= l.cfg.MaxKeys {
			l.dropLocked(l.order.Front(), now)
		}
		el = l.order.PushBack(&limitEntry{key: key, start: now})
		l.keys[key] = el
	}
	e := el.Value.(*limitEntry)
	e.seen++
	if e.seen <= l.cfg.Burst {
		l.out.write(formatLine(now, phase, level, body))
		return
	}
	e.suppressed++
	if e.suppressed == 1 || level > e.level {
		e.level = level
	}
	if e.suppressed == 1 {
		l.armLocked(e.start + l.cfg.Window - now)
	}
}

// expireLocked ends every window that has run its length: summary, then
// forget the key, so its next line starts a new window.
func (l *limiter) expireLocked(now time.Duration) {
	for el := l.order.Front(); el != nil; el = l.order.Front() {
		if now-el.Value.(*limitEntry).start < l.cfg.Window {
			return
		}
		l.dropLocked(el, now)
	}
}

// dropLocked forgets an entry, writing its summary if it suppressed any.
func (l *limiter) dropLocked(el *list.Element, now time.Duration) {
	e := l.order.Remove(el).(*limitEntry)
	delete(l.keys, e.key)
	if e.suppressed == 0 {
		return
	}
	body := appendMessage(nil, fmt.Sprintf("suppressed %d repeats of %q", e.suppressed, e.key.msg))
	body = appendLevel(body, e.level)
	body = append(body, " window="...)
	body = append(body, l.cfg.Window.String()...)
	console, kmsg := formatLine(now, e.key.phase, e.level, body)
	l.out.write(console, kmsg)
}

// armLocked schedules a summary d from now, unless one is pending (its
// tick re-arms for whatever is left).
func (l *limiter) armLocked(d time.Duration) {
	if l.cfg.AfterFunc == nil || l.armed {
		return
	}
	l.armed = true
	l.cfg.AfterFunc(max(d, time.Millisecond), l.tick)
}

// tick is the summary timer: it ends the windows that are over and
// re-arms for the next that has something to summarize.
func (l *limiter) tick() {
	defer func() {
		// The timer runs on its own goroutine, and in PID 1 a panic there
		// would panic the kernel: a line is all a log summary may cost.
		if r := recover(); r != nil {
			l.out.write(fmt.Appendf(nil, "[%6dms] -: bootlog: writing suppressed-line summaries panicked: %v level=ERROR\n", l.clock().Milliseconds(), r), nil)
		}
	}()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed = false
	now := l.clock()
	l.expireLocked(now)
	for el := l.order.Front(); el != nil; el = el.Next() {
		if e := el.Value.(*limitEntry); e.suppressed > 0 {
			l.armLocked(e.start + l.cfg.Window - now)
			return
		}
	}
}

// Flush writes the summaries of every window with suppressed lines now,
// without waiting for the windows to end: before PID 1 powers off, say,
// so that no count is lost.
func (h *Handler) Flush() {
	l := h.lim
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock()
	for el := l.order.Front(); el != nil; {
		next := el.Next()
		if el.Value.(*limitEntry).suppressed > 0 {
			l.dropLocked(el, now)
		}
		el = next
	}
}
