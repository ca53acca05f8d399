package ecr

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/berth-node/berth/internal/golden"
	stubecr "github.com/berth-node/berth/qemu-tests/awsstub/ecr"
	"github.com/berth-node/berth/qemu-tests/awsstub/sigv4"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	golden.Check(t, p, got, *update)
}

func TestParseImage(t *testing.T) {
	for _, tc := range []struct {
		image string
		want  Registry
		api   string
	}{
		{"123456789012.dkr.ecr.us-east-1.amazonaws.com/app:v1",
			Registry{Host: "123456789012.dkr.ecr.us-east-1.amazonaws.com", Account: "123456789012", Region: "us-east-1", Domain: "amazonaws.com"},
			"https://api.ecr.us-east-1.amazonaws.com"},
		{"https://123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/app@sha256:abc",
			Registry{Host: "123456789012.dkr.ecr.eu-west-1.amazonaws.com", Account: "123456789012", Region: "eu-west-1", Domain: "amazonaws.com"},
			"https://api.ecr.eu-west-1.amazonaws.com"},
		{"123456789012.dkr.ecr.us-east-1.amazonaws.com:5000/app",
			Registry{Host: "123456789012.dkr.ecr.us-east-1.amazonaws.com:5000", Account: "123456789012", Region: "us-east-1", Domain: "amazonaws.com"},
			"https://api.ecr.us-east-1.amazonaws.com"},
		{"123456789012.dkr.ecr-fips.us-gov-west-1.amazonaws.com/app",
			Registry{Host: "123456789012.dkr.ecr-fips.us-gov-west-1.amazonaws.com", Account: "123456789012", Region: "us-gov-west-1", FIPS: true, Domain: "amazonaws.com"},
			"https://ecr-fips.us-gov-west-1.amazonaws.com"},
		{"123456789012.dkr.ecr.eusc-de-east-1.amazonaws.eu/app:v1",
			Registry{Host: "123456789012.dkr.ecr.eusc-de-east-1.amazonaws.eu", Account: "123456789012", Region: "eusc-de-east-1", Domain: "amazonaws.eu"},
			"https://api.ecr.eusc-de-east-1.amazonaws.eu"},
		{"123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn/app",
			Registry{Host: "123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn", Account: "123456789012", Region: "cn-north-1", Domain: "amazonaws.com.cn"},
			"https://api.ecr.cn-north-1.amazonaws.com.cn"},
		{"123456789012.dkr-ecr.us-west-2.on.aws/app",
			Registry{Host: "123456789012.dkr-ecr.us-west-2.on.aws", Account: "123456789012", Region: "us-west-2", Domain: "on.aws"},
			"https://ecr.us-west-2.api.aws"},
		{"123456789012.dkr-ecr-fips.us-east-1.on.aws/app",
			Registry{Host: "123456789012.dkr-ecr-fips.us-east-1.on.aws", Account: "123456789012", Region: "us-east-1", FIPS: true, Domain: "on.aws"},
			"https://ecr-fips.us-east-1.api.aws"},
		{"123456789012.dkr.ecr.us-iso-east-1.c2s.ic.gov/app",
			Registry{Host: "123456789012.dkr.ecr.us-iso-east-1.c2s.ic.gov", Account: "123456789012", Region: "us-iso-east-1", Domain: "c2s.ic.gov"},
			"https://api.ecr.us-iso-east-1.c2s.ic.gov"},
		// ECR Public: one API in us-east-1, the host kept as written.
		{"public.ecr.aws/eks/pause:3.10",
			Registry{Host: "public.ecr.aws", API: Public, Region: "us-east-1"},
			"https://api.ecr-public.us-east-1.amazonaws.com"},
		{"https://ecr-public.aws.com/docker/library/redis@sha256:abc",
			Registry{Host: "ecr-public.aws.com", API: Public, Region: "us-east-1"},
			"https://api.ecr-public.us-east-1.amazonaws.com"},
		{"Public.ECR.aws:443/eks/pause",
			Registry{Host: "Public.ECR.aws:443", API: Public, Region: "us-east-1"},
			"https://api.ecr-public.us-east-1.amazonaws.com"},
	} {
		got, err := ParseImage(tc.image)
		if err != nil {
			t.Errorf("ParseImage(%q): %v", tc.image, err)
			continue
		}
		if got != tc.want {
			t.Errorf("ParseImage(%q) = %+v, want %+v", tc.image, got, tc.want)
		}
		if api := got.APIEndpoint(); api != tc.api {
			t.Errorf("%q: APIEndpoint %s, want %s", tc.image, api, tc.api)
		}
	}
	for _, bad := range []string{
		"", "nginx:latest", "docker.io/library/nginx",
		"public.ecr.aws.evil.com/eks/pause", "evil.public.ecr.aws/eks/pause", "ecr-public.aws.com.cn/x",
		"public.ecr.aws:/eks/pause", "evil.com/public.ecr.aws/eks/pause",
		"12345678901.dkr.ecr.us-east-1.amazonaws.com/app", // 11 digits
		"123456789012.dkr.ecr.us-east-1.amazonaws.com.evil.com/app",
		"123456789012.dkr.ecr.us-east-1.amazonaws.com:/app",
		"evil.com/123456789012.dkr.ecr.us-east-1.amazonaws.com",
	} {
		if r, err := ParseImage(bad); err == nil {
			t.Errorf("ParseImage(%q) = %+v, want an error", bad, r)
		}
	}
}

