package imdsserver

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
)

// FuzzServeHTTP throws arbitrary methods, paths and headers at the stand-in:
// it must never panic, must answer only with statuses EC2's IMDS uses, and
// must hand out a token only for a TTL in 1..21600.
func FuzzServeHTTP(f *testing.F) {
	f.Add("PUT", "/latest/api/token", "21600", "", false)
	f.Add("GET", "/latest/meta-data/", "", "tok", true)
	f.Add("GET", "/latest/meta-data/placement", "", "", false)
	f.Add("GET", "/latest/../latest/user-data", "1", "", true)
	f.Fuzz(func(t *testing.T, method, path, ttl, tok string, useToken bool) {
		s, err := New(Config{Instance: DefaultInstance(), UserData: []byte("x")})
		if err != nil {
			t.Fatal(err)
		}
		if method == "" || !validToken(method) {
			method = http.MethodGet
		}
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Method = method
		req.URL = &url.URL{Path: path}
		req.Header.Set(TTLHeader, ttl)
		if useToken {
			if tok == "" {
				put := httptest.NewRequest(http.MethodPut, TokenPath, nil)
				put.Header.Set(TTLHeader, "60")
				rec := httptest.NewRecorder()
				s.ServeHTTP(rec, put)
				tok = rec.Body.String()
			}
			req.Header.Set(TokenHeader, tok)
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		switch rec.Code {
		case 200, 400, 401, 403, 404, 405:
		default:
			t.Fatalf("%s %q: status %d", method, path, rec.Code)
		}
		if path == TokenPath && method == http.MethodPut && rec.Code == 200 {
			n, err := strconv.Atoi(ttl)
			if err != nil || n < 1 || n > MaxTokenTTL {
				t.Fatalf("token granted for TTL %q", ttl)
			}
		}
	})
}

// validToken reports whether s is an HTTP method token, so the fuzzer spends
// its time on the handler rather than on requests net/http would never pass on.
func validToken(s string) bool {
	for _, r := range s {
		if r <= ' ' || r >= 0x7f {
			return false
		}
	}
	return true
}
