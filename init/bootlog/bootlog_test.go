package bootlog

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer that counts Write calls, to prove one
// line is one write.
type syncBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writes++
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func fixedClock(d time.Duration) func() time.Duration { return func() time.Duration { return d } }

func newTest(level slog.Level) (*slog.Logger, *syncBuffer, *syncBuffer) {
	var console, kmsg syncBuffer
	out := NewOutput()
	out.Attach(&console, &kmsg)
	lv := new(slog.LevelVar)
	lv.Set(level)
	return slog.New(New(out, Options{Level: lv, Clock: fixedClock(1234 * time.Millisecond)})), &console, &kmsg
}

func TestLineFormat(t *testing.T) {
	tests := []struct {
		name string
		log  func(l *slog.Logger)
		want string
		kmsg string
	}{
		{"no phase", func(l *slog.Logger) { l.Info("berth starting", "version", "v1.2") },
			"[  1234ms] -: berth starting version=v1.2\n", "<6>berth: -: berth starting version=v1.2\n"},
		{"phase from With", func(l *slog.Logger) { l.With("phase", "modules").Info("phase done", "duration_ms", 42) },
			"[  1234ms] modules: phase done duration_ms=42\n", "<6>berth: modules: phase done duration_ms=42\n"},
		{"phase from record", func(l *slog.Logger) { l.Info("hook exited", "phase", "hooks", "cmd", "/bin/x", "code", 3, "signal", 0) },
			"[  1234ms] hooks: hook exited cmd=/bin/x code=3 signal=0\n", "<6>berth: hooks: hook exited cmd=/bin/x code=3 signal=0\n"},
		{"quoting", func(l *slog.Logger) {
			l.Info("m", "s", "a b", "q", `say "hi"`, "e", "", "eq", "a=b", "nl", "x\ny", "ok", true, "d", 1500*time.Millisecond)
		},
			`[  1234ms] -: m s="a b" q="say \"hi\"" e="" eq="a=b" nl="x\ny" ok=true d=1.5s` + "\n", ""},
		{"error level and err", func(l *slog.Logger) {
			l.With("phase", "root").Error("FATAL: root: no image", "err", errors.New("open /root.erofs: no such file"))
		},
			`[  1234ms] root: FATAL: root: no image level=ERROR err="open /root.erofs: no such file"` + "\n",
			`<3>berth: root: FATAL: root: no image level=ERROR err="open /root.erofs: no such file"` + "\n"},
		{"warn level", func(l *slog.Logger) { l.Warn("careful") },
			"[  1234ms] -: careful level=WARN\n", "<4>berth: -: careful level=WARN\n"},
		{"groups", func(l *slog.Logger) {
			l.WithGroup("net").With("if", "eth0").Info("up", slog.Group("dhcp", "lease", "1h"))
		},
			"[  1234ms] -: up net.if=eth0 net.dhcp.lease=1h\n", ""},
		{"grouped phase is an attr", func(l *slog.Logger) { l.WithGroup("g").Info("x", "phase", "p") },
			"[  1234ms] -: x g.phase=p\n", ""},
		{"later phase wins", func(l *slog.Logger) { l.With("phase", "a").Info("x", "phase", "b") },
			"[  1234ms] b: x\n", ""},
		{"newline in message", func(l *slog.Logger) { l.Info("two\nlines") },
			"[  1234ms] -: two\\nlines\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, console, kmsg := newTest(slog.LevelDebug)
			tt.log(l)
			if got := console.String(); got != tt.want {
				t.Errorf("console:\n got %q\nwant %q", got, tt.want)
			}
			// Beside a console the kmsg copy is at debug priority, so the
			// kernel does not print the line a second time.
			if want := "<7>" + strings.TrimLeft(tt.kmsg, "<0123456789>"); tt.kmsg != "" && kmsg.String() != want {
				t.Errorf("kmsg beside the console:\n got %q\nwant %q", kmsg.String(), want)
			}
			if console.writes != 1 || kmsg.writes != 1 {
				t.Errorf("writes: console %d kmsg %d, want one each", console.writes, kmsg.writes)
			}
			// With no console, the record keeps the line's own priority.
			var only syncBuffer
			out := NewOutput()
			out.Attach(nil, &only)
			tt.log(slog.New(New(out, Options{Level: slog.LevelDebug, Clock: fixedClock(1234 * time.Millisecond)})))
			if tt.kmsg != "" && only.String() != tt.kmsg {
				t.Errorf("kmsg alone:\n got %q\nwant %q", only.String(), tt.kmsg)
			}
			if only.writes != 1 {
				t.Errorf("kmsg alone: %d writes, want one", only.writes)
			}
		})
	}
}

