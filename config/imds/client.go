// Package imds is berth's client for the EC2 Instance Metadata Service. It
// speaks IMDSv2 only (session token from PUT /latest/api/token, sent on every
// GET, refreshed before it expires), retries transient failures with jittered
// exponential backoff under the caller's one deadline, and falls back from
// the IPv4 endpoint to the IPv6 one when IPv4 cannot be reached. IMDS is the
// only remote endpoint berth talks to at boot, so every error says which path,
// which endpoint, how many attempts and why.
package imds

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The endpoints EC2 serves IMDS on. IPv6 is only there on Nitro instances
// with the IPv6 endpoint enabled, hence second.
const (
	EndpointIPv4 = "http://169.254.169.254"
	EndpointIPv6 = "http://[fd00:ec2::254]"
)

const (
	tokenPath   = "/latest/api/token"
	tokenOp     = http.MethodPut + " " + tokenPath
	ttlHeader   = "X-aws-ec2-metadata-token-ttl-seconds"
	tokenHeader = "X-aws-ec2-metadata-token"

	// DefaultTokenTTL is the longest TTL EC2 grants.
	DefaultTokenTTL       = 6 * time.Hour
	defaultAttemptTimeout = 2 * time.Second
	defaultConnectTimeout = time.Second
	defaultCallTimeout    = 60 * time.Second
	defaultBackoffBase    = 100 * time.Millisecond
	defaultBackoffMax     = 2 * time.Second
	// finalAttemptWindow is the time left for the last attempt before the
	// deadline; IMDS is one link-local hop away, so it answers well within it.
	finalAttemptWindow = 50 * time.Millisecond
)

// Bounds on what is read from one answer, so a broken IMDS (or whatever
// answers in its place) cannot fill PID 1's memory. A longer answer is an
// error naming the path and the limit, never silently cut.
const (
	// MaxUserDataSize bounds /latest/user-data: EC2 refuses user data over
	// 16 KiB at launch (and userdata.MaxUserDataSize holds decoding to the
	// same), so a longer answer is not user data.
	MaxUserDataSize = 16 << 10
	// MaxMetadataSize bounds every other answer: the token, meta-data
	// leaves and listings, the identity document, role credentials. The
	// largest real one, the identity document, is under 1 KiB.
	MaxMetadataSize = 64 << 10
)

// userDataPath is the one path held to MaxUserDataSize.
const userDataPath = "/latest/user-data"

// tokenHint says what to check when the token PUT gets no answer. IMDS
// drops a PUT response whose IP hop limit runs out, which is what a hop
// limit of 1 looks like from inside a container, and a disabled endpoint
// or a broken proxy looks the same; the GET that needed the token never
// went out.
const tokenHint = "check the instance's metadata options: " +
	"HttpPutResponseHopLimit (2 or more when berth runs in a container), HttpTokens and HttpEndpoint " +
	"(aws ec2 describe-instances --query 'Reservations[].Instances[].MetadataOptions')"

// ErrNotFound is wrapped by errors for a path IMDS answers 404 to.
var ErrNotFound = errors.New("not found")

// Options configure a Client. The zero value talks to EC2's real endpoints.
type Options struct {
	// Endpoints are tried in order; a later one is used only when the
	// earlier ones cannot be connected to. Default: EndpointIPv4, EndpointIPv6.
	// The kernel command line's berth.imds= sets a single one for tests.
	Endpoints []string
	// HTTPClient defaults to one that never uses a proxy and gives up a
	// connect after 1s. Its Timeout should be zero: AttemptTimeout applies.
	// Whatever its CheckRedirect, the client never follows a redirect.
	HTTPClient *http.Client
	Logger     *slog.Logger
	// TokenTTL is asked for on the token PUT; default DefaultTokenTTL. EC2
	// accepts 1s to 6h.
	TokenTTL time.Duration
	// Clock decides token expiry; default time.Now.
	Clock func() time.Time
	// AttemptTimeout bounds one request, so a hung answer is retried rather
	// than waited on; default 2s.
	AttemptTimeout time.Duration
	// CallTimeout bounds a call whose context has no deadline; default 60s.
	CallTimeout time.Duration
	// BackoffBase and BackoffMax shape the retry delays: the n-th retry waits
	// a random time in [d/2, d], d = min(BackoffBase*2^(n-1), BackoffMax).
	BackoffBase, BackoffMax time.Duration
	// NoTimings leaves calls out of Timings: a client that polls for the
	// node's whole life (the lifecycle watcher) would grow the list
	// without bound.
	NoTimings bool
}

