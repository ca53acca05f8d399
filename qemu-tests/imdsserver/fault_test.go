package imdsserver

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// faultServer starts a stand-in on the loopback and returns it with its URL.
func faultServer(t *testing.T) (*Server, string) {
	t.Helper()
	s, err := New(Config{Instance: DefaultInstance(), UserData: []byte("hello")})
	if err != nil {
		t.Fatal(err)
	}
	url, stop, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return s, url
}

// faultCall sends one request and returns the status (0: no answer), the
// body and the transport error. tok, when set, is sent as the token; a PUT
// asks for a 60 s token.
func faultCall(t *testing.T, timeout time.Duration, method, url, tok string) (int, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if method == http.MethodPut {
		req.Header.Set(TTLHeader, "60")
	}
	if tok != "" {
		req.Header.Set(TokenHeader, tok)
	}
	// A fresh transport each time: a connection the stand-in reset must
	// not be reused, and nothing is pooled between cases.
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

func faultToken(t *testing.T, url string) string {
	t.Helper()
	code, tok, err := faultCall(t, 5*time.Second, http.MethodPut, url+TokenPath, "")
	if err != nil || code != http.StatusOK || tok == "" {
		t.Fatalf("token PUT: %d %q %v", code, tok, err)
	}
	return tok
}

// waitLogged waits for the request log to hold n entries.
func waitLogged(t *testing.T, s *Server, n int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for len(s.Requests()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("request log has %d entries 2 s on, want %d: %+v", len(s.Requests()), n, s.Requests())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func lastLogged(t *testing.T, s *Server) Request {
	t.Helper()
	reqs := s.Requests()
	if len(reqs) == 0 {
		t.Fatal("request log is empty")
	}
	return reqs[len(reqs)-1]
}

// A status fault with a duration answers 500 from the first request it
// touches until For has passed, then the stand-in is healthy again, and
// the stats say when it started, ended and first served cleanly.
func TestFaultStatusForDuration(t *testing.T) {
	s, url := faultServer(t)
	if err := s.SetFault(Fault{Mode: FaultStatus, For: 400 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	// The clock starts at the first request, not at SetFault.
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	code, body, err := faultCall(t, 5*time.Second, http.MethodPut, url+TokenPath, "")
	if err != nil || code != http.StatusInternalServerError || !strings.Contains(body, "500 - Internal Server Error") {
		t.Fatalf("first request under the fault: %d %q %v, want EC2's 500 page", code, body, err)
	}
	var healthyAt time.Time
	for time.Since(start) < 3*time.Second {
		code, _, err = faultCall(t, 5*time.Second, http.MethodPut, url+TokenPath, "")
		if err != nil {
			t.Fatal(err)
		}
		if code == http.StatusOK {
			healthyAt = time.Now()
			break
		}
		if code != http.StatusInternalServerError {
			t.Fatalf("status %d under a 500 fault", code)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if healthyAt.IsZero() {
		t.Fatal("still failing 3 s after a 400 ms fault began")
	}
	if d := healthyAt.Sub(start); d < 400*time.Millisecond || d > 1500*time.Millisecond {
		t.Errorf("healthy again %s after the first request, want about 400 ms", d)
	}
	st := s.FaultStats()
	if st.Hits < 2 || st.FirstHit.Before(start.Add(-time.Second)) || st.Ended.IsZero() || st.FirstClean.Before(st.Ended) {
		t.Errorf("stats after the fault: %+v", st)
	}
	if got := st.Ended.Sub(st.FirstHit); got < 400*time.Millisecond || got > time.Second {
		t.Errorf("fault lasted %s from its first hit, want 400 ms", got)
	}
	if st.Fault.Status != http.StatusInternalServerError {
		t.Errorf("stats fault status %d, want the 500 default", st.Fault.Status)
	}
	// The request log has the 500s, then the 200.
	reqs := s.Requests()
	if reqs[0].Status != 500 || reqs[len(reqs)-1].Status != 200 {
		t.Errorf("request log: %+v", reqs)
	}
	// And it really serves again: a GET with the token works.
	tok := faultToken(t, url)
	if code, body, _ := faultCall(t, 5*time.Second, http.MethodGet, url+"/latest/user-data", tok); code != 200 || body != "hello" {
		t.Errorf("user data after the fault: %d %q", code, body)
	}
}

// A custom status is answered as is, until ClearFault.
func TestFaultStatusCustomUntilCleared(t *testing.T) {
	s, url := faultServer(t)
	if err := s.SetFault(Fault{Mode: FaultStatus, Status: http.StatusServiceUnavailable}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if code, _, _ := faultCall(t, 5*time.Second, http.MethodPut, url+TokenPath, ""); code != 503 {
			t.Fatalf("request %d: %d, want 503", i, code)
		}
	}
	if st := s.FaultStats(); st.Hits != 3 || !st.Ended.IsZero() {
		t.Errorf("stats while on: %+v", st)
	}
	s.ClearFault()
	faultToken(t, url)
	if st := s.FaultStats(); st.Ended.IsZero() || st.FirstClean.IsZero() || st.Hits != 3 {
		t.Errorf("stats after ClearFault: %+v", st)
	}
}

// A delay fault holds every answer, which then comes right; a client that
// gives up first gets nothing and the log says 0.
func TestFaultDelay(t *testing.T) {
	s, url := faultServer(t)
	if err := s.SetFault(Fault{Mode: FaultDelay, Delay: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	tok := faultToken(t, url)
	code, body, err := faultCall(t, 5*time.Second, http.MethodGet, url+"/latest/user-data", tok)
	took := time.Since(start)
	if err != nil || code != 200 || body != "hello" {
		t.Fatalf("GET under a delay: %d %q %v", code, body, err)
	}
	if took < 600*time.Millisecond || took > 3*time.Second {
		t.Errorf("two delayed requests took %s, want about 600 ms", took)
	}
	_, _, err = faultCall(t, 100*time.Millisecond, http.MethodGet, url+"/latest/user-data", tok)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a client with a 100 ms timeout: %v, want its deadline", err)
	}
	// The handler notices the client left and logs no answer.
	deadline := time.Now().Add(2 * time.Second)
	for lastLogged(t, s).Status != 0 || len(s.Requests()) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("request log after the client gave up: %+v", s.Requests())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := s.FaultStats(); st.Hits != 3 {
		t.Errorf("hits %d, want 3", st.Hits)
	}
}

// A delay cut short: ClearFault answers the held request at once.
func TestFaultDelayEndsWithFault(t *testing.T) {
	s, url := faultServer(t)
	if err := s.SetFault(Fault{Mode: FaultDelay, Delay: time.Hour, For: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	faultToken(t, url)
	if took := time.Since(start); took < 250*time.Millisecond || took > 3*time.Second {
		t.Errorf("an hour's delay with a 300 ms fault answered after %s", took)
	}
}

// token-403 refuses new tokens only: a token got before still reads
// metadata, and once cleared new tokens come again.
func TestFaultTokenForbidden(t *testing.T) {
	s, url := faultServer(t)
	old := faultToken(t, url)
	if err := s.SetFault(Fault{Mode: FaultTokenForbidden}); err != nil {
		t.Fatal(err)
	}
	code, body, err := faultCall(t, 5*time.Second, http.MethodPut, url+TokenPath, "")
	if err != nil || code != http.StatusForbidden || !strings.Contains(body, "403 - Forbidden") {
		t.Fatalf("token PUT under token-403: %d %q %v", code, body, err)
	}
	if code, body, _ := faultCall(t, 5*time.Second, http.MethodGet, url+"/latest/meta-data/instance-id", old); code != 200 || body != DefaultInstance().InstanceID {
		t.Errorf("GET with an earlier token: %d %q", code, body)
	}
	if st := s.FaultStats(); st.Hits != 1 {
		t.Errorf("hits %d, want 1 (the GET is not the fault's)", st.Hits)
	}
	s.ClearFault()
	faultToken(t, url)
}

// A hang answers nothing until the client gives up (the log says 0); a
// request held when the fault is switched off is answered normally.
func TestFaultHang(t *testing.T) {
	s, url := faultServer(t)
	if err := s.SetFault(Fault{Mode: FaultHang}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, _, err := faultCall(t, 300*time.Millisecond, http.MethodPut, url+TokenPath, "")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("PUT under a hang: %v, want the client's deadline", err)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("gave up after %s", took)
	}
	deadline := time.Now().Add(2 * time.Second)
	for len(s.Requests()) < 1 || lastLogged(t, s).Status != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("request log after a hang: %+v", s.Requests())
		}
		time.Sleep(10 * time.Millisecond)
	}
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		code, _, err := faultCall(t, 10*time.Second, http.MethodPut, url+TokenPath, "")
		done <- result{code, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("answered under a hang: %+v", r)
	case <-time.After(300 * time.Millisecond):
	}
	s.ClearFault()
	select {
	case r := <-done:
		if r.err != nil || r.code != 200 {
			t.Errorf("held request after ClearFault: %+v", r)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("held request not answered 3 s after ClearFault")
	}
	if st := s.FaultStats(); st.Hits != 2 || st.Ended.IsZero() {
		t.Errorf("stats: %+v", st)
	}
}

// A drop resets the connection: the client gets a transport error and no
// answer, the log says 0, and the next request after the fault is served.
func TestFaultDrop(t *testing.T) {
	s, url := faultServer(t)
	if err := s.SetFault(Fault{Mode: FaultDrop, For: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code, _, err := faultCall(t, 5*time.Second, http.MethodPut, url+TokenPath, "")
	if err == nil || code != 0 {
		t.Fatalf("PUT under a drop: %d %v, want no answer", code, err)
	}
	if time.Since(start) > 2*time.Second {
		t.Errorf("a drop took %s: it should fail fast", time.Since(start))
	}
	// The log entry is made once the handler returns, which may be just
	// after the client saw the reset.
	waitLogged(t, s, 1)
	if r := lastLogged(t, s); r.Status != 0 || r.Path != TokenPath {
		t.Errorf("logged %+v, want the token PUT with status 0", r)
	}
	time.Sleep(400 * time.Millisecond)
	faultToken(t, url)
	if st := s.FaultStats(); st.Hits != 1 || st.FirstClean.IsZero() {
		t.Errorf("stats: %+v", st)
	}
}

// SetFault refuses what it cannot do; an empty Mode clears.
func TestSetFaultValidates(t *testing.T) {
	s, url := faultServer(t)
	for _, f := range []Fault{
		{Mode: "flaky"},
		{Mode: FaultDelay},
		{Mode: FaultStatus, Status: 99},
		{Mode: FaultStatus, Status: 600},
		{Mode: FaultHang, For: -time.Second},
	} {
		if err := s.SetFault(f); err == nil {
			t.Errorf("SetFault(%+v) accepted", f)
		}
	}
	faultToken(t, url) // none of them took effect
	if err := s.SetFault(Fault{Mode: FaultStatus}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetFault(Fault{}); err != nil {
		t.Fatal(err)
	}
	faultToken(t, url)
}

// A new fault replaces the old one at once, and the old one's For timer
// does not end the new one.
func TestSetFaultReplaces(t *testing.T) {
	s, url := faultServer(t)
	if err := s.SetFault(Fault{Mode: FaultStatus, For: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := faultCall(t, 5*time.Second, http.MethodPut, url+TokenPath, ""); code != 500 {
		t.Fatalf("status %d, want 500", code)
	}
	if err := s.SetFault(Fault{Mode: FaultTokenForbidden}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond) // past the first fault's For
	if code, _, _ := faultCall(t, 5*time.Second, http.MethodPut, url+TokenPath, ""); code != 403 {
		t.Fatalf("status %d after the replaced fault's For, want 403", code)
	}
	if st := s.FaultStats(); st.Fault.Mode != FaultTokenForbidden || st.Hits != 1 || !st.Ended.IsZero() {
		t.Errorf("stats of the new fault: %+v", st)
	}
}
