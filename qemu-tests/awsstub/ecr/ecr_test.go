package ecr

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/berth-node/berth/qemu-tests/awsstub/sigv4"
)

var (
	creds    = sigv4.Credentials{AccessKeyID: "ASIAEXAMPLE", SecretAccessKey: "secret", SessionToken: "session"}
	signedAt = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }
func hash(b []byte) string       { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }
func start(t *testing.T) (*Server, string, *clock) {
	t.Helper()
	c := &clock{now: signedAt}
	s, err := New(Config{Credentials: creds, Account: "111122223333", Region: "us-west-2", Clock: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	u, stop, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return s, u, c
}

// request builds and signs GetAuthorizationToken as the credential
// provider does: JSON 1.1, target header, SigV4 service ecr.
func request(t *testing.T, base string, c sigv4.Credentials, body string, mutate func(*http.Request)) *http.Request {
	t.Helper()
	return signed(t, base, c, body, Target, "ecr", "us-west-2", mutate)
}

// signed builds a JSON 1.1 call of target signed for service and region.
func signed(t *testing.T, base string, c sigv4.Credentials, body, target, service, region string, mutate func(*http.Request)) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("X-Amz-Target", target)
	err = v4.NewSigner().SignHTTP(context.Background(),
		aws.Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, SessionToken: c.SessionToken},
		req, hash([]byte(body)), service, region, signedAt)
	if err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		mutate(req)
	}
	return req
}

func do(t *testing.T, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func TestIssuesTokenTheRegistryAccepts(t *testing.T) {
	s, base, clk := start(t)
	code, body := do(t, request(t, base, creds, `{}`, nil))
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	var r Response
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.AuthorizationData) != 1 {
		t.Fatalf("authorizationData %+v", r.AuthorizationData)
	}
	ad := r.AuthorizationData[0]
	if ad.ProxyEndpoint != "https://111122223333.dkr.ecr.us-west-2.amazonaws.com" {
		t.Errorf("proxyEndpoint %s", ad.ProxyEndpoint)
	}
	if want := float64(signedAt.Add(12 * time.Hour).Unix()); ad.ExpiresAt != want {
		t.Errorf("expiresAt %v, want %v", ad.ExpiresAt, want)
	}
	raw, err := base64.StdEncoding.DecodeString(ad.AuthorizationToken)
	if err != nil {
		t.Fatal(err)
	}
	user, pw, ok := strings.Cut(string(raw), ":")
	if !ok || user != "AWS" || len(pw) < 32 {
		t.Fatalf("token %q is not AWS:<password>", raw)
	}
	if !s.ValidCredentials("AWS", pw) {
		t.Error("issued password not valid")
	}
	if s.ValidCredentials("AWS", pw+"x") || s.ValidCredentials("root", pw) {
		t.Error("wrong password or user accepted")
	}
	clk.Set(signedAt.Add(12 * time.Hour))
	if s.ValidCredentials("AWS", pw) {
		t.Error("password valid after expiresAt")
	}
}

func TestRejections(t *testing.T) {
	wrongSecret := creds
	wrongSecret.SecretAccessKey = "guess"
	wrongToken := creds
	wrongToken.SessionToken = "stale"
	cases := []struct {
		name   string
		creds  sigv4.Credentials
		mutate func(*http.Request)
		now    time.Time
		status int
		code   string
	}{
		{"wrong secret", wrongSecret, nil, signedAt, 403, "InvalidSignatureException"},
		{"wrong session token", wrongToken, nil, signedAt, 403, "UnrecognizedClientException"},
		{"tampered body", creds, func(r *http.Request) {
			r.Body = io.NopCloser(strings.NewReader(`{"registryIds":["1"]}`))
			r.ContentLength = 21
		}, signedAt, 403, "InvalidSignatureException"},
		{"tampered target", creds, func(r *http.Request) {
			r.Header.Set("X-Amz-Target", "AmazonEC2ContainerRegistry_V20150921.DeleteRepository")
		}, signedAt, 403, "InvalidSignatureException"},
		{"expired", creds, nil, signedAt.Add(16 * time.Minute), 403, "ExpiredTokenException"},
		{"unsigned", creds, func(r *http.Request) { r.Header.Del("Authorization") }, signedAt, 403, "MissingAuthenticationTokenException"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, base, clk := start(t)
			clk.Set(c.now)
			code, body := do(t, request(t, base, c.creds, `{}`, c.mutate))
			var e ErrorBody
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("status %d, body %s: %v", code, body, err)
			}
			if code != c.status || e.Type != c.code {
				t.Fatalf("status %d code %q (%s), want %d %q", code, e.Type, e.Message, c.status, c.code)
			}
		})
	}
}

