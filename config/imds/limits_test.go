package imds

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-node/berth/config/userdata"
)

// fakeIMDS answers the token PUT with put and every GET with get, and
// counts requests by method.
type fakeIMDS struct {
	*httptest.Server
	puts, gets atomic.Int32
}

func newFakeIMDS(t *testing.T, put, get http.HandlerFunc) *fakeIMDS {
	t.Helper()
	f := &fakeIMDS{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && r.URL.Path == tokenPath {
			f.puts.Add(1)
			put(w, r)
			return
		}
		f.gets.Add(1)
		get(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func giveToken(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("tok")) }

// TestTokenPUTHangs: an IMDS that takes the token PUT and never answers
// (a hop limit of 1 seen from a container, a broken proxy) fails with an
// error that names the PUT, says the GET never went out, and hints at the
// instance's metadata options.
func TestTokenPUTHangs(t *testing.T) {
	release := make(chan struct{})
	f := newFakeIMDS(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("0a:1b:2c:3d:4e:5f")) })
	defer close(release)
	o := fastOpts(f.URL)
	o.AttemptTimeout = 100 * time.Millisecond
	start := time.Now()
	_, err := New(o).Get(ctxTimeout(t, 600*time.Millisecond), "meta-data/mac")
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("returned after %s, want about the 600ms deadline", took)
	}
	var ie *Error
	if !errors.As(err, &ie) {
		t.Fatalf("err = %v, want an *Error", err)
	}
	if ie.Request != "PUT /latest/api/token" || ie.Method != "GET" || ie.Path != "/latest/meta-data/mac" {
		t.Errorf("Request %q, Method %q, Path %q", ie.Request, ie.Method, ie.Path)
	}
	msg := err.Error()
	for _, want := range []string{
		"imds: GET /latest/meta-data/mac via " + f.URL + ": ",
		" attempts in ",
		": the session-token request failed: PUT /latest/api/token: no answer within 100ms: check the instance's metadata options: HttpPutResponseHopLimit (2 or more when berth runs in a container), HttpTokens and HttpEndpoint",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error does not wrap the deadline: %v", err)
	}
	if f.puts.Load() < 2 || f.gets.Load() != 0 {
		t.Errorf("%d PUTs and %d GETs; want the PUT retried and no GET", f.puts.Load(), f.gets.Load())
	}
	t.Log(msg)

	// The caller's deadline ending the first PUT says the same.
	o.AttemptTimeout = time.Second
	_, err = New(o).Get(ctxTimeout(t, 100*time.Millisecond), "meta-data/mac")
	const want = ": the session-token request failed: PUT /latest/api/token: no answer before the deadline (context deadline exceeded): check the instance's metadata options: HttpPutResponseHopLimit"
	if err == nil || !strings.Contains(err.Error(), ": 1 attempt in ") || !strings.Contains(err.Error(), want) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("PUT cut by the caller's deadline:\n got %v\nwant it to contain %s", err, want)
	}
}

