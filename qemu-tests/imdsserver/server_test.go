package imdsserver

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-node/berth/internal/golden"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// fakeClock is a settable clock for token expiry tests.
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

func newServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	if cfg.Instance.InstanceID == "" {
		cfg.Instance = DefaultInstance()
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

func do(t *testing.T, s http.Handler, method, path string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	return rec
}

func token(t *testing.T, s http.Handler, ttl string) string {
	t.Helper()
	rec := do(t, s, http.MethodPut, TokenPath, map[string]string{TTLHeader: ttl})
	if rec.Code != http.StatusOK {
		t.Fatalf("PUT %s with TTL %s: status %d, want 200", TokenPath, ttl, rec.Code)
	}
	return rec.Body.String()
}

func TestTokenTTLValidation(t *testing.T) {
	s := newServer(t, Config{})
	for _, tc := range []struct {
		ttl  *string
		want int
	}{
		{nil, http.StatusBadRequest},
		{ptr(""), http.StatusBadRequest},
		{ptr("0"), http.StatusBadRequest},
		{ptr("-5"), http.StatusBadRequest},
		{ptr("21601"), http.StatusBadRequest},
		{ptr("abc"), http.StatusBadRequest},
		{ptr("1.5"), http.StatusBadRequest},
		{ptr("1"), http.StatusOK},
		{ptr("21600"), http.StatusOK},
	} {
		name := "missing"
		hdr := map[string]string{}
		if tc.ttl != nil {
			name = fmt.Sprintf("%q", *tc.ttl)
			hdr[TTLHeader] = *tc.ttl
		}
		t.Run(name, func(t *testing.T) {
			rec := do(t, s, http.MethodPut, TokenPath, hdr)
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d", rec.Code, tc.want)
			}
			if tc.want != http.StatusOK {
				return
			}
			if got := rec.Header().Get(TTLHeader); got != *tc.ttl {
				t.Errorf("echoed TTL header %q, want %q", got, *tc.ttl)
			}
			if len(rec.Body.String()) < 40 {
				t.Errorf("token %q is implausibly short", rec.Body.String())
			}
		})
	}
}

func ptr(s string) *string { return &s }

func TestTokenRefusesForwardedFor(t *testing.T) {
	s := newServer(t, Config{})
	rec := do(t, s, http.MethodPut, TokenPath, map[string]string{TTLHeader: "60", "X-Forwarded-For": "203.0.113.9"})
	if rec.Code != http.StatusForbidden {
		t.Fatalf("status %d, want 403", rec.Code)
	}
}

func TestTokenPathOnlyTakesPUT(t *testing.T) {
	s := newServer(t, Config{})
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		rec := do(t, s, m, TokenPath, map[string]string{TTLHeader: "60"})
		if rec.Code != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: status %d, want 405", m, TokenPath, rec.Code)
		}
	}
	rec := do(t, s, http.MethodPut, "/latest/meta-data/instance-id", map[string]string{TTLHeader: "60"})
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("PUT on a metadata path: status %d, want 405", rec.Code)
	}
}

func TestTokenRequiredAndOptional(t *testing.T) {
	const p = "/latest/meta-data/instance-id"
	req := newServer(t, Config{})
	if rec := do(t, req, http.MethodGet, p, nil); rec.Code != http.StatusUnauthorized {
		t.Errorf("required mode, no token: status %d, want 401", rec.Code)
	}
	tok := token(t, req, "60")
	rec := do(t, req, http.MethodGet, p, map[string]string{TokenHeader: tok})
	if rec.Code != http.StatusOK || rec.Body.String() != "i-0123456789abcdef0" {
		t.Errorf("required mode, valid token: %d %q", rec.Code, rec.Body.String())
	}

	opt := newServer(t, Config{TokensOptional: true})
	rec = do(t, opt, http.MethodGet, p, nil)
	if rec.Code != http.StatusOK || rec.Body.String() != "i-0123456789abcdef0" {
		t.Errorf("optional mode, no token: %d %q", rec.Code, rec.Body.String())
	}
	for _, s := range []*Server{req, opt} {
		if rec := do(t, s, http.MethodGet, p, map[string]string{TokenHeader: "forged"}); rec.Code != http.StatusUnauthorized {
			t.Errorf("optional=%v, invalid token: status %d, want 401", s.cfg.TokensOptional, rec.Code)
		}
	}
}

