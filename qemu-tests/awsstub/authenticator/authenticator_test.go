package authenticator

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/berth-node/berth/qemu-tests/awsstub/sigv4"
	"github.com/berth-node/berth/qemu-tests/awsstub/sts"
)

var (
	creds    = sigv4.Credentials{AccessKeyID: "ASIAEXAMPLE", SecretAccessKey: "secret", SessionToken: "session"}
	signedAt = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	roleARN  = "arn:aws:iam::111122223333:role/node-role"
	instance = "i-0123456789abcdef0"
	dnsName  = "ip-10-0-1-23.us-west-2.compute.internal"
)

// makeToken builds a token as `berth eks-token` does.
func makeToken(t *testing.T, host, cluster string, c sigv4.Credentials, at time.Time) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "https://"+host+"/?Action=GetCallerIdentity&Version=2011-06-15&X-Amz-Expires=60", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-k8s-aws-id", cluster)
	u, _, err := v4.NewSigner().PresignHTTP(context.Background(),
		aws.Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, SessionToken: c.SessionToken},
		req, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "sts", "us-west-2", at)
	if err != nil {
		t.Fatal(err)
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(u))
}

type fixture struct {
	auth    *Server
	url     string
	client  *http.Client
	stsStub *sts.Server
}

func start(t *testing.T, now time.Time, roles []RoleMapping, dns map[string]string) fixture {
	t.Helper()
	clock := func() time.Time { return now }
	st, err := sts.New(sts.Config{Credentials: creds, Account: "111122223333", RoleName: "node-role", SessionName: instance, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	stsURL, stopSTS, err := st.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopSTS)
	a, err := New(Config{ClusterID: "demo", STSURL: stsURL, Roles: roles,
		PrivateDNSNames: dns, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	u, stop, err := a.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if !strings.HasPrefix(u, "https://") {
		t.Fatalf("webhook URL %s is not https", u)
	}
	return fixture{auth: a, url: u, client: &http.Client{Transport: &http.Transport{TLSClientConfig: a.ClientTLS()}}, stsStub: st}
}

func (f fixture) review(t *testing.T, token string) ReviewStatus {
	t.Helper()
	body, _ := json.Marshal(TokenReview{APIVersion: "authentication.k8s.io/v1", Kind: "TokenReview", Spec: ReviewSpec{Token: token}})
	resp, err := f.client.Post(f.url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("webhook status %s", resp.Status)
	}
	var tr TokenReview
	if err := json.NewDecoder(resp.Body).Decode(&tr); err != nil {
		t.Fatal(err)
	}
	if tr.APIVersion != "authentication.k8s.io/v1" || tr.Kind != "TokenReview" {
		t.Fatalf("response kind %s/%s", tr.APIVersion, tr.Kind)
	}
	return tr.Status
}

func TestNodeTokenMapsToNodeUser(t *testing.T) {
	f := start(t, signedAt.Add(10*time.Second), []RoleMapping{NodeRole(roleARN)}, map[string]string{instance: dnsName})
	st := f.review(t, makeToken(t, "sts.us-west-2.amazonaws.com", "demo", creds, signedAt))
	if !st.Authenticated || st.User == nil {
		t.Fatalf("not authenticated: %+v", st)
	}
	if st.User.Username != "system:node:"+dnsName {
		t.Errorf("username %q", st.User.Username)
	}
	if !reflect.DeepEqual(st.User.Groups, []string{"system:bootstrappers", "system:nodes"}) {
		t.Errorf("groups %v", st.User.Groups)
	}
	if got := st.User.Extra["canonicalArn"]; len(got) != 1 || got[0] != roleARN {
		t.Errorf("canonicalArn %v", got)
	}
	if got := st.User.Extra["accessKeyId"]; len(got) != 1 || got[0] != creds.AccessKeyID {
		t.Errorf("accessKeyId %v", got)
	}
	// The authenticator really asked STS, which verified the signature.
	if r := f.stsStub.Requests(); len(r) != 1 || r[0].Status != 200 {
		t.Fatalf("STS request log %+v", r)
	}
}

func TestRejectedTokens(t *testing.T) {
	good := makeToken(t, "sts.us-west-2.amazonaws.com", "demo", creds, signedAt)
	wrong := creds
	wrong.SecretAccessKey = "guess"
	urlToken := func(u string) string { return TokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(u)) }
	cases := []struct {
		name, token string
		now         time.Time
		roles       []RoleMapping
		want        string
	}{
		{"wrong cluster", makeToken(t, "sts.us-west-2.amazonaws.com", "other", creds, signedAt), signedAt, nil, "SignatureDoesNotMatch"},
		{"wrong secret", makeToken(t, "sts.us-west-2.amazonaws.com", "demo", wrong, signedAt), signedAt, nil, "SignatureDoesNotMatch"},
		{"expired at STS", good, signedAt.Add(2 * time.Minute), nil, "ExpiredToken"},
		{"older than 15 minutes", good, signedAt.Add(16 * time.Minute), nil, "token expired"},
		{"not an STS host", makeToken(t, "evil.example.com", "demo", creds, signedAt), signedAt, nil, "not an STS endpoint"},
		{"no prefix", strings.TrimPrefix(good, TokenPrefix), signedAt, nil, "does not start with"},
		{"padded base64", good + "=", signedAt, nil, "base64url"},
		{"http", urlToken("http://sts.amazonaws.com/?Action=GetCallerIdentity"), signedAt, nil, "want https"},
		{"other action", urlToken("https://sts.amazonaws.com/?Action=AssumeRole"), signedAt, nil, "want GetCallerIdentity"},
		{"unmapped role", good, signedAt, []RoleMapping{NodeRole("arn:aws:iam::111122223333:role/other")}, "not mapped"},
		{"unknown instance", good, signedAt, []RoleMapping{NodeRole(roleARN)}, "not a known instance"},
		{"smuggled parameter", urlToken("https://sts.amazonaws.com/?Action=GetCallerIdentity&Policy=x"), signedAt, nil, "unexpected query parameter"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			roles := c.roles
			if roles == nil {
				roles = []RoleMapping{NodeRole(roleARN)}
			}
			dns := map[string]string{instance: dnsName}
			if c.name == "unknown instance" {
				dns = map[string]string{}
			}
			f := start(t, c.now, roles, dns)
			st := f.review(t, c.token)
			if st.Authenticated || st.User != nil {
				t.Fatalf("authenticated: %+v", st)
			}
			if !strings.Contains(st.Error, c.want) {
				t.Fatalf("error %q does not mention %q", st.Error, c.want)
			}
		})
	}
}

func TestParseTokenAcceptsGlobalEndpoint(t *testing.T) {
	tok := makeToken(t, "sts.amazonaws.com", "demo", creds, signedAt)
	u, err := ParseToken(tok, signedAt)
	if err != nil {
		t.Fatal(err)
	}
	if u.Host != "sts.amazonaws.com" {
		t.Fatalf("host %s", u.Host)
	}
}

func TestNewRejectsBadRoleARN(t *testing.T) {
	_, err := New(Config{ClusterID: "demo", STSURL: "http://127.0.0.1:1", Roles: []RoleMapping{NodeRole("node-role")}})
	if err == nil || !strings.Contains(err.Error(), "Roles[0].RoleARN") {
		t.Fatalf("err %v", err)
	}
}
