// Package bootlog is berth's log/slog handler: one line per event, stamped
// with milliseconds since the kernel started and the boot phase it belongs
// to, written to the console (what operators read through EC2's console
// output and tests read from the serial port) and to /dev/kmsg (so the lines
// sit in dmesg among the kernel's own).
//
// Console line:  [  1234ms] phase: message level=WARN key=value key2="quoted value"
// kmsg record:   <7>berth: phase: message level=WARN key=value ...
//
// The kernel prints every kmsg record below its console log level on the
// console itself, straight to the UART and in the middle of whatever berth
// has queued there. So when berth writes a line to the console too, its kmsg
// copy goes at debug priority, which no console log level short of `debug`
// prints, and the level lives in the text (level=). Without a console
// (`berth modprobe`, run by the kernel), the record keeps its own priority:
// the kernel's echo is then the only way the line reaches the console.
//
// The phase comes from a "phase" attribute (log.With("phase", "modules"));
// "-" when there is none. level= appears only for warnings and errors.
//
// A line repeated in a loop is limited (see Limit): past ten a phase and
// message may say in ten seconds, its repeats are counted, not written, and
// one summary line gives the count, so a retry loop cannot bury the console
// or evict the kernel's own lines from its ring buffer.
package bootlog

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// KmsgMax bounds one /dev/kmsg record: the kernel refuses longer writes
// (LOG_LINE_MAX is 1024 less a prefix), so a long line is cut rather than
// lost.
const KmsgMax = 960

// pendingMax bounds what is kept before the console exists, so a logging
// loop before devtmpfs is mounted cannot eat memory.
const pendingMax = 512

// SinceBoot is CLOCK_BOOTTIME: time since the kernel started, suspend
// included, the same clock as dmesg's stamps.
func SinceBoot() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// Output is where lines go. It is shared by every handler derived from one
// New, and holds lines until Attach gives it somewhere to write, because PID
// 1 logs before /dev is mounted.
type Output struct {
	mu      sync.Mutex
	console io.Writer
	kmsg    io.Writer
	// attached is false until Attach; until then lines wait in pending.
	attached bool
	pending  []pendingLine
	dropped  int
}

type pendingLine struct {
	console, kmsg []byte
}

// NewOutput returns an Output that keeps lines until Attach.
func NewOutput() *Output { return &Output{} }

// Attach sets the writers (either may be nil) and writes out what was kept.
// Calling it again replaces the writers, for example after switching root.
func (o *Output) Attach(console, kmsg io.Writer) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.console, o.kmsg, o.attached = console, kmsg, true
	if o.dropped > 0 {
		o.writeLocked([]byte(fmt.Sprintf("[%6dms] -: %d early log lines dropped level=WARN\n", SinceBoot().Milliseconds(), o.dropped)), nil)
		o.dropped = 0
	}
	for _, p := range o.pending {
		o.writeLocked(p.console, p.kmsg)
	}
	o.pending = nil
}

// WriteLine writes s and a newline to the console only: for the boot
// report line, longer than a kmsg record and read from the console anyway.
// It returns once the console has sent the line: the kernel prints its own
// messages (and its echo of /dev/kmsg) straight to the UART while what was
// written to /dev/console may still sit in the tty's buffer, so without the
// wait a kernel line can land inside a long report line and break it.
func (o *Output) WriteLine(s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.writeOrKeepLocked([]byte(s+"\n"), nil)
	if f, ok := o.console.(interface{ Fd() uintptr }); ok && o.attached {
		// tcdrain(3): TCSBRK with a non-zero argument waits for the output
		// to drain and sends no break. Not a tty (tests): ENOTTY, ignored.
		_ = unix.IoctlSetInt(int(f.Fd()), unix.TCSBRK, 1)
	}
}

func (o *Output) write(console, kmsg []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.writeOrKeepLocked(console, kmsg)
}