func TestWrongRegionScope(t *testing.T) {
	_, base, _ := start(t)
	req, _ := http.NewRequest(http.MethodPost, base+"/", bytes.NewReader([]byte("{}")))
	req.Header.Set("X-Amz-Target", Target)
	err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: creds.AccessKeyID, SecretAccessKey: creds.SecretAccessKey, SessionToken: creds.SessionToken},
		req, hash([]byte("{}")), "ecr", "eu-west-1", signedAt)
	if err != nil {
		t.Fatal(err)
	}
	code, body := do(t, req)
	var e ErrorBody
	if err := json.Unmarshal(body, &e); err != nil || code != 403 || e.Type != "InvalidSignatureException" {
		t.Fatalf("status %d body %s", code, body)
	}
}

func startPublic(t *testing.T, s *Server) string {
	t.Helper()
	u, stop, err := s.StartPublic("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return u
}

// ECR Public answers one authorizationData object, for a signature scoped
// to ecr-public in us-east-1 whatever the stand-in's own region, and the
// registry takes its login like ECR's.
func TestPublicIssuesTokenTheRegistryAccepts(t *testing.T) {
	s, _, clk := start(t)
	pub := startPublic(t, s)
	code, body := do(t, signed(t, pub, creds, `{}`, PublicTarget, "ecr-public", "us-east-1", nil))
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	var shape map[string]json.RawMessage
	if err := json.Unmarshal(body, &shape); err != nil || !bytes.HasPrefix(shape["authorizationData"], []byte("{")) {
		t.Fatalf("authorizationData is not an object: %s", body)
	}
	var r PublicResponse
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	if want := float64(signedAt.Add(12 * time.Hour).Unix()); r.AuthorizationData.ExpiresAt != want {
		t.Errorf("expiresAt %v, want %v", r.AuthorizationData.ExpiresAt, want)
	}
	raw, err := base64.StdEncoding.DecodeString(r.AuthorizationData.AuthorizationToken)
	if err != nil {
		t.Fatal(err)
	}
	user, pw, ok := strings.Cut(string(raw), ":")
	if !ok || user != "AWS" || !s.ValidCredentials(user, pw) {
		t.Fatalf("token %q is not a live AWS:<password>", raw)
	}
	clk.Set(signedAt.Add(12 * time.Hour))
	if s.ValidCredentials(user, pw) {
		t.Error("password valid after expiresAt")
	}
}

// Each endpoint takes only its own service's signature and target.
func TestPublicRejections(t *testing.T) {
	wrongSecret := creds
	wrongSecret.SecretAccessKey = "guess"
	cases := []struct {
		name, target, service, region string
		creds                         sigv4.Credentials
		private                       bool // call ECR's endpoint instead
		status                        int
		code                          string
	}{
		{"signed for ecr", PublicTarget, "ecr", "us-east-1", creds, false, 403, "InvalidSignatureException"},
		{"signed for another region", PublicTarget, "ecr-public", "us-west-2", creds, false, 403, "InvalidSignatureException"},
		{"wrong secret", PublicTarget, "ecr-public", "us-east-1", wrongSecret, false, 403, "InvalidSignatureException"},
		{"ECR's target", Target, "ecr-public", "us-east-1", creds, false, 400, "UnknownOperationException"},
		{"ECR Public's signature at ECR", PublicTarget, "ecr-public", "us-east-1", creds, true, 403, "InvalidSignatureException"},
		{"ECR Public's target at ECR", PublicTarget, "ecr", "us-west-2", creds, true, 400, "UnknownOperationException"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, base, _ := start(t)
			if !c.private {
				base = startPublic(t, s)
			}
			code, body := do(t, signed(t, base, c.creds, `{}`, c.target, c.service, c.region, nil))
			var e ErrorBody
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("status %d, body %s: %v", code, body, err)
			}
			if code != c.status || e.Type != c.code {
				t.Fatalf("status %d code %q (%s), want %d %q", code, e.Type, e.Message, c.status, c.code)
			}
		})
	}
}
