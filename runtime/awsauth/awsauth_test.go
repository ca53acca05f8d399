package awsauth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-node/berth/config/imds"
	"github.com/berth-node/berth/qemu-tests/imdsserver"
	"github.com/berth-node/berth/runtime/awsauth/creds"
	"github.com/berth-node/berth/runtime/awsauth/ekstoken"
)

const (
	testKeyID  = "ASIAROLEEXAMPLE"
	testSecret = "role-secret-key-never-printed"
	testToken  = "role-session-token-never-printed"
)

// startIMDS serves an instance in us-west-2 with a role whose credentials
// expire in an hour.
func startIMDS(t testing.TB) string {
	t.Helper()
	in := imdsserver.DefaultInstance()
	in.Role = &imdsserver.Role{Name: "node-role", InstanceProfileARN: "arn:aws:iam::111122223333:instance-profile/node",
		InstanceProfileID: "AIPAEXAMPLE", AccessKeyID: testKeyID, SecretAccessKey: testSecret, Token: testToken,
		Expiration: time.Now().Add(time.Hour).UTC().Truncate(time.Second), LastUpdated: time.Now().UTC().Truncate(time.Second)}
	srv, err := imdsserver.New(imdsserver.Config{Instance: in})
	if err != nil {
		t.Fatal(err)
	}
	url, stop, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return url
}

func TestIMDSEndpoints(t *testing.T) {
	for _, tc := range []struct {
		flag, cmdline string
		want          string
		wantErr       bool
	}{
		{cmdline: "console=ttyS0 quiet", want: ""},
		{cmdline: "console=ttyS0 berth.imds=http://10.0.2.2:8080", want: "http://10.0.2.2:8080"},
		{flag: "http://127.0.0.1:1", cmdline: "berth.imds=http://10.0.2.2:8080", want: "http://127.0.0.1:1"},
		{cmdline: "berth.imds=off", wantErr: true},
	} {
		eps, err := IMDSEndpoints(tc.flag, tc.cmdline)
		if (err != nil) != tc.wantErr || strings.Join(eps, ",") != tc.want {
			t.Errorf("IMDSEndpoints(%q, %q) = %q, %v", tc.flag, tc.cmdline, eps, err)
		}
	}
}

func TestEKSTokenFromIMDS(t *testing.T) {
	url := startIMDS(t)
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	out, err := EKSToken(context.Background(), EKSTokenOptions{Options: Options{IMDS: []string{url}, Clock: func() time.Time { return now }}, Cluster: "prod"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), testSecret) {
		t.Fatal("the secret key is in the ExecCredential")
	}
	var ec struct {
		Status struct{ Token, ExpirationTimestamp string }
	}
	if err := json.Unmarshal(out, &ec); err != nil {
		t.Fatal(err)
	}
	u, err := ekstoken.Decode(ec.Status.Token)
	if err != nil {
		t.Fatal(err)
	}
	// Region from IMDS's placement/region, key and session token from the role.
	if u.Host != "sts.us-west-2.amazonaws.com" || u.Query().Get("X-Amz-Credential") != testKeyID+"/20261122/us-west-2/sts/aws4_request" ||
		u.Query().Get("X-Amz-Security-Token") != testToken || ec.Status.ExpirationTimestamp != "2026-11-22T12:14:00Z" {
		t.Errorf("token URL %s, expiry %s", u, ec.Status.ExpirationTimestamp)
	}
	// --region wins; AWS_ENDPOINT_URL_STS moves the endpoint.
	env := map[string]string{"AWS_ENDPOINT_URL_STS": "http://10.0.2.2:9443"}
	out, err = EKSToken(context.Background(), EKSTokenOptions{Options: Options{IMDS: []string{url}, Getenv: func(k string) string { return env[k] }}, Cluster: "prod", Region: "eu-west-1"})
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(out, &ec)
	if u, _ := ekstoken.Decode(ec.Status.Token); u == nil || u.Host != "10.0.2.2:9443" || !strings.Contains(u.Query().Get("X-Amz-Credential"), "/eu-west-1/sts/") {
		t.Errorf("override: token URL %v", u)
	}
}

func TestEKSTokenErrors(t *testing.T) {
	url := startIMDS(t)
	for _, tc := range []struct {
		o    EKSTokenOptions
		want string
	}{
		{EKSTokenOptions{Options: Options{IMDS: []string{url}}}, "--cluster-name"},
		{EKSTokenOptions{Options: Options{IMDS: []string{url}}, Cluster: "c", Region: "nowhere"}, "region"},
		{EKSTokenOptions{Options: Options{IMDS: []string{"http://127.0.0.1:1"}}, Cluster: "c", Region: "us-east-1"}, "credentials"},
	} {
		// IMDS retries a refused connection until the deadline.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := EKSToken(ctx, tc.o)
		cancel()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want one mentioning %q", tc.o, err, tc.want)
		}
	}
}

