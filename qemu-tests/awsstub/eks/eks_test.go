package eks

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdkeks "github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/smithy-go"

	"github.com/berth-node/berth/qemu-tests/awsstub/sigv4"
)

var testCreds = sigv4.Credentials{AccessKeyID: "ASIAEKSSTANDIN", SecretAccessKey: "eks-secret", SessionToken: "eks-token"}

func start(t *testing.T) (*Server, string) {
	t.Helper()
	s, err := New(Config{Credentials: testCreds, Region: "us-west-2", Cluster: Cluster{
		Name: "prod", ID: "0123abcd", Endpoint: "https://ABC.gr7.us-west-2.eks.amazonaws.com", Status: "ACTIVE", Version: "1.35",
		CertificateAuthority:    &CertificateAuthority{Data: "LS0tLS1CRUdJTg=="},
		KubernetesNetworkConfig: &KubernetesNetworkConfig{ServiceIpv4Cidr: "172.20.0.0/16", IPFamily: "ipv4"},
	}})
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

func sdkClient(u string, c sigv4.Credentials, region string) *sdkeks.Client {
	return sdkeks.New(sdkeks.Options{
		Region:       region,
		BaseEndpoint: aws.String(u),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, SessionToken: c.SessionToken}, nil
		}),
		RetryMaxAttempts: 1,
		HTTPClient:       &http.Client{Timeout: 10 * time.Second},
	})
}

// TestSDKDescribesCluster: AWS's own EKS client (aws-sdk-go-v2) signs,
// sends and decodes DescribeCluster against the stand-in, so the stand-in
// speaks EKS's protocol: path, SigV4 scope, answer shape.
func TestSDKDescribesCluster(t *testing.T) {
	s, u := start(t)
	out, err := sdkClient(u, testCreds, "us-west-2").DescribeCluster(context.Background(), &sdkeks.DescribeClusterInput{Name: aws.String("prod")})
	if err != nil {
		t.Fatal(err)
	}
	c := out.Cluster
	if aws.ToString(c.Name) != "prod" || aws.ToString(c.Endpoint) != "https://ABC.gr7.us-west-2.eks.amazonaws.com" || aws.ToString(c.Id) != "0123abcd" ||
		c.Status != types.ClusterStatusActive || aws.ToString(c.CertificateAuthority.Data) != "LS0tLS1CRUdJTg==" ||
		aws.ToString(c.KubernetesNetworkConfig.ServiceIpv4Cidr) != "172.20.0.0/16" || c.KubernetesNetworkConfig.IpFamily != types.IpFamilyIpv4 {
		t.Errorf("the SDK decoded %+v", c)
	}
	if r := s.Requests(); len(r) != 1 || r[0].Path != "/clusters/prod" || r[0].Status != 200 {
		t.Errorf("requests %+v", r)
	}
}

// TestSDKSeesEKSErrors: what the stand-in refuses, the SDK decodes as EKS's
// own error types.
func TestSDKSeesEKSErrors(t *testing.T) {
	_, u := start(t)
	ctx := context.Background()
	var nf *types.ResourceNotFoundException
	if _, err := sdkClient(u, testCreds, "us-west-2").DescribeCluster(ctx, &sdkeks.DescribeClusterInput{Name: aws.String("other")}); !errors.As(err, &nf) {
		t.Errorf("an unknown cluster: %v, want ResourceNotFoundException", err)
	}
	wrong := testCreds
	wrong.SecretAccessKey = "not-it"
	for _, tc := range []struct {
		name   string
		creds  sigv4.Credentials
		region string
		code   string
	}{
		{"wrong secret", wrong, "us-west-2", "InvalidSignatureException"},
		{"wrong region", testCreds, "eu-west-1", "InvalidSignatureException"},
	} {
		_, err := sdkClient(u, tc.creds, tc.region).DescribeCluster(ctx, &sdkeks.DescribeClusterInput{Name: aws.String("prod")})
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
}