func TestTokenExpiry(t *testing.T) {
	clk := &fakeClock{now: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	s := newServer(t, Config{Clock: clk.Now})
	tok := token(t, s, "10")
	get := func() int {
		return do(t, s, http.MethodGet, "/latest/meta-data/instance-type", map[string]string{TokenHeader: tok}).Code
	}
	clk.Advance(9*time.Second + 999*time.Millisecond)
	if c := get(); c != http.StatusOK {
		t.Fatalf("just before expiry: status %d, want 200", c)
	}
	clk.Advance(time.Millisecond)
	if c := get(); c != http.StatusUnauthorized {
		t.Fatalf("at expiry: status %d, want 401", c)
	}
	// A fresh token works again.
	tok = token(t, s, "10")
	if c := get(); c != http.StatusOK {
		t.Fatalf("fresh token: status %d, want 200", c)
	}
	s.ExpireTokens()
	if c := get(); c != http.StatusUnauthorized {
		t.Fatalf("after ExpireTokens: status %d, want 401", c)
	}
}

func TestListingsAndLeaves(t *testing.T) {
	in := DefaultInstance()
	in.IPv6s = []string{"2600:1f14:abc:1200::10", "2600:1f14:abc:1200::11"}
	s := newServer(t, Config{Instance: in, UserData: []byte("#!/bin/sh\n")})
	tok := token(t, s, "60")
	for _, tc := range []struct{ path, want string }{
		{"/latest/", "dynamic\nmeta-data\nuser-data"},
		{"/latest/meta-data/placement/", "availability-zone\navailability-zone-id\nregion"},
		{"/latest/meta-data/placement", "availability-zone\navailability-zone-id\nregion"},
		{"/latest/meta-data/network/interfaces/macs/", "0a:1b:2c:3d:4e:5f/"},
		{"/latest/meta-data/network/interfaces/macs/0a:1b:2c:3d:4e:5f/ipv6s", "2600:1f14:abc:1200::10\n2600:1f14:abc:1200::11"},
		{"/latest/dynamic/", "instance-identity/"},
		{"/latest/dynamic/instance-identity/", "document"},
		{"/latest/meta-data/placement/region", "us-west-2"},
		{"/latest/meta-data/local-hostname", "ip-10-0-1-23.us-west-2.compute.internal"},
		{"/latest/user-data", "#!/bin/sh\n"},
	} {
		rec := do(t, s, http.MethodGet, tc.path, map[string]string{TokenHeader: tok})
		if rec.Code != http.StatusOK || rec.Body.String() != tc.want {
			t.Errorf("GET %s: %d %q, want 200 %q", tc.path, rec.Code, rec.Body.String(), tc.want)
		}
	}
	// Sub-categories end with "/", leaves do not.
	rec := do(t, s, http.MethodGet, "/latest/meta-data/", map[string]string{TokenHeader: tok})
	entries := strings.Split(rec.Body.String(), "\n")
	for _, want := range []string{"instance-id", "instance-type", "local-ipv4", "mac", "placement/", "network/", "services/"} {
		if !slices.Contains(entries, want) {
			t.Errorf("meta-data listing %q lacks %q", entries, want)
		}
	}
	if !sort.StringsAreSorted(entries) {
		t.Errorf("meta-data listing is not sorted: %q", entries)
	}
}

func TestNotFound(t *testing.T) {
	s := newServer(t, Config{}) // no user data
	tok := token(t, s, "60")
	for _, p := range []string{
		"/latest/user-data",
		"/latest/meta-data/no-such-thing",
		"/latest/meta-data/instance-id/", // a leaf is not a category
		"/latest/meta-data/iam/",         // no role configured
		"/2009-04-04/meta-data/instance-id",
		"/latest/meta-data/network/interfaces/macs/0a:1b:2c:3d:4e:5f/ipv6s", // no IPv6
	} {
		if rec := do(t, s, http.MethodGet, p, map[string]string{TokenHeader: tok}); rec.Code != http.StatusNotFound {
			t.Errorf("GET %s: status %d, want 404", p, rec.Code)
		}
	}
	if err := s.SetUserData([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if rec := do(t, s, http.MethodGet, "/latest/user-data", map[string]string{TokenHeader: tok}); rec.Code != 200 || rec.Body.String() != "hello" {
		t.Errorf("after SetUserData: %d %q", rec.Code, rec.Body.String())
	}
}

func TestIdentityDocumentConsistent(t *testing.T) {
	in := DefaultInstance()
	s := newServer(t, Config{Instance: in, TokensOptional: true})
	rec := do(t, s, http.MethodGet, "/latest/dynamic/instance-identity/document", nil)
	var doc map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatalf("document is not JSON: %v\n%s", err, rec.Body.String())
	}
	for k, want := range map[string]string{
		"accountId": in.AccountID, "availabilityZone": in.AvailabilityZone, "instanceId": in.InstanceID,
		"instanceType": in.InstanceType, "privateIp": in.LocalIPv4, "region": in.Region, "imageId": in.ImageID,
	} {
		if doc[k] != want {
			t.Errorf("document %s = %v, want %q", k, doc[k], want)
		}
	}
}

func TestRoleCredentials(t *testing.T) {
	in := DefaultInstance()
	exp := time.Date(2026, 5, 1, 18, 0, 0, 0, time.UTC)
	in.Role = &Role{Name: "eks-node", AccessKeyID: "ASIAEXAMPLE", SecretAccessKey: "secret", Token: "sess", Expiration: exp,
		InstanceProfileARN: "arn:aws:iam::111122223333:instance-profile/eks-node"}
	s := newServer(t, Config{Instance: in, TokensOptional: true})
	if rec := do(t, s, http.MethodGet, "/latest/meta-data/iam/security-credentials/", nil); rec.Body.String() != "eks-node" {
		t.Errorf("role listing %q, want %q", rec.Body.String(), "eks-node")
	}
	rec := do(t, s, http.MethodGet, "/latest/meta-data/iam/security-credentials/eks-node", nil)
	var c struct{ Code, AccessKeyId, SecretAccessKey, Token, Expiration string }
	if err := json.Unmarshal(rec.Body.Bytes(), &c); err != nil {
		t.Fatalf("credentials: %v", err)
	}
	if c.Code != "Success" || c.AccessKeyId != "ASIAEXAMPLE" || c.SecretAccessKey != "secret" || c.Token != "sess" || c.Expiration != "2026-05-01T18:00:00Z" {
		t.Errorf("credentials = %+v", c)
	}
	in.Role = &Role{Name: "a/b"}
	if _, err := New(Config{Instance: in}); err == nil || !strings.Contains(err.Error(), `"a/b"`) {
		t.Errorf("New with role name a/b: err = %v, want one naming the role", err)
	}
}

func TestFaultsAndRequestLog(t *testing.T) {
	s := newServer(t, Config{})
	s.FailNext(2, 0)
	if c := do(t, s, http.MethodPut, TokenPath, map[string]string{TTLHeader: "60"}).Code; c != 500 {
		t.Fatalf("first faulted request: %d, want 500", c)
	}
	if c := do(t, s, http.MethodGet, "/latest/meta-data/", nil).Code; c != 500 {
		t.Fatalf("second faulted request: %d, want 500", c)
	}
	tok := token(t, s, "60")
	s.FailNext(1, http.StatusServiceUnavailable)
	if c := do(t, s, http.MethodGet, "/latest/meta-data/mac", map[string]string{TokenHeader: tok}).Code; c != 503 {
		t.Fatalf("faulted with 503: %d", c)
	}
	s.DelayNext(1, 50*time.Millisecond)
	start := time.Now()
	if c := do(t, s, http.MethodGet, "/latest/meta-data/mac", map[string]string{TokenHeader: tok}).Code; c != 200 {
		t.Fatalf("delayed request: %d, want 200", c)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("delayed request answered after %v, want >= 50ms", d)
	}
	want := []Request{
		{http.MethodPut, TokenPath, false, 500},
		{http.MethodGet, "/latest/meta-data/", false, 500},
		{http.MethodPut, TokenPath, false, 200},
		{http.MethodGet, "/latest/meta-data/mac", true, 503},
		{http.MethodGet, "/latest/meta-data/mac", true, 200},
	}
	if got := s.Requests(); !slices.Equal(got, want) {
		t.Errorf("request log:\n got %+v\nwant %+v", got, want)
	}
}

func TestStartServesOverHTTP(t *testing.T) {
	s := newServer(t, Config{})
	url, stop, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	req, _ := http.NewRequest(http.MethodPut, url+TokenPath, nil)
	req.Header.Set(TTLHeader, "5")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get(TTLHeader) != "5" {
		t.Fatalf("token over HTTP: %d, TTL header %q", resp.StatusCode, resp.Header.Get(TTLHeader))
	}
	req, _ = http.NewRequest(http.MethodGet, url+"/latest/meta-data/instance-type", nil)
	req.Header.Set(TokenHeader, string(tok))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "m5.large" {
		t.Fatalf("instance-type over HTTP: %q", body)
	}
	stop()
	if _, err := http.Get(url + "/latest/"); err == nil {
		t.Fatal("server still answers after stop")
	}
}

// TestTreeGolden pins the whole served tree, so a change to what the
// stand-in serves is a reviewed change. Regenerate with -update.
func TestTreeGolden(t *testing.T) {
	in := DefaultInstance()
	in.IPv6s = []string{"2600:1f14:abc:1200::10"}
	in.Role = &Role{Name: "eks-node", AccessKeyID: "ASIAEXAMPLE", SecretAccessKey: "secret", Token: "sess",
		Expiration: time.Date(2026, 1, 1, 6, 0, 0, 0, time.UTC), LastUpdated: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		InstanceProfileARN: "arn:aws:iam::111122223333:instance-profile/eks-node", InstanceProfileID: "AIPAEXAMPLE"}
	tr, err := buildTree(in, []byte("user data"), Notices{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	var dirs, leaves []string
	for d := range tr.dirs {
		dirs = append(dirs, d)
	}
	for l := range tr.leaves {
		leaves = append(leaves, l)
	}
	sort.Strings(dirs)
	sort.Strings(leaves)
	for _, d := range dirs {
		fmt.Fprintf(&b, "== /latest/%s\n%s\n", d, strings.Join(tr.dirs[d], "\n"))
	}
	for _, l := range leaves {
		fmt.Fprintf(&b, "== /latest/%s\n%s\n", l, tr.leaves[l])
	}
	goldenPath := filepath.Join("testdata", "tree.golden")
	golden.Check(t, goldenPath, b.Bytes(), *update)
}