// writeOrKeepLocked writes, or keeps the line until Attach.
func (o *Output) writeOrKeepLocked(console, kmsg []byte) {
	if !o.attached {
		if len(o.pending) >= pendingMax {
			o.dropped++
			return
		}
		o.pending = append(o.pending, pendingLine{console, kmsg})
		return
	}
	o.writeLocked(console, kmsg)
}

// writeLocked ignores write errors: a console that cannot be written has no
// better place to report it.
func (o *Output) writeLocked(console, kmsg []byte) {
	if o.console != nil {
		_, _ = o.console.Write(console)
	}
	if o.kmsg != nil && kmsg != nil {
		if o.console != nil {
			// Otherwise the kernel prints the line a second time (every
			// line without `quiet`, errors with it), often cutting
			// berth's copy in two; see the package doc.
			kmsg = withPriority(kmsg, kmsgDebug)
		}
		_, _ = o.kmsg.Write(kmsg)
	}
}

// kmsgDebug is KERN_DEBUG, the priority the kernel's console leaves out
// at every log level but `debug`'s.
const kmsgDebug = 7

// withPriority sets the syslog priority of a record formatLine made
// ("<N>berth: ..."); the record is not shared, so it is changed in place.
func withPriority(kmsg []byte, prio int) []byte {
	if len(kmsg) > 2 && kmsg[0] == '<' && kmsg[2] == '>' {
		kmsg[1] = byte('0' + prio)
	}
	return kmsg
}

// Options tune a Handler.
type Options struct {
	// Level is the lowest level written; nil means info.
	Level slog.Leveler
	// Clock gives the time since boot; nil means SinceBoot. Tests set it.
	Clock func() time.Duration
	// Limit bounds repeated lines (see Limit); on by default.
	Limit Limit
}

// Handler is the slog.Handler. It is safe for concurrent use.
type Handler struct {
	out    *Output
	opts   Options
	phase  string
	attrs  []byte // preformatted " k=v" pairs from WithAttrs
	prefix string // group prefix, "g1.g2."
	// lim is shared by every handler derived from one New, so that
	// log.With("phase", p) loggers are limited together; nil when off.
	lim *limiter
}

// New returns a Handler writing to out.
func New(out *Output, opts Options) *Handler {
	if opts.Level == nil {
		opts.Level = slog.LevelInfo
	}
	realClock := opts.Clock == nil
	if realClock {
		opts.Clock = SinceBoot
	}
	return &Handler{out: out, opts: opts, lim: newLimiter(opts.Limit, opts.Clock, realClock, out)}
}

// Enabled implements slog.Handler.
func (h *Handler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.opts.Level.Level()
}

// WithAttrs implements slog.Handler.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	h2 := *h
	h2.attrs = append([]byte(nil), h.attrs...)
	for _, a := range as {
		h2.attrs = appendAttr(h2.attrs, h2.prefix, a, &h2.phase)
	}
	return &h2
}

// WithGroup implements slog.Handler.
func (h *Handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	h2 := *h
	h2.prefix = h.prefix + name + "."
	return &h2
}

// Handle implements slog.Handler.
func (h *Handler) Handle(_ context.Context, r slog.Record) error {
	phase := h.phase
	var body []byte
	body = appendMessage(body, r.Message)
	body = appendLevel(body, r.Level)
	body = append(body, h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		body = appendAttr(body, h.prefix, a, &phase)
		return true
	})
	if phase == "" {
		phase = "-"
	}
	if h.lim != nil && !exempt(r) {
		key := r.Message
		if r.Level < slog.LevelInfo {
			// Debug output is asked for to see every event (each module
			// loaded, each mount), which differ in attributes only: only
			// lines repeated whole are limited.
			key = string(body)
		}
		h.lim.write(phase, key, r.Level, body)
		return nil
	}
	h.out.write(formatLine(h.opts.Clock(), phase, r.Level, body))
	return nil
}