// TestGetHangsNamesGet: when the token comes and the GET hangs, the error
// is the GET's, without the token hint.
func TestGetHangsNamesGet(t *testing.T) {
	release := make(chan struct{})
	f := newFakeIMDS(t, giveToken, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	o := fastOpts(f.URL)
	o.AttemptTimeout = 100 * time.Millisecond
	_, err := New(o).Get(ctxTimeout(t, 400*time.Millisecond), "meta-data/mac")
	var ie *Error
	if !errors.As(err, &ie) || ie.Request != "GET /latest/meta-data/mac" {
		t.Fatalf("err = %#v, want an *Error whose Request is the GET", err)
	}
	if msg := err.Error(); !strings.Contains(msg, " in ") || !strings.Contains(msg, ": no answer within 100ms") ||
		strings.Contains(msg, "token") || strings.Contains(msg, "PUT") {
		t.Errorf("error %q: want the GET's timeout and no word of the token", msg)
	}
}

// TestTokenPUTRefusedNamesPUT: a connection refused at the PUT names it.
func TestTokenPUTRefusedNamesPUT(t *testing.T) {
	ep := closedPort(t)
	_, err := New(fastOpts(ep)).Get(ctxTimeout(t, 200*time.Millisecond), "meta-data/mac")
	var ie *Error
	if !errors.As(err, &ie) || ie.Request != "PUT /latest/api/token" ||
		!strings.Contains(err.Error(), "the session-token request failed: PUT /latest/api/token: dial tcp ") {
		t.Fatalf("err = %v", err)
	}
}

// TestRedirectsNotFollowed: a 3xx from IMDS, on the token PUT or on a GET,
// is an error naming the request and where it pointed; the target never
// hears from the client, whichever http.Client it was given.
func TestRedirectsNotFollowed(t *testing.T) {
	var elsewhere atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		w.Write([]byte("tok"))
	}))
	defer target.Close()
	redirect := func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/stolen"+r.URL.Path, http.StatusFound)
	}
	callerClient := &http.Client{} // follows redirects itself
	for _, tc := range []struct {
		name     string
		put, get http.HandlerFunc
		client   *http.Client
		request  string
		want     string
	}{
		{"token PUT", redirect, giveToken, nil, "PUT /latest/api/token",
			": the session-token request failed: PUT /latest/api/token: HTTP 302 Found, a redirect to " + target.URL + "/stolen/latest/api/token: IMDS never redirects, so it is not followed"},
		{"GET", giveToken, redirect, nil, "GET /latest/meta-data/mac",
			": HTTP 302 Found, a redirect to " + target.URL + "/stolen/latest/meta-data/mac: IMDS never redirects, so it is not followed"},
		{"GET, caller's client", giveToken, redirect, callerClient, "GET /latest/meta-data/mac",
			"a redirect to " + target.URL + "/stolen/latest/meta-data/mac"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeIMDS(t, tc.put, tc.get)
			o := fastOpts(f.URL)
			o.HTTPClient = tc.client
			_, err := New(o).Get(ctxTimeout(t, 2*time.Second), "meta-data/mac")
			var ie *Error
			if !errors.As(err, &ie) || ie.Request != tc.request || ie.Attempts != 1 || ie.Status != http.StatusFound {
				t.Fatalf("err = %#v, want one attempt ending in the %s's 302", err, tc.request)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "imds: GET /latest/meta-data/mac via "+f.URL+": 1 attempt in ") {
				t.Errorf("error %q\nwant it to contain %q", err, tc.want)
			}
			if n := elsewhere.Load(); n != 0 {
				t.Errorf("the redirect target got %d requests", n)
			}
		})
	}
	if callerClient.CheckRedirect != nil {
		t.Error("New changed the caller's http.Client")
	}
}

// TestAnswerLimits: user data is read up to EC2's 16 KiB, everything else
// up to 64 KiB; one byte more is an error naming the path and the limit.
func TestAnswerLimits(t *testing.T) {
	if MaxUserDataSize != userdata.MaxUserDataSize {
		t.Fatalf("imds.MaxUserDataSize %d != userdata.MaxUserDataSize %d", MaxUserDataSize, userdata.MaxUserDataSize)
	}
	var mu sync.Mutex
	answers := map[string][]byte{}
	set := func(path string, n int) {
		mu.Lock()
		defer mu.Unlock()
		answers[path] = bytes.Repeat([]byte("x"), n)
	}
	f := newFakeIMDS(t, giveToken, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		b, ok := answers[r.URL.Path]
		mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			w.Write(bytes.Repeat([]byte("n"), 1<<20)) // a long error page is cut, not refused
			return
		}
		w.Write(b)
	})
	c := New(fastOpts(f.URL))
	ctx := ctxTimeout(t, 5*time.Second)
	for _, tc := range []struct {
		path  string
		limit int
		want  string
	}{
		{"user-data", MaxUserDataSize, ": the answer is over the 16384-byte limit (imds.MaxUserDataSize: EC2 allows at most 16 KiB of user data)"},
		{"meta-data/instance-id", MaxMetadataSize, ": the answer is over the 65536-byte limit (imds.MaxMetadataSize)"},
	} {
		set("/latest/"+tc.path, tc.limit)
		if b, err := c.Get(ctx, tc.path); err != nil || len(b) != tc.limit {
			t.Errorf("%s of %d bytes: %d bytes, %v", tc.path, tc.limit, len(b), err)
		}
		set("/latest/"+tc.path, tc.limit+1)
		_, err := c.Get(ctx, tc.path)
		if err == nil || !strings.HasPrefix(err.Error(), "imds: GET /latest/"+tc.path+" via "+f.URL+": 1 attempt in ") ||
			!strings.HasSuffix(err.Error(), tc.want) {
			t.Errorf("%s of %d bytes: %v\nwant it to end %q", tc.path, tc.limit+1, err, tc.want)
		}
	}
	if _, err := c.Get(ctx, "meta-data/missing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("404 with a long body: %v", err)
	}

	// The token answer is held to the metadata limit too.
	long := newFakeIMDS(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write(bytes.Repeat([]byte("t"), MaxMetadataSize+1))
	}, giveToken)
	_, err := New(fastOpts(long.URL)).Get(ctx, "meta-data/mac")
	if err == nil || !strings.HasSuffix(err.Error(), ": the session-token request failed: PUT /latest/api/token: the answer is over the 65536-byte limit (imds.MaxMetadataSize)") {
		t.Errorf("long token: %v", err)
	}
}