// millis is d in ms, to the microsecond.
func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// CallTiming is the record of one Get, for the boot report.
type CallTiming struct {
	Path     string `json:"path"`
	Endpoint string `json:"endpoint"`
	Attempts int    `json:"attempts"`
	// DurationMs is the whole Get, retries included, in ms.
	DurationMs float64 `json:"durationMs"`
	Status     int     `json:"status,omitempty"`
	Err        string  `json:"err,omitempty"`
}

// Client reads instance metadata. It is safe for concurrent use.
type Client struct {
	opts   Options
	http   *http.Client
	logger *slog.Logger
	clock  func() time.Time

	// tokenSem serialises token fetches so concurrent Gets share one PUT; a
	// channel rather than a mutex so a waiter still honours its deadline.
	tokenSem chan struct{}

	mu        sync.Mutex
	token     string
	tokenEP   string
	tokenExp  time.Time // when to stop using the token (before its real expiry)
	preferred int       // index of the endpoint that last answered
	timings   []CallTiming
}

// New returns a client with opts' zero fields filled with defaults.
func New(opts Options) *Client {
	if len(opts.Endpoints) == 0 {
		opts.Endpoints = []string{EndpointIPv4, EndpointIPv6}
	}
	eps := make([]string, len(opts.Endpoints))
	for i, e := range opts.Endpoints {
		eps[i] = strings.TrimRight(e, "/")
	}
	opts.Endpoints = eps
	if opts.TokenTTL <= 0 {
		opts.TokenTTL = DefaultTokenTTL
	}
	if opts.TokenTTL < time.Second {
		opts.TokenTTL = time.Second
	}
	if opts.AttemptTimeout <= 0 {
		opts.AttemptTimeout = defaultAttemptTimeout
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = defaultCallTimeout
	}
	if opts.BackoffBase <= 0 {
		opts.BackoffBase = defaultBackoffBase
	}
	if opts.BackoffMax <= 0 {
		opts.BackoffMax = defaultBackoffMax
	}
	c := &Client{opts: opts, logger: opts.Logger, clock: opts.Clock, tokenSem: make(chan struct{}, 1)}
	if opts.HTTPClient != nil {
		// A copy, so the caller's client keeps its own redirect policy.
		hc := *opts.HTTPClient
		hc.CheckRedirect = noRedirect
		c.http = &hc
	} else {
		c.http = defaultHTTPClient()
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	if c.clock == nil {
		c.clock = time.Now
	}
	return c
}

func defaultHTTPClient() *http.Client {
	d := &net.Dialer{Timeout: defaultConnectTimeout}
	return &http.Client{
		Transport: &http.Transport{
			// IMDS is link-local: an HTTP_PROXY from the environment must
			// never see it (and EC2 refuses proxied token requests anyway).
			Proxy:               nil,
			DialContext:         d.DialContext,
			MaxIdleConnsPerHost: 8,
			IdleConnTimeout:     30 * time.Second,
		},
		CheckRedirect: noRedirect,
	}
}

// noRedirect hands a redirect back as the answer, which send refuses:
// IMDS never redirects, and following one would send the session token
// (or the request for credentials) wherever it points.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Error is a failed IMDS call.
type Error struct {
	Method   string
	Path     string // as sent, e.g. /latest/meta-data/instance-id
	Endpoint string // the last endpoint tried
	Attempts int
	Elapsed  time.Duration
	// Request is the request whose failure ended the call: Method and
	// Path, or "PUT /latest/api/token" when the session token could not
	// be had, in which case the GET never went out.
	Request string
	// Status is the last HTTP status, 0 when no answer came.
	Status int
	Err    error
}

func (e *Error) Error() string {
	n := "attempts"
	if e.Attempts == 1 {
		n = "attempt"
	}
	var failed string
	if e.Request != "" && e.Request != e.Method+" "+e.Path {
		failed = "the session-token request failed: " // Err names it
	}
	return fmt.Sprintf("imds: %s %s via %s: %d %s in %s: %s%v", e.Method, e.Path, e.Endpoint, e.Attempts, n,
		e.Elapsed.Round(time.Millisecond), failed, e.Err)
}

// tokenError marks a failure to get the session token, so that Get can
// say the GET itself never went out. Its text already names the PUT.
type tokenError struct{ err error }

func (e *tokenError) Error() string { return e.err.Error() }
func (e *tokenError) Unwrap() error { return e.err }

// redirectError is a 3xx answer, which IMDS never gives.
type redirectError struct {
	op       string
	status   int
	location string
}

func (e *redirectError) Error() string {
	loc := e.location
	if loc == "" {
		loc = "(no Location)"
	}
	return fmt.Sprintf("%sHTTP %d %s, a redirect to %s: IMDS never redirects, so it is not followed", opPrefix(e.op),
		e.status, http.StatusText(e.status), loc)
}

func (e *Error) Unwrap() error { return e.Err }

// statusError is an HTTP answer that was not 200.
type statusError struct {
	op     string
	status int
	body   string
}

func (e *statusError) Error() string {
	s := fmt.Sprintf("HTTP %d %s", e.status, http.StatusText(e.status))
	if e.op != "" {
		s = e.op + ": " + s
	}
	if e.body != "" && e.body != fmt.Sprintf("%d - %s", e.status, http.StatusText(e.status)) {
		s += ": " + e.body
	}
	return s
}

func (e *statusError) Is(target error) bool {
	return target == ErrNotFound && e.status == http.StatusNotFound
}

// Get reads path, relative to /latest/ ("meta-data/instance-id",
// "dynamic/instance-identity/document", "user-data"; a leading "/latest/" is
// accepted too). A 404 gives an error that wraps ErrNotFound.
func (c *Client) Get(ctx context.Context, path string) ([]byte, error) {
	full := "/latest/" + strings.TrimPrefix(strings.TrimPrefix(path, "/"), "latest/")
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.CallTimeout)
		defer cancel()
	}
	wall := time.Now()
	var (
		attempts int
		last     error
		lastEP   string
		status   int
		reauthed bool
		// cause and causeEP are the last failure that says more than "the
		// deadline passed", so the final error can still say why.
		cause   error
		causeEP string
	)
	for {
		attempts++
		var body []byte
		var retry bool
		body, status, lastEP, retry, last = c.attempt(ctx, full, &reauthed)
		if last == nil {
			c.record(CallTiming{Path: full, Endpoint: lastEP, Attempts: attempts, DurationMs: millis(time.Since(wall)), Status: status})
			return body, nil
		}
		if !retry {
			break
		}
		if err := ctx.Err(); err != nil {
			if errors.Is(last, err) && cause != nil {
				// This attempt only says the deadline passed; the one before
				// says why IMDS was not answering.
				last, lastEP = fmt.Errorf("%w (%w)", cause, err), causeEP
			}
			break
		}
		cause, causeEP = last, lastEP
		delay := c.backoff(attempts)
		if dl, ok := ctx.Deadline(); ok {
			// Keep a last attempt just before the deadline (the network may
			// only just have come up), but do not sleep into the deadline:
			// that would only end in ctx.Err().
			remaining := time.Until(dl)
			if remaining <= finalAttemptWindow {
				last = fmt.Errorf("%w (%w before the next retry)", last, context.DeadlineExceeded)
				break
			}
			delay = min(delay, remaining-finalAttemptWindow)
		}
		c.logger.Debug("imds retry", "path", full, "endpoint", lastEP, "attempt", attempts, "delay", delay, "err", last)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
			continue
		case <-ctx.Done():
			t.Stop()
		}
		break
	}
	if err := ctx.Err(); err != nil && !errors.Is(last, err) {
		last = fmt.Errorf("%w (%w)", last, err)
	}
	request := http.MethodGet + " " + full
	if te := (*tokenError)(nil); errors.As(last, &te) {
		request = tokenOp
	}
	err := &Error{Method: http.MethodGet, Path: full, Endpoint: lastEP, Attempts: attempts, Elapsed: time.Since(wall),
		Request: request, Status: status, Err: last}
	c.record(CallTiming{Path: full, Endpoint: lastEP, Attempts: attempts, DurationMs: millis(err.Elapsed), Status: status, Err: last.Error()})
	return nil, err
}