// appendLevel marks warnings and errors; info and debug lines carry no
// level, which keeps the common line short.
func appendLevel(body []byte, l slog.Level) []byte {
	switch {
	case l >= slog.LevelError:
		return append(body, " level=ERROR"...)
	case l >= slog.LevelWarn:
		return append(body, " level=WARN"...)
	}
	return body
}

// formatLine makes the console line and the kmsg record of one event.
func formatLine(now time.Duration, phase string, level slog.Level, body []byte) (console, kmsg []byte) {
	console = make([]byte, 0, len(body)+len(phase)+16)
	console = fmt.Appendf(console, "[%6dms] %s: ", now.Milliseconds(), phase)
	console = append(console, body...)
	console = append(console, '\n')

	kmsg = fmt.Appendf(nil, "<%d>berth: %s: ", kmsgPriority(level), phase)
	kmsg = append(kmsg, body...)
	if len(kmsg) > KmsgMax-1 {
		kmsg = truncateUTF8(kmsg, KmsgMax-1)
	}
	kmsg = append(kmsg, '\n')
	return console, kmsg
}

// kmsgPriority maps slog levels onto syslog priorities.
func kmsgPriority(l slog.Level) int {
	switch {
	case l >= slog.LevelError:
		return 3
	case l >= slog.LevelWarn:
		return 4
	case l >= slog.LevelInfo:
		return 6
	}
	return kmsgDebug
}

// truncateUTF8 cuts b to n bytes without leaving half a rune at the end.
func truncateUTF8(b []byte, n int) []byte {
	b = b[:n]
	for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
		r, size := utf8.DecodeLastRune(b)
		if r != utf8.RuneError || size != 1 {
			break
		}
		b = b[:len(b)-1]
	}
	return b
}

// appendMessage keeps a message on one line: a newline inside it would
// break "one line per event" for whoever greps the console.
func appendMessage(b []byte, msg string) []byte {
	for i := 0; i < len(msg); i++ {
		switch c := msg[i]; c {
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// appendAttr writes " key=value"; a top-level "phase" attribute sets the
// line's phase instead of being printed.
func appendAttr(b []byte, prefix string, a slog.Attr, phase *string) []byte {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return b
	}
	if a.Value.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "."
		}
		for _, g := range a.Value.Group() {
			b = appendAttr(b, p, g, phase)
		}
		return b
	}
	if prefix == "" && a.Key == "phase" {
		*phase = a.Value.String()
		return b
	}
	b = append(b, ' ')
	b = append(b, prefix...)
	b = append(b, a.Key...)
	b = append(b, '=')
	return appendValue(b, a.Value)
}

func appendValue(b []byte, v slog.Value) []byte {
	var s string
	switch v.Kind() {
	case slog.KindString:
		s = v.String()
	case slog.KindInt64:
		return strconv.AppendInt(b, v.Int64(), 10)
	case slog.KindUint64:
		return strconv.AppendUint(b, v.Uint64(), 10)
	case slog.KindBool:
		return strconv.AppendBool(b, v.Bool())
	case slog.KindDuration:
		s = v.Duration().String()
	case slog.KindFloat64:
		return strconv.AppendFloat(b, v.Float64(), 'g', -1, 64)
	case slog.KindTime:
		s = v.Time().UTC().Format(time.RFC3339Nano)
	default:
		if err, ok := v.Any().(error); ok {
			s = err.Error()
		} else {
			s = fmt.Sprint(v.Any())
		}
	}
	if needsQuote(s) {
		return strconv.AppendQuote(b, s)
	}
	return append(b, s...)
}

func needsQuote(s string) bool {
	if s == "" {
		return true
	}
	for _, r := range s {
		if r <= ' ' || r == '=' || r == '"' || r == '\\' || r == 0x7f || r == utf8.RuneError {
			return true
		}
	}
	return false
}

// Ensure Handler satisfies slog.Handler.
var _ slog.Handler = (*Handler)(nil)
