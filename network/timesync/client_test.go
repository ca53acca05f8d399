package timesync

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-node/berth/network/timesync/ntptest"
)

// startNTP is a test NTP server on loopback answering with the host's
// time plus offset, as a stratum 2 server.
func startNTP(t *testing.T, offset time.Duration) *ntptest.Server {
	t.Helper()
	s, err := ntptest.Start("127.0.0.1:0", offset, 2)
	if err != nil {
		t.Fatalf("starting an NTP server on loopback: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// fakeClock records what the client did, and is the client's system time:
// the host's plus every step so far, so a step shows in the next sample
// as it would on a node.
type fakeClock struct {
	mu     sync.Mutex
	offset time.Duration
	steps  []time.Duration
	slews  []time.Duration
	est    []Estimate
}

func (f *fakeClock) Step(d time.Duration, e Estimate) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.offset += d
	f.steps = append(f.steps, d)
	f.est = append(f.est, e)
	return nil
}

func (f *fakeClock) Slew(d time.Duration, e Estimate) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.slews = append(f.slews, d)
	f.est = append(f.est, e)
	return nil
}

func (f *fakeClock) now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return time.Now().Add(f.offset)
}

func (f *fakeClock) record() (steps, slews []time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.steps...), append([]time.Duration(nil), f.slews...)
}

// closedPort is a loopback UDP address nobody listens on: questions to it
// fail at once with ICMP port unreachable.
func closedPort(t *testing.T) string {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := c.LocalAddr().String()
	c.Close()
	return a
}

type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *logBuf) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

func fastPolicy() Policy {
	p := DefaultPolicy()
	p.MinPoll, p.MaxPoll, p.RetryMin = 50*time.Millisecond, 200*time.Millisecond, 20*time.Millisecond
	return p
}