func TestECRCredentialsFromIMDS(t *testing.T) {
	url := startIMDS(t)
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	ecrSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential="+testKeyID+"/20261122/eu-west-1/ecr/aws4_request") ||
			r.Header.Get("X-Amz-Security-Token") != testToken {
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"__type":"UnrecognizedClientException","message":"bad signature"}`)
			return
		}
		tok := base64.StdEncoding.EncodeToString([]byte("AWS:registry-password"))
		io.WriteString(w, `{"authorizationData":[{"authorizationToken":"`+tok+`","expiresAt":`+
			strconv.FormatInt(now.Add(12*time.Hour).Unix(), 10)+`}]}`)
	}))
	defer ecrSrv.Close()
	env := map[string]string{"AWS_ENDPOINT_URL_ECR": ecrSrv.URL}
	req := `{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"111122223333.dkr.ecr.eu-west-1.amazonaws.com/app:v1"}`
	out, err := ECRCredentials(context.Background(), []byte(req), Options{IMDS: []string{url}, Clock: func() time.Time { return now }, Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"kind":"CredentialProviderResponse","apiVersion":"credentialprovider.kubelet.k8s.io/v1","cacheKeyType":"Registry","cacheDuration":"11h30m0s","auth":{"111122223333.dkr.ecr.eu-west-1.amazonaws.com":{"username":"AWS","password":"registry-password"}}}` + "\n"
	if string(out) != want {
		t.Errorf("response\n got %s\nwant %s", out, want)
	}
	// Not an ECR image: refused before any network call.
	bad := strings.Replace(req, "111122223333.dkr.ecr.eu-west-1.amazonaws.com", "docker.io/library", 1)
	if _, err := ECRCredentials(context.Background(), []byte(bad), Options{IMDS: []string{"http://127.0.0.1:1"}}); err == nil || !strings.Contains(err.Error(), "not an ECR registry") {
		t.Errorf("non-ECR image: %v", err)
	}
}

// BenchmarkEKSTokenCold is one `berth eks-token` run's work: IMDS token,
// role listing and credentials over loopback, then signing.
func BenchmarkEKSTokenCold(b *testing.B) {
	url := startIMDS(b)
	for b.Loop() {
		if _, err := EKSToken(context.Background(), EKSTokenOptions{Options: Options{IMDS: []string{url}}, Cluster: "prod", Region: "us-west-2"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEKSTokenWarm signs with credentials already cached in-process.
func BenchmarkEKSTokenWarm(b *testing.B) {
	url := startIMDS(b)
	c := imds.New(imds.Options{Endpoints: []string{url}})
	cache := creds.NewCache(c, creds.Options{})
	if _, err := cache.Get(context.Background()); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := EKSToken(context.Background(), EKSTokenOptions{Options: Options{Creds: cache}, Cluster: "prod", Region: "us-west-2"}); err != nil {
			b.Fatal(err)
		}
	}
	if cache.Fetches() != 1 {
		b.Fatalf("warm path fetched %d times", cache.Fetches())
	}
}

// TestNoSignedRequestFollowsARedirect: the ECR endpoint answering with a
// redirect to another host fails the plugin with an error naming the
// redirect, and the other host receives nothing. `berth eks-token` sends
// nothing to STS at all (the token is a presigned URL the authenticator
// replays), which the STS stand-in here checks.
func TestNoSignedRequestFollowsARedirect(t *testing.T) {
	url := startIMDS(t)
	var reached atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Add(1) }))
	defer elsewhere.Close()
	var asked atomic.Int32
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.Redirect(w, r, elsewhere.URL+"/", http.StatusTemporaryRedirect)
	}))
	defer redirecting.Close()
	env := map[string]string{"AWS_ENDPOINT_URL_ECR": redirecting.URL, "AWS_ENDPOINT_URL_STS": redirecting.URL}
	getenv := func(k string) string { return env[k] }
	req := `{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"111122223333.dkr.ecr.eu-west-1.amazonaws.com/app:v1"}`
	_, err := ECRCredentials(context.Background(), []byte(req), Options{IMDS: []string{url}, Getenv: getenv})
	if err == nil || !strings.Contains(err.Error(), "307 Temporary Redirect, a redirect to "+elsewhere.URL+"/") {
		t.Errorf("ECR redirect: %v", err)
	}
	if _, err := EKSToken(context.Background(), EKSTokenOptions{Options: Options{IMDS: []string{url}, Getenv: getenv}, Cluster: "prod"}); err != nil {
		t.Fatal(err)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the redirect target got %d requests", n)
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("the endpoints got %d requests, want 1 (ECR's; none to STS)", n)
	}
}