// attempt makes one try at path: through each endpoint in turn, starting at
// the one that last answered, moving on only when an endpoint cannot be
// connected to. It returns whether a failure is worth retrying.
func (c *Client) attempt(ctx context.Context, path string, reauthed *bool) (body []byte, status int, ep string, retry bool, err error) {
	eps := c.opts.Endpoints
	c.mu.Lock()
	first := c.preferred
	c.mu.Unlock()
	var tried []string
	var causes []string
	allToken := true // whether every endpoint failed at the token PUT
	for i := range eps {
		idx := (first + i) % len(eps)
		ep = eps[idx]
		body, status, retry, err = c.attemptEndpoint(ctx, ep, path, reauthed)
		if err != nil && isConnectError(err) && ctx.Err() == nil {
			c.logger.Debug("imds endpoint unreachable", "endpoint", ep, "err", err)
			tried, causes = append(tried, ep), append(causes, err.Error())
			var te *tokenError
			allToken = allToken && errors.As(err, &te)
			continue
		}
		if status != 0 {
			c.mu.Lock()
			c.preferred = idx
			c.mu.Unlock()
		}
		return body, status, ep, retry, err
	}
	if len(tried) > 1 {
		// Every endpoint refused: name them all, each with its own cause.
		err = errors.New(strings.Join(causes, "; "))
		if allToken {
			err = &tokenError{err}
		}
		return nil, 0, strings.Join(tried, ", then "), true, err
	}
	return nil, 0, ep, true, err
}

