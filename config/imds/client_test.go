package imds

import (
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-node/berth/qemu-tests/imdsserver"
)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func startIMDS(t *testing.T, cfg imdsserver.Config, addr string) (*imdsserver.Server, string) {
	t.Helper()
	if cfg.Instance.InstanceID == "" {
		cfg.Instance = imdsserver.DefaultInstance()
	}
	s, err := imdsserver.New(cfg)
	if err != nil {
		t.Fatalf("imdsserver.New: %v", err)
	}
	url, stop, err := s.Start(addr)
	if err != nil {
		t.Fatalf("starting the stand-in: %v", err)
	}
	t.Cleanup(stop)
	return s, url
}

// closedPort returns an address nothing listens on, so connects are refused.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// fastOpts keeps retries quick so tests stay well under a second each.
func fastOpts(endpoints ...string) Options {
	return Options{Endpoints: endpoints, AttemptTimeout: 300 * time.Millisecond,
		BackoffBase: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond}
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

type logEntry = imdsserver.Request

func TestTokenFlow(t *testing.T) {
	s, url := startIMDS(t, imdsserver.Config{}, "127.0.0.1:0")
	c := New(fastOpts(url))
	ctx := ctxTimeout(t, 5*time.Second)
	for _, p := range []string{"meta-data/instance-id", "/latest/meta-data/instance-type"} {
		if _, err := c.Get(ctx, p); err != nil {
			t.Fatalf("Get %s: %v", p, err)
		}
	}
	want := []logEntry{
		{Method: "PUT", Path: "/latest/api/token", TokenPresent: false, Status: 200},
		{Method: "GET", Path: "/latest/meta-data/instance-id", TokenPresent: true, Status: 200},
		{Method: "GET", Path: "/latest/meta-data/instance-type", TokenPresent: true, Status: 200},
	}
	if got := s.Requests(); !slices.Equal(got, want) {
		t.Errorf("requests:\n got %+v\nwant %+v", got, want)
	}
}

func TestTokenTTLRequested(t *testing.T) {
	var gotTTL string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			gotTTL = r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds")
			w.Write([]byte("tok"))
			return
		}
		w.Write([]byte("ok"))
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	if _, err := New(Options{Endpoints: []string{"http://" + ln.Addr().String()}}).Get(ctxTimeout(t, 5*time.Second), "meta-data/mac"); err != nil {
		t.Fatal(err)
	}
	if gotTTL != "21600" {
		t.Errorf("default TTL header %q, want 21600", gotTTL)
	}
}

func TestTokenRefreshedBeforeExpiry(t *testing.T) {
	clk := &fakeClock{now: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)}
	s, url := startIMDS(t, imdsserver.Config{Clock: clk.Now}, "127.0.0.1:0")
	o := fastOpts(url)
	o.Clock, o.TokenTTL = clk.Now, 60*time.Second
	c := New(o)
	ctx := ctxTimeout(t, 5*time.Second)
	get := func() {
		t.Helper()
		if _, err := c.Get(ctx, "meta-data/instance-id"); err != nil {
			t.Fatal(err)
		}
	}
	get()
	clk.Advance(50 * time.Second) // inside the TTL and the margin: reuse
	get()
	clk.Advance(5 * time.Second) // 55s: within the 6s margin, refresh first
	get()
	var methods []string
	for _, r := range s.Requests() {
		methods = append(methods, r.Method+" "+http.StatusText(r.Status))
		if r.Status != 200 {
			t.Errorf("request %+v failed: the token should be refreshed before it expires", r)
		}
	}
	if want := []string{"PUT OK", "GET OK", "GET OK", "PUT OK", "GET OK"}; !slices.Equal(methods, want) {
		t.Errorf("requests %q, want %q", methods, want)
	}
}