// globMatch is kubelet's matchImages rule for one host: the pattern and
// the host have the same number of labels and each label matches by
// path.Match.
func globMatch(pattern, host string) bool {
	p, h := strings.Split(pattern, "."), strings.Split(host, ".")
	if len(p) != len(h) {
		return false
	}
	for i := range p {
		if ok, _ := path.Match(p[i], h[i]); !ok {
			return false
		}
	}
	return true
}

// Every host kubelet sends the plugin (one matching a MatchImages pattern)
// must parse, or kubelet would call the plugin for images it cannot serve.
func TestMatchImagesAgreeWithParser(t *testing.T) {
	for _, pat := range MatchImages(true) {
		host := strings.Replace(strings.Replace(pat, "*", "123456789012", 1), "*", "ap-southeast-2", 1)
		if !globMatch(pat, host) {
			t.Fatalf("test bug: %s does not match %s", host, pat)
		}
		if _, err := ParseImage(host + "/app:v1"); err != nil {
			t.Errorf("pattern %s: kubelet would send %s, which the plugin refuses: %v", pat, host, err)
		}
	}
}

// ECR Public's hosts are the gated addition and nothing else differs; each
// call's slice is the caller's own.
func TestMatchImagesGate(t *testing.T) {
	without, with := MatchImages(false), MatchImages(true)
	if !slices.Equal(with, append(slices.Clone(without), "public.ecr.aws", "ecr-public.aws.com")) {
		t.Errorf("MatchImages(true) = %q", with)
	}
	if slices.Contains(without, "public.ecr.aws") || !slices.Contains(without, "*.dkr.ecr.*.amazonaws.eu") {
		t.Errorf("MatchImages(false) = %q", without)
	}
	without[0] = "changed"
	if MatchImages(false)[0] != "*.dkr.ecr.*.amazonaws.com" {
		t.Error("a caller's change reached the next call")
	}
}

func TestCacheDuration(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		exp  time.Time
		want time.Duration
	}{
		{now.Add(12 * time.Hour), 11*time.Hour + 30*time.Minute},
		{now.Add(30*time.Minute + 1500*time.Millisecond), time.Second},
		{now.Add(10 * time.Minute), 0},
		{now.Add(-time.Hour), 0},
	} {
		if got := CacheDuration(now, tc.exp); got != tc.want {
			t.Errorf("CacheDuration(exp now+%s) = %s, want %s", tc.exp.Sub(now), got, tc.want)
		}
	}
}

func TestProtocolGolden(t *testing.T) {
	req, err := os.ReadFile("testdata/request.json")
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := ParseImage(r.Image)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	out, err := Response(reg, Auth{Username: "AWS", Password: "pass-word", ExpiresAt: now.Add(12 * time.Hour)}, now)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "response.golden", out)
}