func (c *Client) attemptEndpoint(ctx context.Context, ep, path string, reauthed *bool) ([]byte, int, bool, error) {
	for {
		tok, status, err := c.getToken(ctx, ep)
		if err != nil {
			return nil, status, retryable(status, err), &tokenError{err}
		}
		limit := MaxMetadataSize
		if path == userDataPath {
			limit = MaxUserDataSize
		}
		body, status, err := c.roundTrip(ctx, http.MethodGet, ep+path, tok, limit)
		if status == http.StatusUnauthorized && !*reauthed {
			// The token expired early or IMDS restarted: get a new one, once.
			*reauthed = true
			c.dropToken(tok)
			continue
		}
		return body, status, retryable(status, err), err
	}
}

func retryable(status int, err error) bool {
	if err == nil {
		return false
	}
	if status == 0 {
		return true // no answer: connection error or timeout
	}
	return status >= 500 || status == http.StatusTooManyRequests
}

// getToken returns a token for ep that will still be valid for a while,
// fetching a new one when needed.
func (c *Client) getToken(ctx context.Context, ep string) (string, int, error) {
	select {
	case c.tokenSem <- struct{}{}:
		defer func() { <-c.tokenSem }()
	case <-ctx.Done():
		return "", 0, fmt.Errorf("%s: waiting for another call's token request: %w", tokenOp, ctx.Err())
	}
	c.mu.Lock()
	tok, tokEP, exp := c.token, c.tokenEP, c.tokenExp
	c.mu.Unlock()
	if tok != "" && tokEP == ep && c.clock().Before(exp) {
		return tok, http.StatusOK, nil
	}
	ttlSecs := int(c.opts.TokenTTL / time.Second)
	req, err := http.NewRequest(http.MethodPut, ep+tokenPath, nil)
	if err != nil {
		return "", 0, fmt.Errorf("PUT %s: building the request: %w", tokenPath, err)
	}
	req.Header.Set(ttlHeader, strconv.Itoa(ttlSecs))
	issued := c.clock()
	body, status, resp, err := c.send(ctx, req, tokenOp, MaxMetadataSize)
	if err != nil {
		return "", status, err
	}
	tok = strings.TrimSpace(string(body))
	if tok == "" {
		return "", status, fmt.Errorf("PUT %s: empty token", tokenPath)
	}
	// Trust the TTL the server granted over the one asked for.
	granted := ttlSecs
	if v, err := strconv.Atoi(resp.Header.Get(ttlHeader)); err == nil && v > 0 {
		granted = v
	}
	ttl := time.Duration(granted) * time.Second
	// Refresh with a tenth of the TTL (at most a minute) to spare, so a token
	// never expires between our check and IMDS's.
	margin := min(ttl/10, time.Minute)
	c.mu.Lock()
	c.token, c.tokenEP, c.tokenExp = tok, ep, issued.Add(ttl-margin)
	c.mu.Unlock()
	c.logger.Debug("imds token acquired", "endpoint", ep, "ttl", ttl)
	return tok, status, nil
}

func (c *Client) dropToken(tok string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token == tok {
		c.token = ""
	}
}

// roundTrip sends the GET a call is for. Its errors do not name the
// request: the Error around them does.
func (c *Client) roundTrip(ctx context.Context, method, u, tok string, limit int) ([]byte, int, error) {
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("building request for %s: %w", u, err)
	}
	req.Header.Set(tokenHeader, tok)
	body, status, _, err := c.send(ctx, req, "", limit)
	return body, status, err
}