func TestTokenExpiryRealTime(t *testing.T) {
	// A 1s TTL with the real clock: the second Get comes after expiry and
	// must still succeed, with a fresh token.
	_, url := startIMDS(t, imdsserver.Config{}, "127.0.0.1:0")
	o := fastOpts(url)
	o.TokenTTL = time.Second
	c := New(o)
	ctx := ctxTimeout(t, 5*time.Second)
	if _, err := c.Get(ctx, "meta-data/instance-id"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	if b, err := c.Get(ctx, "meta-data/instance-id"); err != nil || string(b) != "i-0123456789abcdef0" {
		t.Fatalf("after the token expired: %q, %v", b, err)
	}
}

func TestTokenReacquiredOnceOn401(t *testing.T) {
	s, url := startIMDS(t, imdsserver.Config{}, "127.0.0.1:0")
	c := New(fastOpts(url))
	ctx := ctxTimeout(t, 5*time.Second)
	if _, err := c.Get(ctx, "meta-data/instance-id"); err != nil {
		t.Fatal(err)
	}
	s.ExpireTokens() // as if IMDS forgot our token
	if _, err := c.Get(ctx, "meta-data/instance-type"); err != nil {
		t.Fatalf("Get after the server dropped the token: %v", err)
	}
	got := s.Requests()[2:]
	want := []logEntry{
		{Method: "GET", Path: "/latest/meta-data/instance-type", TokenPresent: true, Status: 401},
		{Method: "PUT", Path: "/latest/api/token", Status: 200},
		{Method: "GET", Path: "/latest/meta-data/instance-type", TokenPresent: true, Status: 200},
	}
	if !slices.Equal(got, want) {
		t.Errorf("requests:\n got %+v\nwant %+v", got, want)
	}

	// An IMDS that refuses every token: one re-acquire, then a clear error.
	var puts, gets int
	var mu sync.Mutex
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Method == http.MethodPut {
			puts++
			w.Write([]byte("tok"))
			return
		}
		gets++
		w.WriteHeader(http.StatusUnauthorized)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	_, err = New(fastOpts("http://"+ln.Addr().String())).Get(ctx, "meta-data/mac")
	if err == nil || !strings.Contains(err.Error(), "HTTP 401 Unauthorized") || !strings.Contains(err.Error(), "1 attempt in") {
		t.Fatalf("err = %v, want a single attempt ending in HTTP 401", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if puts != 2 || gets != 2 {
		t.Errorf("%d PUTs and %d GETs, want 2 and 2 (one re-acquire)", puts, gets)
	}
}

func TestServerErrorsRetried(t *testing.T) {
	s, url := startIMDS(t, imdsserver.Config{}, "127.0.0.1:0")
	c := New(fastOpts(url))
	s.FailNext(3, 500) // the token PUT fails three times, then all is well
	b, err := c.Get(ctxTimeout(t, 5*time.Second), "meta-data/instance-type")
	if err != nil || string(b) != "m5.large" {
		t.Fatalf("Get after three 500s: %q, %v", b, err)
	}
	tm := c.Timings()
	if len(tm) != 1 || tm[0].Attempts != 4 || tm[0].Status != 200 {
		t.Errorf("timings %+v, want one call with 4 attempts", tm)
	}
	// A 500 on the GET itself is retried too, reusing the token.
	s.FailNext(2, 503)
	if _, err := c.Get(ctxTimeout(t, 5*time.Second), "meta-data/mac"); err != nil {
		t.Fatal(err)
	}
	var puts int
	for _, r := range s.Requests() {
		if r.Method == "PUT" {
			puts++
		}
	}
	if puts != 4 {
		t.Errorf("%d token PUTs, want 4 (3 failed + 1)", puts)
	}
}

func TestSlowAnswerRetried(t *testing.T) {
	s, url := startIMDS(t, imdsserver.Config{}, "127.0.0.1:0")
	c := New(fastOpts(url)) // 300ms per attempt
	s.DelayNext(2, 5*time.Second)
	start := time.Now()
	b, err := c.Get(ctxTimeout(t, 3*time.Second), "meta-data/instance-id")
	if err != nil || string(b) != "i-0123456789abcdef0" {
		t.Fatalf("Get with two hung answers: %q, %v", b, err)
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Errorf("took %v; two 300ms attempt timeouts plus backoff should take well under 1.5s", d)
	}
	if tm := c.Timings(); tm[0].Attempts != 3 {
		t.Errorf("attempts %d, want 3", tm[0].Attempts)
	}
}

func TestUnreachableEndsAtDeadline(t *testing.T) {
	ep := closedPort(t)
	c := New(fastOpts(ep))
	const deadline = 1 * time.Second
	start := time.Now()
	_, err := c.Get(ctxTimeout(t, deadline), "meta-data/instance-type")
	took := time.Since(start)
	if err == nil {
		t.Fatal("Get against a closed port succeeded")
	}
	if took > deadline+500*time.Millisecond {
		t.Errorf("returned after %v, want within the %v deadline (+500ms slack)", took, deadline)
	}
	if took < deadline/2 {
		t.Errorf("gave up after %v; it should keep retrying for most of the %v deadline", took, deadline)
	}
	msg := err.Error()
	for _, want := range []string{"imds: GET /latest/meta-data/instance-type via " + ep + ": ", " attempts in ", "connection refused", "deadline exceeded"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	var ie *Error
	if !errors.As(err, &ie) || ie.Attempts < 3 {
		t.Errorf("error %#v: want an *Error with several attempts", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error does not wrap context.DeadlineExceeded: %v", err)
	}
}

func TestCallTimeoutWithoutDeadline(t *testing.T) {
	o := fastOpts(closedPort(t))
	o.CallTimeout = 400 * time.Millisecond
	start := time.Now()
	_, err := New(o).Get(context.Background(), "meta-data/mac")
	if err == nil || time.Since(start) > 800*time.Millisecond {
		t.Fatalf("Get with no deadline: err %v after %v, want an error within ~400ms", err, time.Since(start))
	}
}

func TestClientErrorsNotRetried(t *testing.T) {
	s, url := startIMDS(t, imdsserver.Config{}, "127.0.0.1:0")
	c := New(fastOpts(url))
	ctx := ctxTimeout(t, 5*time.Second)
	_, err := c.Get(ctx, "meta-data/no-such-item")
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	if want := "imds: GET /latest/meta-data/no-such-item via " + url + ": 1 attempt in "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q, want prefix %q", err, want)
	}
	if !strings.HasSuffix(err.Error(), ": HTTP 404 Not Found") {
		t.Errorf("error %q should end with the status", err)
	}
	n := len(s.Requests())
	s.FailNext(1, http.StatusForbidden) // IMDS disabled, or a proxy in the way
	_, err = New(fastOpts(url)).Get(ctx, "meta-data/mac")
	if err == nil || !strings.Contains(err.Error(), "PUT /latest/api/token: HTTP 403 Forbidden") {
		t.Fatalf("err = %v, want the token PUT's 403", err)
	}
	if got := len(s.Requests()) - n; got != 1 {
		t.Errorf("%d requests after the 403, want 1 (no retry)", got)
	}
}

func TestUserData(t *testing.T) {
	s, url := startIMDS(t, imdsserver.Config{}, "127.0.0.1:0")
	c := New(fastOpts(url))
	ctx := ctxTimeout(t, 5*time.Second)
	ud, err := c.UserData(ctx)
	if ud != nil || err != nil {
		t.Fatalf("UserData with none set: %q, %v; want nil, nil", ud, err)
	}
	if err := s.SetUserData([]byte("apiVersion: node.eks.aws/v1alpha1\n")); err != nil {
		t.Fatal(err)
	}
	ud, err = c.UserData(ctx)
	if err != nil || string(ud) != "apiVersion: node.eks.aws/v1alpha1\n" {
		t.Fatalf("UserData: %q, %v", ud, err)
	}
	if err := s.SetUserData([]byte{}); err != nil {
		t.Fatal(err)
	}
	if ud, err = c.UserData(ctx); err != nil || ud == nil || len(ud) != 0 {
		t.Fatalf("empty user data: %q (nil=%v), %v; want empty, non-nil", ud, ud == nil, err)
	}
}

func TestEndpointFallback(t *testing.T) {
	// The second endpoint is the stand-in on IPv6 loopback, as fd00:ec2::254
	// would be on EC2; the first refuses connections, as 169.254.169.254 does
	// on an IPv6-only subnet.
	addr := "[::1]:0"
	if ln, err := net.Listen("tcp", addr); err != nil {
		t.Logf("no IPv6 loopback here (%v); the fallback is tested over IPv4", err)
		addr = "127.0.0.1:0"
	} else {
		ln.Close()
	}
	s, url := startIMDS(t, imdsserver.Config{}, addr)
	bad := closedPort(t)
	c := New(fastOpts(bad, url))
	ctx := ctxTimeout(t, 5*time.Second)
	for range 2 {
		if b, err := c.Get(ctx, "meta-data/instance-id"); err != nil || string(b) != "i-0123456789abcdef0" {
			t.Fatalf("Get through the fallback: %q, %v", b, err)
		}
	}
	for _, tm := range c.Timings() {
		if tm.Endpoint != url || tm.Attempts != 1 {
			t.Errorf("timing %+v: want endpoint %s in one attempt", tm, url)
		}
	}
	if n := len(s.Requests()); n != 3 {
		t.Errorf("%d requests at the stand-in, want 3 (PUT, GET, GET)", n)
	}
}

func TestMetadata(t *testing.T) {
	in := imdsserver.DefaultInstance()
	in.IPv6s = []string{"2600:1f14:abc:1200::10", "2600:1f14:abc:1200:0:0:0:11"}
	_, url := startIMDS(t, imdsserver.Config{Instance: in}, "127.0.0.1:0")
	c := New(fastOpts(url))
	m, err := c.Metadata(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	want := Metadata{
		InstanceID: "i-0123456789abcdef0", InstanceType: "m5.large", LocalIPv4: "10.0.1.23",
		LocalHostname: "ip-10-0-1-23.us-west-2.compute.internal", MAC: "0a:1b:2c:3d:4e:5f",
		AvailabilityZone: "us-west-2a", Region: "us-west-2", AccountID: "111122223333",
		IPv6s: []string{"2600:1f14:abc:1200::10", "2600:1f14:abc:1200::11"},
	}
	if len(m.IdentityDocument) == 0 {
		t.Error("IdentityDocument is empty")
	}
	got := *m
	got.IdentityDocument = nil
	if !equalMetadata(got, want) {
		t.Errorf("Metadata:\n got %+v\nwant %+v", got, want)
	}
	if n := len(c.Timings()); n != 9 {
		t.Errorf("%d timed calls, want 9", n)
	}
}

func equalMetadata(a, b Metadata) bool {
	return slices.Equal(a.IPv6s, b.IPv6s) && func() bool { a.IPv6s, b.IPv6s = nil, nil; return true }() &&
		a.InstanceID == b.InstanceID && a.InstanceType == b.InstanceType && a.LocalIPv4 == b.LocalIPv4 &&
		a.LocalHostname == b.LocalHostname && a.MAC == b.MAC && a.AvailabilityZone == b.AvailabilityZone &&
		a.Region == b.Region && a.AccountID == b.AccountID
}

func TestMetadataOptionalAndRequired(t *testing.T) {
	in := imdsserver.DefaultInstance()
	in.LocalIPv4 = "" // IPv6-only instance: no local-ipv4, no ipv6s listed either
	_, url := startIMDS(t, imdsserver.Config{Instance: in}, "127.0.0.1:0")
	m, err := New(fastOpts(url)).Metadata(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatalf("Metadata without local-ipv4: %v", err)
	}
	if m.LocalIPv4 != "" || m.IPv6s != nil {
		t.Errorf("LocalIPv4 %q, IPv6s %q; want both empty", m.LocalIPv4, m.IPv6s)
	}

	in = imdsserver.DefaultInstance()
	in.InstanceType = ""
	_, url = startIMDS(t, imdsserver.Config{Instance: in}, "127.0.0.1:0")
	_, err = New(fastOpts(url)).Metadata(ctxTimeout(t, 5*time.Second))
	if err == nil || !strings.Contains(err.Error(), "GET /latest/meta-data/instance-type") || !errors.Is(err, ErrNotFound) {
		t.Fatalf("Metadata without instance-type: err = %v, want a 404 naming the path", err)
	}
}

func TestMetadataUnreachableIsOneError(t *testing.T) {
	_, err := New(fastOpts(closedPort(t))).Metadata(ctxTimeout(t, 300*time.Millisecond))
	if err == nil || strings.Count(err.Error(), "imds: GET") != 1 || !strings.Contains(err.Error(), "meta-data/mac") {
		t.Fatalf("err = %v, want one error about meta-data/mac", err)
	}
}

func TestBackoffBounds(t *testing.T) {
	c := New(Options{BackoffBase: 100 * time.Millisecond, BackoffMax: time.Second})
	for attempt, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond,
		4: 800 * time.Millisecond, 5: time.Second, 40: time.Second} {
		for range 100 {
			if d := c.backoff(attempt); d < want/2 || d > want {
				t.Fatalf("backoff(%d) = %v, want in [%v, %v]", attempt, d, want/2, want)
			}
		}
	}
}

func TestAllEndpointsUnreachableNamesEach(t *testing.T) {
	a, b := closedPort(t), closedPort(t)
	// Closed ports refuse at once, so the deadline only bounds the retries;
	// at 300 ms a loaded host (a -race run beside a TCG guest) spent it all
	// on the first endpoint, and the error named only that one.
	_, err := New(fastOpts(a, b)).Get(ctxTimeout(t, 3*time.Second), "user-data")
	if err == nil {
		t.Fatal("Get succeeded with no IMDS")
	}
	msg := err.Error()
	for _, want := range []string{"imds: GET /latest/user-data via " + a + ", then " + b + ": ",
		strings.TrimPrefix(a, "http://") + ": connect: connection refused; ",
		strings.TrimPrefix(b, "http://") + ": connect: connection refused"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	t.Log(msg)
}

func TestHungIMDSEndsAtDeadline(t *testing.T) {
	s, url := startIMDS(t, imdsserver.Config{}, "127.0.0.1:0")
	s.DelayNext(1000, time.Minute)
	start := time.Now()
	_, err := New(fastOpts(url)).Get(ctxTimeout(t, time.Second), "meta-data/instance-id")
	if took := time.Since(start); took > 1500*time.Millisecond {
		t.Errorf("returned after %v, want within the 1s deadline (+500ms slack)", took)
	}
	if err == nil || !strings.Contains(err.Error(), "no answer within 300ms") || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want one saying no answer came within the attempt timeout", err)
	}
	t.Log(err)
}

// BenchmarkMetadata measures a boot's IMDS phase against the stand-in on
// loopback: a fresh client (token PUT included) reading everything Metadata
// reads.
func BenchmarkMetadata(b *testing.B) {
	s, err := imdsserver.New(imdsserver.Config{Instance: imdsserver.DefaultInstance()})
	if err != nil {
		b.Fatal(err)
	}
	url, stop, err := s.Start("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	ctx := context.Background()
	for b.Loop() {
		c := New(Options{Endpoints: []string{url}})
		if _, err := c.Metadata(ctx); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}

// A client that polls for the node's life keeps no call records.
func TestNoTimings(t *testing.T) {
	_, url := startIMDS(t, imdsserver.Config{}, "127.0.0.1:0")
	opts := fastOpts(url)
	opts.NoTimings = true
	c := New(opts)
	for range 5 {
		if _, err := c.Get(context.Background(), "meta-data/instance-id"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Get(context.Background(), "meta-data/spot/instance-action"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("want a 404, got %v", err)
		}
	}
	if tm := c.Timings(); len(tm) != 0 {
		t.Errorf("NoTimings client recorded %d calls", len(tm))
	}
}