func TestParseRequestRejects(t *testing.T) {
	for _, in := range []string{
		``, `[]`, `{}`,
		`{"apiVersion":"credentialprovider.kubelet.k8s.io/v1alpha1","kind":"CredentialProviderRequest","image":"x"}`,
		`{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","image":"x"}`,
		`{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":""}`,
		`{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"x"} {}`,
		strings.Repeat(" ", maxRequest+1),
	} {
		if _, err := ParseRequest([]byte(in)); err == nil {
			t.Errorf("ParseRequest(%.80q) succeeded", in)
		}
	}
}

func FuzzCredentialProviderRequest(f *testing.F) {
	if b, err := os.ReadFile("testdata/request.json"); err == nil {
		f.Add(b)
	}
	for _, image := range []string{"public.ecr.aws/eks/pause:3.10", "https://ECR-PUBLIC.aws.com:443/a@sha256:00", "public.ecr.aws.evil/x"} {
		f.Add([]byte(`{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"` + image + `"}`))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := ParseRequest(b)
		if err != nil {
			return
		}
		if req.Image == "" || req.APIVersion != PluginAPIVersion {
			t.Fatalf("accepted %+v", req)
		}
		reg, err := ParseImage(req.Image)
		if err != nil {
			return
		}
		if reg.Host == "" || reg.Region == "" || !strings.HasPrefix(reg.APIEndpoint(), "https://") {
			t.Fatalf("ParseImage(%q) = %+v", req.Image, reg)
		}
		// A public registry is exactly one of the two hosts, signed for
		// us-east-1; any other is a private one with its account.
		name := strings.ToLower(reg.Host)
		if h, _, err := net.SplitHostPort(name); err == nil {
			name = h
		}
		public := name == "public.ecr.aws" || name == "ecr-public.aws.com"
		switch {
		case public != (reg.API == Public):
			t.Fatalf("ParseImage(%q) = %+v: API does not follow the host", req.Image, reg)
		case public && (reg.Region != "us-east-1" || reg.Account != "" || reg.APIEndpoint() != "https://api.ecr-public.us-east-1.amazonaws.com"):
			t.Fatalf("ParseImage(%q) = %+v", req.Image, reg)
		case !public && len(reg.Account) != 12:
			t.Fatalf("ParseImage(%q) = %+v", req.Image, reg)
		}
		now := time.Unix(0, 0)
		out, err := Response(reg, Auth{Username: "AWS", Password: "p", ExpiresAt: now.Add(time.Hour)}, now)
		if err != nil || !json.Valid(out) {
			t.Fatalf("Response: %v %s", err, out)
		}
	})
}

func TestParseAuthorizationToken(t *testing.T) {
	tok := base64.StdEncoding.EncodeToString([]byte("AWS:secret:with:colons"))
	for api, answer := range map[API]string{
		Private: `{"authorizationData":[{"authorizationToken":"` + tok + `","expiresAt":1.7956e9,"proxyEndpoint":"https://x"}]}`,
		Public:  `{"authorizationData":{"authorizationToken":"` + tok + `","expiresAt":1.7956e9}}`,
	} {
		a, err := ParseAuthorizationToken(api, []byte(answer))
		if err != nil {
			t.Fatalf("%s: %v", api, err)
		}
		if a.Username != "AWS" || a.Password != "secret:with:colons" || a.ExpiresAt.Unix() != 1795600000 {
			t.Errorf("%s: got %+v", api, a)
		}
	}
	for _, bad := range []struct {
		api  API
		in   string
		want string
	}{
		{Private, `{}`, "ECR GetAuthorizationToken answer: no authorizationData"},
		{Private, `{"authorizationData":[]}`, "ECR GetAuthorizationToken answer: no authorizationData"},
		{Private, `{"authorizationData":{"authorizationToken":"` + tok + `","expiresAt":1}}`, "ECR GetAuthorizationToken answer: authorizationData is not a list"},
		{Private, `{"authorizationData":[{"authorizationToken":"!!","expiresAt":1}]}`, "authorizationData[0].authorizationToken is not base64"},
		{Private, `{"authorizationData":[{"authorizationToken":"` + base64.StdEncoding.EncodeToString([]byte("nocolon")) + `","expiresAt":1}]}`, "is not user:password"},
		{Private, `{"authorizationData":[{"authorizationToken":"` + tok + `","expiresAt":"soon"}]}`, "not the expected JSON"},
		{Public, `{}`, "ECR Public GetAuthorizationToken answer: no authorizationData"},
		{Public, `{"authorizationData":null}`, "ECR Public GetAuthorizationToken answer: no authorizationData"},
		{Public, `{"authorizationData":[{"authorizationToken":"` + tok + `","expiresAt":1}]}`, "ECR Public GetAuthorizationToken answer: authorizationData is not an object"},
		{Public, `{"authorizationData":{"authorizationToken":"!!","expiresAt":1}}`, "ECR Public GetAuthorizationToken answer: authorizationData.authorizationToken is not base64"},
		{Public, `{"authorizationData":{"authorizationToken":"` + tok + `"}}`, "ECR Public GetAuthorizationToken answer: authorizationData.expiresAt \"\" is not epoch seconds"},
	} {
		_, err := ParseAuthorizationToken(bad.api, []byte(bad.in))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s %s: err %v, want one containing %q", bad.api, bad.in, err, bad.want)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("error quotes the token: %v", err)
		}
	}
}

