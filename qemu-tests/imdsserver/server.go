// Package imdsserver is a stand-in for the EC2 Instance Metadata Service that
// speaks IMDSv2 the way EC2 does: session tokens from PUT /latest/api/token,
// 401 without one, 400 for a bad TTL, 403 for proxied token requests, and
// category listings with "/" on sub-categories. Unit tests, host tests and
// QEMU tests all run it (a QEMU guest reaches the host's loopback at
// 10.0.2.2); it also offers fault injection and a request log so tests can
// check what a client actually did.
package imdsserver

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The header names and limits of the IMDSv2 protocol.
const (
	TokenPath      = "/latest/api/token"
	TTLHeader      = "X-aws-ec2-metadata-token-ttl-seconds"
	TokenHeader    = "X-aws-ec2-metadata-token"
	MaxTokenTTL    = 21600
	forwardedFor   = "X-Forwarded-For"
	maxLiveTokens  = 5000
	latestPrefix   = "/latest/"
	requestLogSize = 10000
)

// Config is what the stand-in serves and how strictly.
type Config struct {
	Instance Instance
	// UserData is served at /latest/user-data; nil means none (404).
	UserData []byte
	// TokensOptional is IMDS's "optional" mode (IMDSv1 allowed). The default,
	// false, is "required": a GET without a token gets 401.
	TokensOptional bool
	// Clock decides token expiry; nil means time.Now.
	Clock func() time.Time
	// Logger gets one debug line per request; nil discards.
	Logger *slog.Logger
}

// Request is one entry in the request log.
type Request struct {
	Method string
	Path   string
	// TokenPresent says the request carried X-aws-ec2-metadata-token.
	TokenPresent bool
	Status       int
}

// Server is the stand-in. It is an http.Handler; Start serves it on a port.
type Server struct {
	cfg    Config
	clock  func() time.Time
	logger *slog.Logger

	mu        sync.Mutex
	tree      *tree
	userData  []byte
	notices   Notices
	tokens    map[string]time.Time // token → expiry
	failLeft  int
	failCode  int
	delayLeft int
	delay     time.Duration
	log       []Request
	faults    faultState // SetFault's switch (fault.go)
}

// New returns a stand-in serving cfg. It fails only when cfg describes a tree
// EC2 could not serve (a role name with a '/').
func New(cfg Config) (*Server, error) {
	t, err := buildTree(cfg.Instance, cfg.UserData, Notices{})
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, clock: cfg.Clock, logger: cfg.Logger, tree: t, userData: cfg.UserData,
		tokens: map[string]time.Time{}}
	if s.clock == nil {
		s.clock = time.Now
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// SetUserData replaces the user data; nil removes it (404).
func (s *Server) SetUserData(b []byte) error {
	return s.rebuild(func(ud *[]byte, _ *Notices) { *ud = b })
}

// SetSpotAction makes spot/instance-action answer as EC2 does once a spot
// instance is marked for interruption: {"action":"terminate","time":...}.
// action is terminate, stop or hibernate; "" withdraws the notice (404).
func (s *Server) SetSpotAction(action string, at time.Time) error {
	switch action {
	case "", "terminate", "stop", "hibernate":
	default:
		return fmt.Errorf("imdsserver: spot action %q: EC2 gives terminate, stop or hibernate", action)
	}
	return s.rebuild(func(_ *[]byte, n *Notices) { n.SpotAction, n.SpotTime = action, at })
}

// SetRebalance makes events/recommendations/rebalance answer
// {"noticeTime":...}; the zero time withdraws it (404).
func (s *Server) SetRebalance(noticeTime time.Time) error {
	return s.rebuild(func(_ *[]byte, n *Notices) { n.Rebalance = noticeTime })
}

// SetLifecycleState sets autoscaling/target-lifecycle-state (InService,
// Terminated, Warmed:Stopped...); "" means the instance is in no Auto
// Scaling group (404).
func (s *Server) SetLifecycleState(state string) error {
	if strings.ContainsAny(state, "\n\r/") {
		return fmt.Errorf("imdsserver: lifecycle state %q: one word, as EC2 gives", state)
	}
	return s.rebuild(func(_ *[]byte, n *Notices) { n.LifecycleState = state })
}

// rebuild changes the user data or the notices and serves the new tree.
func (s *Server) rebuild(change func(userData *[]byte, n *Notices)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ud, n := s.userData, s.notices
	change(&ud, &n)
	t, err := buildTree(s.cfg.Instance, ud, n)
	if err != nil {
		return err
	}
	s.tree, s.userData, s.notices = t, ud, n
	return nil
}

// FailNext makes the next n requests, of any kind, answer status (500 when 0).
func (s *Server) FailNext(n, status int) {
	if status == 0 {
		status = http.StatusInternalServerError
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failLeft, s.failCode = n, status
}

// DelayNext makes the next n requests wait d before answering (or until the
// client gives up), to model a slow or overloaded IMDS.
func (s *Server) DelayNext(n int, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delayLeft, s.delay = n, d
}

// Requests returns a copy of the request log, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.log...)
}

// ExpireTokens makes every token issued so far invalid, as if their TTL had
// passed.
func (s *Server) ExpireTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.tokens)
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// ServeHTTP answers one IMDS request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	s.serve(rec, r)
	_, hasTok := r.Header[http.CanonicalHeaderKey(TokenHeader)]
	s.mu.Lock()
	if len(s.log) < requestLogSize {
		s.log = append(s.log, Request{Method: r.Method, Path: r.URL.Path, TokenPresent: hasTok, Status: rec.status})
	}
	s.mu.Unlock()
	s.logger.Debug("imds request", "method", r.Method, "path", r.URL.Path, "token", hasTok, "status", rec.status)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if s.intercept(w, r) {
		return
	}
	s.mu.Lock()
	var fail int
	if s.failLeft > 0 {
		s.failLeft--
		fail = s.failCode
	}
	var delay time.Duration
	if s.delayLeft > 0 {
		s.delayLeft--
		delay = s.delay
	}
	s.mu.Unlock()
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	if fail != 0 {
		httpError(w, fail)
		return
	}

	if r.URL.Path == TokenPath {
		s.serveToken(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		httpError(w, http.StatusMethodNotAllowed)
		return
	}
	if code := s.checkToken(r); code != 0 {
		httpError(w, code)
		return
	}
	body, ok := s.lookup(r.URL.Path)
	if !ok {
		httpError(w, http.StatusNotFound)
		return
	}
	if strings.HasSuffix(r.URL.Path, "/user-data") {
		w.Header().Set("Content-Type", "application/octet-stream")
	} else {
		w.Header().Set("Content-Type", "text/plain")
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
}

func (s *Server) serveToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPut {
		httpError(w, http.StatusMethodNotAllowed)
		return
	}
	// EC2 refuses token requests that went through a proxy, so an SSRF via
	// an open reverse proxy cannot mint a token.
	if _, ok := r.Header[http.CanonicalHeaderKey(forwardedFor)]; ok {
		httpError(w, http.StatusForbidden)
		return
	}
	raw := r.Header.Get(TTLHeader)
	ttl, err := strconv.Atoi(raw)
	if err != nil || ttl < 1 || ttl > MaxTokenTTL {
		httpError(w, http.StatusBadRequest)
		return
	}
	var b [40]byte
	if _, err := rand.Read(b[:]); err != nil {
		httpError(w, http.StatusInternalServerError)
		return
	}
	tok := base64.RawURLEncoding.EncodeToString(b[:])
	now := s.clock()
	s.mu.Lock()
	for t, exp := range s.tokens {
		if !now.Before(exp) {
			delete(s.tokens, t)
		}
	}
	if len(s.tokens) >= maxLiveTokens {
		s.mu.Unlock()
		httpError(w, http.StatusServiceUnavailable)
		return
	}
	s.tokens[tok] = now.Add(time.Duration(ttl) * time.Second)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set(TTLHeader, strconv.Itoa(ttl))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(tok))
}

