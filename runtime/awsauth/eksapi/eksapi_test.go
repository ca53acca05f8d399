package eksapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/berth-node/berth/qemu-tests/awsstub/eks"
	"github.com/berth-node/berth/qemu-tests/awsstub/sigv4"
)

var roleCreds = sigv4.Credentials{AccessKeyID: "ASIAROLE", SecretAccessKey: "role-secret", SessionToken: "role-token"}

func awsCreds(c sigv4.Credentials) aws.Credentials {
	return aws.Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, SessionToken: c.SessionToken}
}

// TestDescribeClusterAgainstStandIn: berth's client signs and reads
// DescribeCluster as the EKS stand-in expects, the stand-in the AWS SDK's
// own client is held to (qemu-tests/awsstub/eks).
func TestDescribeClusterAgainstStandIn(t *testing.T) {
	s, err := eks.New(eks.Config{Credentials: roleCreds, Region: "us-west-2", Cluster: eks.Cluster{
		Name: "prod", ID: "0123abcd", Endpoint: "https://ABC.gr7.us-west-2.eks.amazonaws.com", Status: "ACTIVE",
		CertificateAuthority:    &eks.CertificateAuthority{Data: "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="},
		KubernetesNetworkConfig: &eks.KubernetesNetworkConfig{ServiceIpv4Cidr: "172.20.0.0/16", IPFamily: "ipv4"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	u, stop, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	c := &Client{Endpoint: u, Region: "us-west-2", Creds: awsCreds(roleCreds)}
	got, err := c.DescribeCluster(context.Background(), "prod")
	if err != nil {
		t.Fatal(err)
	}
	if got.Endpoint != "https://ABC.gr7.us-west-2.eks.amazonaws.com" || string(got.CertificateAuthority) != "-----BEGIN CERTIFICATE-----\n" ||
		got.ServiceIPv4CIDR != "172.20.0.0/16" || got.IPFamily != "ipv4" || got.ID != "0123abcd" {
		t.Errorf("DescribeCluster = %+v", got)
	}
	// Refusals are not retried, and say what was called.
	_, err = c.DescribeCluster(context.Background(), "nope")
	if err == nil || !strings.Contains(err.Error(), "eks:DescribeCluster nope at "+u) || !strings.Contains(err.Error(), "ResourceNotFoundException: No cluster found for name: nope.") {
		t.Errorf("unknown cluster: %v", err)
	}
	bad := &Client{Endpoint: u, Region: "us-west-2", Creds: awsCreds(sigv4.Credentials{AccessKeyID: "ASIAROLE", SecretAccessKey: "wrong", SessionToken: "role-token"})}
	if _, err := bad.DescribeCluster(context.Background(), "prod"); err == nil || !strings.Contains(err.Error(), "InvalidSignatureException") {
		t.Errorf("wrong secret: %v", err)
	}
	if n := len(s.Requests()); n != 3 {
		t.Errorf("%d requests, want 3 (no retry of a refusal)", n)
	}
}

// TestDescribeClusterRetriesThenGivesUp: throttling and 5xx are retried;
// the deadline bounds the whole call and the error counts the attempts.
func TestDescribeClusterRetriesThenGivesUp(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) < 3 {
			w.Header().Set("X-Amzn-Errortype", "ThrottlingException")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"message":"Rate exceeded"}`))
			return
		}
		w.Header().Set("X-Amzn-Errortype", "ServerException")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"message":"boom"}`))
	}))
	defer srv.Close()
	c := &Client{Endpoint: srv.URL, Region: "us-west-2", Creds: awsCreds(roleCreds), Timeout: 2 * time.Second,
		Retry: func(int) time.Duration { return 20 * time.Millisecond }}
	_, err := c.DescribeCluster(context.Background(), "prod")
	if err == nil || !strings.Contains(err.Error(), "ServerException: boom") || !strings.Contains(err.Error(), "gave up after") || n.Load() < 3 {
		t.Errorf("after %d calls: %v", n.Load(), err)
	}
}

func TestParseDescribeCluster(t *testing.T) {
	for _, tc := range []struct{ in, err string }{
		{`{"cluster":{"name":"c","status":"CREATING"}}`, `cluster "c" (status CREATING) has no endpoint or no certificate authority yet`},
		{`{"cluster":{"name":"c","endpoint":"https://x","certificateAuthority":{"data":"!!"}}}`, "certificateAuthority.data is not base64"},
		{`{}`, "the answer has no cluster"},
		{`[`, "not DescribeCluster's JSON"},
	} {
		if _, err := ParseDescribeCluster([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want %q", tc.in, err, tc.err)
		}
	}
}

// FuzzParseDescribeCluster: any answer; no panic, and a parsed cluster
// always has an endpoint and a CA.
func FuzzParseDescribeCluster(f *testing.F) {
	f.Add([]byte(`{"cluster":{"name":"c","endpoint":"https://x","status":"ACTIVE","certificateAuthority":{"data":"eA=="},"kubernetesNetworkConfig":{"serviceIpv4Cidr":"10.100.0.0/16"}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseDescribeCluster(b)
		if err == nil && (c.Endpoint == "" || len(c.CertificateAuthority) == 0) {
			t.Fatalf("parsed %+v from %q", c, b)
		}
	})
}