// TestClientStepsThenSlews: against a server 5 s ahead, the burst's
// answer steps the clock by the measured 5 s while a dead source fails
// beside it; WaitFirst returns once the step is done; the next answers
// (now within milliseconds) are slewed; the status says it all.
func TestClientStepsThenSlews(t *testing.T) {
	srv := startNTP(t, 5*time.Second)
	dead := closedPort(t)
	fc := &fakeClock{}
	lb := &logBuf{}
	var changes int
	var mu sync.Mutex
	c := New(Options{
		Sources: []Source{{Addr: dead, Origin: OriginConfig}, {Addr: srv.Addr(), Origin: OriginConfig}},
		Clock:   fc, Policy: fastPolicy(), Log: slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Now:      fc.now,
		Since:    func() time.Duration { return 4321 * time.Millisecond },
		OnChange: func(Status) { mu.Lock(); changes++; mu.Unlock() },
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	start := time.Now()
	if !c.WaitFirst(ctx, 3*time.Second) {
		t.Fatalf("WaitFirst: no sync within 3s; log:\n%s", lb)
	}
	t.Logf("FIGURES first sync on loopback after %s", time.Since(start))
	steps, _ := fc.record()
	if len(steps) != 1 || (steps[0]-5*time.Second).Abs() > 50*time.Millisecond {
		t.Fatalf("steps %v, want one of 5s±50ms", steps)
	}
	st := c.Status()
	if !st.Synced || !st.Stepped || st.Server != srv.Addr() || st.Stratum != 2 || st.FirstSyncMs != 4321 ||
		st.FirstOffsetMs < 4950 || st.FirstOffsetMs > 5050 || st.StepMs != st.FirstOffsetMs {
		t.Errorf("status after the step: %+v", st)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, slews := fc.record()
		if len(slews) >= 2 {
			for _, s := range slews {
				if s.Abs() > 50*time.Millisecond {
					t.Errorf("slew of %s after the step, want within 50ms: the step did not take", s)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no two slews within 5s of the step; log:\n%s", lb)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	st = c.Status()
	if st.Sources[0].Failures != 1 || st.Sources[0].LastError == "" || st.Sources[1].Answers < 3 || st.Syncs < 3 {
		t.Errorf("source records after the run: %+v (syncs %d)", st.Sources, st.Syncs)
	}
	if len(st.Errors) != 1 || !strings.Contains(st.Errors[0], dead) {
		t.Errorf("errors %q, want the dead source's one, naming %s", st.Errors, dead)
	}
	mu.Lock()
	if changes < st.Syncs {
		t.Errorf("OnChange called %d times for %d syncs", changes, st.Syncs)
	}
	mu.Unlock()
	if !strings.Contains(lb.String(), "clock stepped") {
		t.Errorf("no 'clock stepped' line in the log:\n%s", lb)
	}
}

// TestClientFailsOver: when the chosen server goes silent, the client
// moves to the next one and keeps the clock synced from it.
func TestClientFailsOver(t *testing.T) {
	a := startNTP(t, 20*time.Millisecond)
	b := startNTP(t, 30*time.Millisecond)
	fc := &fakeClock{}
	lb := &logBuf{}
	c := New(Options{
		Sources: []Source{{Addr: a.Addr(), Origin: OriginConfig}, {Addr: b.Addr(), Origin: OriginDHCP}},
		Clock:   fc, Policy: fastPolicy(), Timeout: 200 * time.Millisecond, Now: fc.now,
		Log: slog.New(slog.NewTextHandler(lb, nil)),
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	if !c.WaitFirst(ctx, 3*time.Second) {
		t.Fatalf("no first sync; log:\n%s", lb)
	}
	if st := c.Status(); st.Stepped {
		t.Errorf("stepped for a 20-30ms offset: %+v", st)
	}
	first := c.Status().Server
	silent, other := a, b
	if first == b.Addr() {
		silent, other = b, a
	}
	silent.SetSilent(true)
	deadline := time.Now().Add(5 * time.Second)
	for c.Status().Server != other.Addr() {
		if time.Now().After(deadline) {
			t.Fatalf("still on %s 5s after it went silent; status %+v\nlog:\n%s", first, c.Status(), lb)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	if !strings.Contains(lb.String(), "did not answer") {
		t.Errorf("the silent server's failure is not in the log:\n%s", lb)
	}
}

// TestWaitFirstNobodyAnswers: with only dead sources WaitFirst returns
// false as soon as the burst is over, not at its bound, so boot does not
// wait for servers that are not there.
func TestWaitFirstNobodyAnswers(t *testing.T) {
	fc := &fakeClock{}
	c := New(Options{
		Sources: []Source{{Addr: closedPort(t)}, {Addr: closedPort(t)}},
		Clock:   fc, Policy: fastPolicy(), Log: slog.New(slog.NewTextHandler(&logBuf{}, nil)), Now: fc.now,
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	start := time.Now()
	if c.WaitFirst(ctx, 10*time.Second) {
		t.Fatal("WaitFirst says synced with no server")
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("WaitFirst took %s with only refused sources, want it back once the burst failed", took)
	}
	cancel()
	<-done
	st := c.Status()
	if st.Synced || len(st.Errors) < 2 || st.Sources[0].Failures < 1 || st.Sources[1].Failures < 1 {
		t.Errorf("status: %+v", st)
	}
	if s, l := fc.record(); len(s)+len(l) != 0 {
		t.Errorf("the clock was changed without an answer: steps %v slews %v", s, l)
	}
}

// TestClientNoSources: nothing to ask is not an error, and boot does not
// wait for it.
func TestClientNoSources(t *testing.T) {
	c := New(Options{Clock: &fakeClock{}, Policy: DefaultPolicy(), Log: slog.New(slog.NewTextHandler(&logBuf{}, nil))})
	c.Run(context.Background())
	if c.WaitFirst(context.Background(), time.Minute) {
		t.Error("WaitFirst says synced with no sources")
	}
}

// TestSources: the order is the command line's, DHCP's, then Amazon's,
// with repeats dropped; Amazon's address family follows the node's.
func TestSources(t *testing.T) {
	addrs := func(s ...string) []netip.Addr {
		var out []netip.Addr
		for _, a := range s {
			out = append(out, netip.MustParseAddr(a))
		}
		return out
	}
	for _, tc := range []struct {
		name string
		node []netip.Addr
		want []Source
	}{
		{"dual stack", addrs("10.0.2.15", "2600:1f14::5"), []Source{
			{"10.0.2.2:1123", OriginConfig}, {"169.254.169.123:123", OriginConfig},
			{"10.0.0.2:123", OriginDHCP}, {"[fd00::5]:123", OriginDHCPv6},
		}},
		{"IPv6 only", addrs("2600:1f14::5"), []Source{
			{"10.0.2.2:1123", OriginConfig}, {"169.254.169.123:123", OriginConfig},
			{"10.0.0.2:123", OriginDHCP}, {"[fd00::5]:123", OriginDHCPv6}, {AmazonTimeSync6, OriginAmazon},
		}},
		{"no address known", nil, []Source{
			{"10.0.2.2:1123", OriginConfig}, {"169.254.169.123:123", OriginConfig},
			{"10.0.0.2:123", OriginDHCP}, {"[fd00::5]:123", OriginDHCPv6}, {AmazonTimeSync6, OriginAmazon},
		}},
	} {
		got := Sources([]string{"10.0.2.2:1123", "169.254.169.123:123"}, addrs("10.0.0.2", "10.0.0.2", "fd00::5"), tc.node)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: Sources = %v, want %v", tc.name, got, tc.want)
		}
	}
	got := Sources(nil, nil, addrs("10.1.2.3"))
	if fmt.Sprint(got) != fmt.Sprint([]Source{{AmazonTimeSync4, OriginAmazon}}) {
		t.Errorf("IPv4 node, no other source: %v", got)
	}
}

func TestSplitOffset(t *testing.T) {
	for _, tc := range []struct {
		d         time.Duration
		sec, nsec int64
	}{
		{1500 * time.Millisecond, 1, 5e8},
		{-1500 * time.Millisecond, -2, 5e8},
		{-3 * time.Hour, -10800, 0},
		{-time.Nanosecond, -1, 999999999},
	} {
		if s, n := splitOffset(tc.d); s != tc.sec || n != tc.nsec {
			t.Errorf("splitOffset(%s) = %d, %d; want %d, %d", tc.d, s, n, tc.sec, tc.nsec)
		}
	}
	for poll, want := range map[time.Duration]int64{time.Second: 2, 64 * time.Second: 2, 128 * time.Second: 3, 1024 * time.Second: 6} {
		if got := timeConstant(poll); got != want {
			t.Errorf("timeConstant(%s) = %d, want %d", poll, got, want)
		}
	}
}