// checkToken returns 0 when the request may read metadata, else the status
// to answer. A token that is present but invalid is refused even in optional
// mode, as EC2 does.
func (s *Server) checkToken(r *http.Request) int {
	vals, present := r.Header[http.CanonicalHeaderKey(TokenHeader)]
	if !present {
		if s.cfg.TokensOptional {
			return 0
		}
		return http.StatusUnauthorized
	}
	if len(vals) != 1 {
		return http.StatusUnauthorized
	}
	s.mu.Lock()
	exp, ok := s.tokens[vals[0]]
	s.mu.Unlock()
	if !ok || !s.clock().Before(exp) {
		return http.StatusUnauthorized
	}
	return 0
}

func (s *Server) lookup(path string) ([]byte, bool) {
	if path == "/" {
		return []byte("latest"), true
	}
	if path == "/latest" {
		path = latestPrefix
	}
	rel, ok := strings.CutPrefix(path, latestPrefix)
	if !ok {
		return nil, false
	}
	s.mu.Lock()
	t := s.tree
	s.mu.Unlock()
	if v, ok := t.leaves[rel]; ok {
		return v, true
	}
	// A category answers with or without its trailing slash.
	dir := rel
	if dir != "" && !strings.HasSuffix(dir, "/") {
		dir += "/"
	}
	if entries, ok := t.dirs[dir]; ok {
		return []byte(strings.Join(entries, "\n")), true
	}
	return nil, false
}

// httpError answers like EC2's metadata service: a small XHTML page naming
// the status.
func httpError(w http.ResponseWriter, code int) {
	text := fmt.Sprintf("%d - %s", code, http.StatusText(code))
	w.Header().Set("Content-Type", "text/html")
	w.WriteHeader(code)
	_, _ = fmt.Fprintf(w, `<?xml version="1.0" encoding="iso-8859-1"?>
<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN"
	"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">
<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="en" lang="en">
 <head>
  <title>%s</title>
 </head>
 <body>
  <h1>%s</h1>
 </body>
</html>
`, text, text)
}

// Start serves s on addr ("127.0.0.1:0" picks a free port) and returns its
// base URL and a stop function that shuts the listener down within 5s.
func (s *Server) Start(addr string) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("imdsserver: listening on %s: %w", addr, err)
	}
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("imds stand-in stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			// Close, not Shutdown: a client's spare connection that never sent
			// a request would hold Shutdown for 5s, and a stand-in owes its
			// clients no graceful goodbye.
			_ = hs.Close()
			<-done
		})
	}
	return "http://" + ln.Addr().String(), stop, nil
}
