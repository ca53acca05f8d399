package ekstoken

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/berth-node/berth/internal/golden"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

var (
	testCreds = aws.Credentials{AccessKeyID: "ASIAEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", SessionToken: "SESSION/TOKEN+="}
	testNow   = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
)

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	golden.Check(t, p, got, *update)
}

func TestTokenFormat(t *testing.T) {
	tok, err := New(context.Background(), Request{Cluster: "my-cluster", Region: "eu-west-1", Creds: testCreds, Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	rest, ok := strings.CutPrefix(tok.Value, "k8s-aws-v1.")
	if !ok {
		t.Fatalf("token %q lacks the k8s-aws-v1. prefix", tok.Value)
	}
	if strings.ContainsAny(rest, "=+/") {
		t.Errorf("token body is not base64url without padding: %q", rest)
	}
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		t.Fatal(err)
	}
	u, err := Decode(tok.Value)
	if err != nil || u.String() != string(raw) {
		t.Fatalf("Decode: %v, %v", u, err)
	}
	if u.Scheme != "https" || u.Host != "sts.eu-west-1.amazonaws.com" || u.Path != "/" {
		t.Errorf("URL %s: want https://sts.eu-west-1.amazonaws.com/", u)
	}
	q := u.Query()
	for k, want := range map[string]string{
		"Action":               "GetCallerIdentity",
		"Version":              "2011-06-15",
		"X-Amz-Expires":        "60",
		"X-Amz-Algorithm":      "AWS4-HMAC-SHA256",
		"X-Amz-Credential":     "ASIAEXAMPLE/20261122/eu-west-1/sts/aws4_request",
		"X-Amz-Date":           "20261122T120000Z",
		"X-Amz-SignedHeaders":  "host;x-k8s-aws-id",
		"X-Amz-Security-Token": "SESSION/TOKEN+=",
	} {
		if got := q.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if sig := q.Get("X-Amz-Signature"); len(sig) != 64 {
		t.Errorf("X-Amz-Signature %q is not a hex SHA-256", sig)
	}
	if strings.Contains(u.RawQuery, "wJalrXUtnFEMI") {
		t.Error("the secret key is in the URL")
	}
	if want := testNow.Add(14 * time.Minute); !tok.Expiration.Equal(want) {
		t.Errorf("expiration %s, want %s (14 min, as aws eks get-token)", tok.Expiration, want)
	}
	// The cluster header is signed: another cluster gives another signature.
	other, err := New(context.Background(), Request{Cluster: "other", Region: "eu-west-1", Creds: testCreds, Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	ou, _ := Decode(other.Value)
	if ou.Query().Get("X-Amz-Signature") == q.Get("X-Amz-Signature") {
		t.Error("the signature does not depend on x-k8s-aws-id")
	}
}

func TestExecCredentialGolden(t *testing.T) {
	tok, err := New(context.Background(), Request{Cluster: "my-cluster", Region: "us-west-2", Creds: testCreds, Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	out, err := ExecCredential(tok)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "execcredential.golden", out)
	var v struct {
		APIVersion, Kind string
		Status           struct{ Token, ExpirationTimestamp string }
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	if v.APIVersion != APIVersion || v.Kind != "ExecCredential" || v.Status.Token != tok.Value || v.Status.ExpirationTimestamp != "2026-11-22T12:14:00Z" {
		t.Errorf("ExecCredential %s", out)
	}
}

func TestNewRejects(t *testing.T) {
	for _, r := range []Request{
		{Region: "us-east-1", Creds: testCreds},
		{Cluster: "c", Region: "evil.com/x", Creds: testCreds},
		{Cluster: "c", Region: "us-east-1"},
		{Cluster: "c", Region: "us-east-1", Creds: testCreds, Endpoint: "ftp://x"},
	} {
		if _, err := New(context.Background(), r); err == nil {
			t.Errorf("New(%+v) succeeded", r)
		}
	}
}

func TestSTSEndpoint(t *testing.T) {
	for region, want := range map[string]string{
		"us-east-1":      "https://sts.us-east-1.amazonaws.com",
		"cn-north-1":     "https://sts.cn-north-1.amazonaws.com.cn",
		"us-gov-west-1":  "https://sts.us-gov-west-1.amazonaws.com",
		"us-iso-east-1":  "https://sts.us-iso-east-1.c2s.ic.gov",
		"us-isob-east-1": "https://sts.us-isob-east-1.sc2s.sgov.gov",
	} {
		if got := STSEndpoint(region); got != want {
			t.Errorf("STSEndpoint(%s) = %s, want %s", region, got, want)
		}
		if !ValidRegion(region) {
			t.Errorf("ValidRegion(%s) = false", region)
		}
	}
	for _, bad := range []string{"", "us-east", "US-EAST-1", "us-east-1.evil.com", "us-east-1/"} {
		if ValidRegion(bad) {
			t.Errorf("ValidRegion(%q) = true", bad)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, tok := range []string{"", "k8s-aws-v2.abc", "k8s-aws-v1.!!!", "k8s-aws-v1.YWJj=="} {
		if _, err := Decode(tok); err == nil {
			t.Errorf("Decode(%q) succeeded", tok)
		}
	}
}