// The answer parser never panics and never quotes the token, for either
// service's shape.
func FuzzAuthorizationToken(f *testing.F) {
	tok := base64.StdEncoding.EncodeToString([]byte("AWS:secret"))
	f.Add(false, []byte(`{"authorizationData":[{"authorizationToken":"`+tok+`","expiresAt":1.7956e9}]}`))
	f.Add(true, []byte(`{"authorizationData":{"authorizationToken":"`+tok+`","expiresAt":1795600000}}`))
	f.Fuzz(func(t *testing.T, public bool, b []byte) {
		api := Private
		if public {
			api = Public
		}
		a, err := ParseAuthorizationToken(api, b)
		if err != nil {
			if strings.Contains(err.Error(), "secret") {
				t.Fatalf("error quotes the token: %v", err)
			}
			return
		}
		if a.Username == "" || a.Password == "" || a.ExpiresAt.IsZero() {
			t.Fatalf("accepted %+v", a)
		}
	})
}

// fakeECR checks what GetAuthorizationToken must send and answers like
// ECR: a login, or a JSON 1.1 error naming the first thing that was wrong.
func fakeECR(expires float64) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		auth := r.Header.Get("Authorization")
		var problem string
		switch {
		case r.Method != http.MethodPost || r.URL.Path != "/":
			problem = "want POST /, got " + r.Method + " " + r.URL.Path
		case r.Header.Get("X-Amz-Target") != Target:
			problem = "X-Amz-Target " + r.Header.Get("X-Amz-Target")
		case r.Header.Get("Content-Type") != "application/x-amz-json-1.1":
			problem = "Content-Type " + r.Header.Get("Content-Type")
		case !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=ASIAEXAMPLE/20261122/eu-central-1/ecr/aws4_request, SignedHeaders=") ||
			!strings.Contains(auth, "x-amz-target") || !strings.Contains(auth, "Signature="):
			problem = "Authorization is not SigV4 over x-amz-target for ecr in eu-central-1: " + auth
		case r.Header.Get("X-Amz-Security-Token") != "TOKEN":
			problem = "no session token"
		case string(body) != "{}":
			problem = "body " + string(body)
		}
		if problem != "" {
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(map[string]string{"__type": "InvalidSignatureException", "message": problem})
			return
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		tok := base64.StdEncoding.EncodeToString([]byte("AWS:ecr-password"))
		json.NewEncoder(w).Encode(map[string]any{"authorizationData": []map[string]any{{"authorizationToken": tok, "expiresAt": expires, "proxyEndpoint": "https://x"}}})
	}))
}