func TestLevelFilterAndDebugPriority(t *testing.T) {
	l, console, kmsg := newTest(slog.LevelInfo)
	l.Debug("hidden")
	if console.String() != "" || kmsg.String() != "" {
		t.Fatalf("debug line printed at info level: %q %q", console.String(), kmsg.String())
	}
	l2, _, kmsg2 := newTest(slog.LevelDebug)
	l2.Debug("shown")
	if got := kmsg2.String(); got != "<7>berth: -: shown\n" {
		t.Errorf("debug kmsg = %q", got)
	}
}

func TestKmsgTruncated(t *testing.T) {
	l, console, kmsg := newTest(slog.LevelInfo)
	long := strings.Repeat("é", 2000) // 2 bytes each, so a cut may split one
	l.Info("long", "v", long)
	k := kmsg.String()
	if len(k) > KmsgMax {
		t.Errorf("kmsg record is %d bytes, limit %d", len(k), KmsgMax)
	}
	if !strings.HasSuffix(k, "\n") || !strings.HasPrefix(k, "<7>berth: -: long v=") {
		t.Errorf("kmsg record malformed: %.60q...%q", k, k[len(k)-5:])
	}
	if strings.ContainsRune(k, '\uFFFD') || !utf8Valid(k) {
		t.Error("truncation split a rune")
	}
	if !strings.Contains(console.String(), long) {
		t.Error("console line was truncated too; only kmsg should be")
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

func TestPendingUntilAttach(t *testing.T) {
	out := NewOutput()
	l := slog.New(New(out, Options{Clock: fixedClock(5 * time.Millisecond)}))
	l.Info("before devtmpfs", "phase", "early")
	out.WriteLine("raw")
	var console, kmsg syncBuffer
	out.Attach(&console, &kmsg)
	l.Info("after")
	want := "[     5ms] early: before devtmpfs\nraw\n[     5ms] -: after\n"
	if console.String() != want {
		t.Errorf("console = %q, want %q", console.String(), want)
	}
	if kmsg.String() != "<7>berth: early: before devtmpfs\n<7>berth: -: after\n" {
		t.Errorf("kmsg = %q (the raw line must not reach kmsg)", kmsg.String())
	}
}

func TestPendingBounded(t *testing.T) {
	out := NewOutput()
	// Identical lines: the repeat limit would hide the pending bound.
	l := slog.New(New(out, Options{Clock: fixedClock(0), Limit: Limit{Off: true}}))
	for i := 0; i < pendingMax+10; i++ {
		l.Info("x")
	}
	var console syncBuffer
	out.Attach(&console, nil)
	lines := strings.Split(strings.TrimSuffix(console.String(), "\n"), "\n")
	if len(lines) != pendingMax+1 || !strings.Contains(lines[0], "10 early log lines dropped level=WARN") {
		t.Errorf("got %d lines, first %q; want %d kept plus a drop notice", len(lines), lines[0], pendingMax)
	}
}

func TestConcurrent(t *testing.T) {
	var console syncBuffer
	out := NewOutput()
	out.Attach(&console, nil)
	// Identical lines: the repeat limit would hide interleaving.
	l := slog.New(New(out, Options{Clock: fixedClock(1234 * time.Millisecond), Limit: Limit{Off: true}}))
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ll := l.With("phase", "p")
			for i := 0; i < 100; i++ {
				ll.Info("hello", "i", i)
			}
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(console.String(), "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("got %d lines, want 800", len(lines))
	}
	for _, ln := range lines {
		if !strings.HasPrefix(ln, "[  1234ms] p: hello i=") {
			t.Fatalf("interleaved or malformed line %q", ln)
		}
	}
}

func TestSinceBootMonotonic(t *testing.T) {
	a := SinceBoot()
	time.Sleep(2 * time.Millisecond)
	b := SinceBoot()
	if a <= 0 || b <= a {
		t.Errorf("SinceBoot not increasing: %v then %v", a, b)
	}
}