// send does one HTTP exchange under the per-attempt timeout and reads the
// body, at most limit bytes of it. op names the request in errors ("PUT
// /latest/api/token"); "" for the GET a call is for, which the Error names.
func (c *Client) send(ctx context.Context, req *http.Request, op string, limit int) ([]byte, int, *http.Response, error) {
	actx, cancel := context.WithTimeout(ctx, c.opts.AttemptTimeout)
	defer cancel()
	resp, err := c.http.Do(req.WithContext(actx))
	if err != nil {
		return nil, 0, nil, c.transportError(ctx, actx, op, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return nil, resp.StatusCode, nil, &redirectError{op: op, status: resp.StatusCode, location: resp.Header.Get("Location")}
	}
	if resp.StatusCode != http.StatusOK {
		// Only a summary is kept, so a long error page is cut, not refused.
		body, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)))
		if err != nil {
			return nil, 0, nil, c.transportError(ctx, actx, op, err)
		}
		return nil, resp.StatusCode, resp, &statusError{op: op, status: resp.StatusCode, body: errorSummary(body)}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
	if err != nil {
		return nil, 0, nil, c.transportError(ctx, actx, op, err)
	}
	if len(body) > limit {
		return nil, resp.StatusCode, nil, fmt.Errorf("%sthe answer is over the %d-byte limit (%s)", opPrefix(op), limit, limitName(req.URL.Path))
	}
	return body, resp.StatusCode, resp, nil
}

// limitName names the limit an answer from path is held to, for errors.
func limitName(path string) string {
	if path == userDataPath {
		return "imds.MaxUserDataSize: EC2 allows at most 16 KiB of user data"
	}
	return "imds.MaxMetadataSize"
}

// transportError drops url.Error's repetition of the URL (the Error already
// names path and endpoint), names a per-attempt timeout as one, and names
// the request op when it is not the call's own GET. A token PUT with no
// answer gets tokenHint.
func (c *Client) transportError(ctx, actx context.Context, op string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	noAnswer := !isConnectError(err)
	if cerr := ctx.Err(); cerr != nil {
		// The caller's deadline, not this attempt's.
		switch {
		case op == tokenOp && noAnswer && errors.Is(cerr, context.DeadlineExceeded):
			return fmt.Errorf("%s: no answer before the deadline (%w): %s", op, cerr, tokenHint)
		case op != "":
			return fmt.Errorf("%s: %w", op, cerr)
		}
		return cerr
	}
	if errors.Is(actx.Err(), context.DeadlineExceeded) && noAnswer {
		if op == tokenOp {
			return fmt.Errorf("%s: no answer within %s: %s", op, c.opts.AttemptTimeout, tokenHint)
		}
		return fmt.Errorf("%sno answer within %s", opPrefix(op), c.opts.AttemptTimeout)
	}
	if op != "" {
		return fmt.Errorf("%s: %w", op, err)
	}
	return err
}

// isConnectError says the endpoint could not be reached at all, which is
// when the next endpoint is worth a try.
func isConnectError(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENETUNREACH) ||
		errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.EADDRNOTAVAIL)
}

// errorSummary keeps an error body short: IMDS answers errors with an XHTML
// page whose <title> says it all.
func errorSummary(b []byte) string {
	s := string(b)
	if i := strings.Index(s, "<title>"); i >= 0 {
		if j := strings.Index(s[i:], "</title>"); j >= 0 {
			return strings.TrimSpace(s[i+len("<title>") : i+j])
		}
	}
	s = strings.TrimSpace(s)
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return s
}

func (c *Client) backoff(attempt int) time.Duration {
	d := c.opts.BackoffBase
	for i := 1; i < attempt && d < c.opts.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, c.opts.BackoffMax)
	half := d / 2
	return half + rand.N(d-half+1)
}

func (c *Client) record(t CallTiming) {
	if c.opts.NoTimings {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timings = append(c.timings, t)
}

// Close drops the client's idle connections to IMDS; the client stays
// usable. Call it when done, so a long-running PID 1 holds no sockets open.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Timings returns every call made so far, in the order they finished.
func (c *Client) Timings() []CallTiming {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]CallTiming(nil), c.timings...)
}

// UserData returns the instance's user data, or nil, nil when it has none.
func (c *Client) UserData(ctx context.Context) ([]byte, error) {
	b, err := c.Get(ctx, "user-data")
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

func opPrefix(op string) string {
	if op == "" {
		return ""
	}
	return op + ": "
}