func TestClient(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	srv := fakeECR(float64(now.Add(12 * time.Hour).Unix()))
	defer srv.Close()
	c := Client{Endpoint: srv.URL, Region: "eu-central-1", Clock: func() time.Time { return now },
		Creds: aws.Credentials{AccessKeyID: "ASIAEXAMPLE", SecretAccessKey: "secret", SessionToken: "TOKEN"}}
	a, err := c.GetAuthorizationToken(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if a.Username != "AWS" || a.Password != "ecr-password" || !a.ExpiresAt.Equal(now.Add(12*time.Hour)) {
		t.Errorf("got %+v", a)
	}
	// An error answer is reported with ECR's error type.
	c.Region = "us-east-1"
	if _, err := c.GetAuthorizationToken(context.Background()); err == nil || !strings.Contains(err.Error(), "InvalidSignatureException") {
		t.Errorf("wrong region: %v", err)
	}
}

// TestClientPublic: ECR Public's call, as the ECR stand-in checks it
// (target, signature for ecr-public in us-east-1, session token), and its
// answer's one-object shape parsed.
func TestClientPublic(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	stub, err := stubecr.New(stubecr.Config{Credentials: sigv4.Credentials{AccessKeyID: "ASIAEXAMPLE", SecretAccessKey: "secret", SessionToken: "TOKEN"},
		Account: "111122223333", Region: "eu-central-1", Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(stub.Public())
	defer srv.Close()
	c := Client{API: Public, Endpoint: srv.URL, Region: PublicRegion, Clock: func() time.Time { return now },
		Creds: aws.Credentials{AccessKeyID: "ASIAEXAMPLE", SecretAccessKey: "secret", SessionToken: "TOKEN"}}
	a, err := c.GetAuthorizationToken(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if a.Username != "AWS" || !stub.ValidCredentials(a.Username, a.Password) || !a.ExpiresAt.Equal(now.Add(12*time.Hour)) {
		t.Errorf("got %+v", a)
	}
	// Signed for the node's region instead: refused, and the error names
	// the service and ECR Public's error type.
	c.Region = "eu-central-1"
	_, err = c.GetAuthorizationToken(context.Background())
	if want := "ECR Public GetAuthorizationToken at " + srv.URL + ": 403 Forbidden: InvalidSignatureException: "; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("wrong region:\n got %v\nwant %s...", err, want)
	}
}

func TestClientDeadline(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-block }))
	defer srv.Close()
	defer close(block)
	c := Client{Endpoint: srv.URL, Region: "us-east-1", Timeout: 200 * time.Millisecond, Creds: aws.Credentials{AccessKeyID: "A", SecretAccessKey: "S"}}
	start := time.Now()
	_, err := c.GetAuthorizationToken(context.Background())
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("hung ECR: err %v after %s", err, time.Since(start))
	}
}

// TestClientRefusesRedirect: a 3xx from the ECR endpoint is an error that
// names the request and the Location, and the signed request never
// reaches the redirect's target, whichever http.Client the caller gave.
func TestClientRefusesRedirect(t *testing.T) {
	var reached atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.WriteHeader(http.StatusTeapot)
	}))
	defer target.Close()
	for _, status := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+"/elsewhere", status)
		}))
		caller := &http.Client{}
		for _, hc := range []*http.Client{nil, caller} {
			c := Client{Endpoint: srv.URL, Region: "us-east-1", HTTP: hc,
				Creds: aws.Credentials{AccessKeyID: "ASIAEXAMPLE", SecretAccessKey: "secret", SessionToken: "TOKEN"}}
			_, err := c.GetAuthorizationToken(context.Background())
			want := fmt.Sprintf("ECR GetAuthorizationToken at %s: POST %s/ answered %d %s, a redirect to %s/elsewhere: AWS APIs do not redirect, so the signed request is not sent on",
				srv.URL, srv.URL, status, http.StatusText(status), target.URL)
			if err == nil || err.Error() != want {
				t.Errorf("HTTP %d:\n got %v\nwant %s", status, err, want)
			}
		}
		srv.Close()
		if caller.CheckRedirect != nil {
			t.Error("the caller's http.Client was changed")
		}
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the redirect target got %d requests", n)
	}
}

// TestClientAnswerLimit: an answer over the limit is refused by name, not
// cut into a JSON error.
func TestClientAnswerLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(bytes.Repeat([]byte(" "), maxBody+1))
	}))
	defer srv.Close()
	c := Client{Endpoint: srv.URL, Region: "us-east-1", Creds: aws.Credentials{AccessKeyID: "A", SecretAccessKey: "S"}}
	if _, err := c.GetAuthorizationToken(context.Background()); err == nil || !strings.HasSuffix(err.Error(), ": the answer is over the 1048576-byte limit; a real one is under 4 KiB") {
		t.Errorf("long answer: %v", err)
	}
}
