package sts

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/berth-node/berth/qemu-tests/awsstub/sigv4"
)

var (
	creds   = sigv4.Credentials{AccessKeyID: "ASIAEXAMPLE", SecretAccessKey: "secret/key+1", SessionToken: "token=="}
	signed  = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	stsHost = "sts.us-west-2.amazonaws.com"
)

// presign makes the URL `berth eks-token` makes: GetCallerIdentity on the
// regional endpoint, x-k8s-aws-id signed, 60 s expiry.
func presign(t *testing.T, c sigv4.Credentials, cluster string, at time.Time) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "https://"+stsHost+"/?Action=GetCallerIdentity&Version=2011-06-15&X-Amz-Expires=60", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(ClusterIDHeader, cluster)
	u, _, err := v4.NewSigner().PresignHTTP(context.Background(),
		aws.Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, SessionToken: c.SessionToken},
		req, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "sts", "us-west-2", at)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func newServer(t *testing.T, now time.Time) (*Server, string) {
	t.Helper()
	s, err := New(Config{Credentials: creds, Account: "111122223333", RoleName: "node-role", SessionName: "i-0123456789abcdef0",
		Region: "us-west-2", Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	u, stop, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return s, u
}

// call forwards a presigned URL to the stand-in as the authenticator does:
// same path and query, Host kept, cluster header added.
func call(t *testing.T, base, presigned, cluster string) (int, []byte) {
	t.Helper()
	pu, err := url.Parse(presigned)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, base+"/?"+pu.RawQuery, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = pu.Host
	req.Header.Set(ClusterIDHeader, cluster)
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

func TestValidTokenGetsIdentity(t *testing.T) {
	s, base := newServer(t, signed.Add(30*time.Second))
	code, body := call(t, base, presign(t, creds, "demo", signed), "demo")
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	id, err := ParseIdentity(body)
	if err != nil {
		t.Fatal(err)
	}
	want := Identity{Arn: "arn:aws:sts::111122223333:assumed-role/node-role/i-0123456789abcdef0",
		UserID: s.Identity().UserID, Account: "111122223333"}
	if id != want {
		t.Fatalf("identity %+v, want %+v", id, want)
	}
	if !strings.HasSuffix(id.UserID, ":i-0123456789abcdef0") {
		t.Fatalf("UserId %q does not end in the session name", id.UserID)
	}
	if r := s.Requests(); len(r) != 1 || r[0].Status != 200 {
		t.Fatalf("request log %+v", r)
	}
}

func TestJSONWhenAsked(t *testing.T) {
	_, base := newServer(t, signed)
	pu, _ := url.Parse(presign(t, creds, "demo", signed))
	req, _ := http.NewRequest(http.MethodGet, base+"/?"+pu.RawQuery, nil)
	req.Host = pu.Host
	req.Header.Set(ClusterIDHeader, "demo")
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"Arn":"arn:aws:sts::111122223333:assumed-role/node-role/i-0123456789abcdef0"`) {
		t.Fatalf("status %d body %s", resp.StatusCode, b)
	}
}

func TestRejections(t *testing.T) {
	good := presign(t, creds, "demo", signed)
	tamper := func(f func(q url.Values)) string {
		u, _ := url.Parse(good)
		q := u.Query()
		f(q)
		u.RawQuery = q.Encode()
		return u.String()
	}
	wrongSecret := creds
	wrongSecret.SecretAccessKey = "not-the-secret"
	wrongToken := creds
	wrongToken.SessionToken = "other-token"
	unknownKey := creds
	unknownKey.AccessKeyID = "ASIAUNKNOWN"
	cases := []struct {
		name, url, cluster string
		now                time.Time
		status             int
		code               string
	}{
		{"wrong secret", presign(t, wrongSecret, "demo", signed), "demo", signed, 403, sigv4.CodeSignatureDoesNotMatch},
		{"expired", good, "demo", signed.Add(61 * time.Second), 403, sigv4.CodeExpiredToken},
		{"wrong cluster header", good, "other", signed, 403, sigv4.CodeSignatureDoesNotMatch},
		{"tampered action version", tamper(func(q url.Values) { q.Set("Version", "2011-06-15"); q.Set("X-Amz-Expires", "900") }), "demo", signed.Add(2 * time.Minute), 403, sigv4.CodeSignatureDoesNotMatch},
		{"tampered extra param", tamper(func(q url.Values) { q.Set("Extra", "1") }), "demo", signed, 403, sigv4.CodeSignatureDoesNotMatch},
		{"wrong session token", presign(t, wrongToken, "demo", signed), "demo", signed, 403, sigv4.CodeInvalidClientTokenID},
		{"token removed", tamper(func(q url.Values) { q.Del("X-Amz-Security-Token") }), "demo", signed, 403, sigv4.CodeInvalidClientTokenID},
		{"unknown key", presign(t, unknownKey, "demo", signed), "demo", signed, 403, sigv4.CodeInvalidClientTokenID},
		{"cluster header not signed", tamper(func(q url.Values) { q.Set("X-Amz-SignedHeaders", "host") }), "demo", signed, 403, sigv4.CodeSignatureDoesNotMatch},
		{"wrong algorithm", tamper(func(q url.Values) { q.Set("X-Amz-Algorithm", "AWS4-HMAC-SHA1") }), "demo", signed, 400, sigv4.CodeIncompleteSignature},
		{"signed in the future", presign(t, creds, "demo", signed.Add(time.Hour)), "demo", signed, 403, sigv4.CodeSignatureDoesNotMatch},
		{"no signature", tamper(func(q url.Values) { q.Del("X-Amz-Signature") }), "demo", signed, 400, sigv4.CodeMissingAuthentication},
		{"other action", tamper(func(q url.Values) { q.Set("Action", "AssumeRole") }), "demo", signed, 400, "InvalidAction"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, base := newServer(t, c.now)
			code, body := call(t, base, c.url, c.cluster)
			if code != c.status {
				t.Fatalf("status %d, want %d: %s", code, c.status, body)
			}
			e, err := ParseError(body)
			if err != nil {
				t.Fatal(err)
			}
			if e.Code != c.code {
				t.Fatalf("code %q (%s), want %q", e.Code, e.Message, c.code)
			}
		})
	}
}

func TestWrongHostIsRejected(t *testing.T) {
	// The signature covers the host: the same query sent for another host
	// must fail, so a token for one endpoint is not good at another.
	_, base := newServer(t, signed)
	pu, _ := url.Parse(presign(t, creds, "demo", signed))
	code, body := call(t, base, "https://sts.amazonaws.com/?"+pu.RawQuery, "demo")
	if code != 403 || !strings.Contains(string(body), sigv4.CodeSignatureDoesNotMatch) {
		t.Fatalf("status %d body %s", code, body)
	}
}

func TestTokenValidForOverridesExpires(t *testing.T) {
	var age atomic.Int64
	age.Store(int64(14 * time.Minute))
	s, err := New(Config{Credentials: creds, Account: "111122223333", RoleName: "node-role", SessionName: "i-0123456789abcdef0",
		TokenValidFor: 15 * time.Minute, Clock: func() time.Time { return signed.Add(time.Duration(age.Load())) }})
	if err != nil {
		t.Fatal(err)
	}
	base, stop, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	tok := presign(t, creds, "demo", signed)
	if code, body := call(t, base, tok, "demo"); code != 200 {
		t.Fatalf("14 minutes old with TokenValidFor 15m: %d %s", code, body)
	}
	age.Store(int64(16 * time.Minute))
	if code, body := call(t, base, tok, "demo"); code != 403 || !strings.Contains(string(body), sigv4.CodeExpiredToken) {
		t.Fatalf("16 minutes old: %d %s", code, body)
	}
}
