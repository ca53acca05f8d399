// Package ekstoken makes the bearer token an EKS cluster's IAM
// authenticator accepts, the way `aws eks get-token` and
// aws-iam-authenticator do: a GetCallerIdentity URL for the regional STS
// endpoint, presigned with SigV4 for 60 seconds with the cluster name in
// the signed x-k8s-aws-id header, base64url-encoded behind "k8s-aws-v1.".
// The authenticator replays the URL to STS, which answers with the role,
// so the token proves the node's instance role without handing over any
// secret. It also renders the ExecCredential kubelet reads from an exec
// credential plugin. Everything here is pure: the caller brings the
// credentials and the clock.
package ekstoken

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

const (
	// Prefix marks a v1 token (aws-iam-authenticator's v1Prefix).
	Prefix = "k8s-aws-v1."
	// ClusterHeader carries the cluster name; signing it stops a token
	// minted for one cluster being replayed to another.
	ClusterHeader = "x-k8s-aws-id"
	// URLExpires is the presigned URL's X-Amz-Expires, as the AWS CLI and
	// aws-iam-authenticator set it.
	URLExpires = 60 * time.Second
	// Lifetime is how long after signing the token is reported to expire:
	// the authenticator accepts a token for 15 minutes after X-Amz-Date,
	// and the AWS CLI reports 14 so the client renews a minute early.
	// kubelet's exec plugin cache drops the token at expirationTimestamp.
	Lifetime = 14 * time.Minute
	// APIVersion is the ExecCredential version kubelet's kubeconfig asks for.
	APIVersion = "client.authentication.k8s.io/v1beta1"
)

// emptySHA256 is the payload hash of a GET with no body.
var emptySHA256 = func() string { s := sha256.Sum256(nil); return hex.EncodeToString(s[:]) }()

// regionRE is what an AWS region name looks like; the region goes into a
// host name, so anything else is refused rather than signed.
var regionRE = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)

// ValidRegion says whether region looks like an AWS region (us-east-1,
// cn-north-1, us-gov-west-1, us-iso-east-1).
func ValidRegion(region string) bool { return regionRE.MatchString(region) }

// STSEndpoint is the regional STS endpoint of region, in its partition's
// DNS suffix.
func STSEndpoint(region string) string {
	return "https://sts." + region + "." + DNSSuffix(region)
}

// DNSSuffix is the partition's domain for a region. The ISO partitions
// are named for completeness; berth is tested only on aws.
func DNSSuffix(region string) string {
	switch {
	case strings.HasPrefix(region, "cn-"):
		return "amazonaws.com.cn"
	case strings.HasPrefix(region, "us-isob-"):
		return "sc2s.sgov.gov"
	case strings.HasPrefix(region, "us-iso-"):
		return "c2s.ic.gov"
	case strings.HasPrefix(region, "eu-isoe-"):
		return "cloud.adc-e.uk"
	case strings.HasPrefix(region, "us-isof-"):
		return "csp.hci.ic.gov"
	default:
		return "amazonaws.com"
	}
}

// Request is what a token is made from.
type Request struct {
	Cluster string
	Region  string
	Creds   aws.Credentials
	// Now is the signing time.
	Now time.Time
	// Endpoint overrides STSEndpoint(Region) (tests).
	Endpoint string
}

// Token is a signed token and when the client should stop using it.
type Token struct {
	Value      string
	Expiration time.Time
}

// New signs a token.
func New(ctx context.Context, r Request) (Token, error) {
	if r.Cluster == "" {
		return Token{}, fmt.Errorf("signing EKS token: the cluster name is empty")
	}
	if !ValidRegion(r.Region) {
		return Token{}, fmt.Errorf("signing EKS token: region %q is not an AWS region name", r.Region)
	}
	if r.Creds.AccessKeyID == "" || r.Creds.SecretAccessKey == "" {
		return Token{}, fmt.Errorf("signing EKS token: no credentials")
	}
	ep := r.Endpoint
	if ep == "" {
		ep = STSEndpoint(r.Region)
	}
	u, err := url.Parse(ep)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return Token{}, fmt.Errorf("signing EKS token: STS endpoint %q is not an http(s) URL", ep)
	}
	u.Path = "/"
	u.RawQuery = url.Values{
		"Action":        {"GetCallerIdentity"},
		"Version":       {"2011-06-15"},
		"X-Amz-Expires": {fmt.Sprint(int(URLExpires / time.Second))},
	}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Token{}, fmt.Errorf("signing EKS token: %w", err)
	}
	req.Header.Set(ClusterHeader, r.Cluster)
	signed, _, err := v4.NewSigner().PresignHTTP(ctx, r.Creds, req, emptySHA256, "sts", r.Region, r.Now)
	if err != nil {
		return Token{}, fmt.Errorf("signing EKS token: presigning the STS GetCallerIdentity URL: %w", err)
	}
	return Token{
		Value:      Prefix + base64.RawURLEncoding.EncodeToString([]byte(signed)),
		Expiration: r.Now.Add(Lifetime).UTC().Truncate(time.Second),
	}, nil
}

// Decode returns the presigned URL inside a token (the authenticator's
// first step; here for tests and `berth eks-token --decode`-style checks).
func Decode(token string) (*url.URL, error) {
	rest, ok := strings.CutPrefix(token, Prefix)
	if !ok {
		return nil, fmt.Errorf("token does not start with %q", Prefix)
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return nil, fmt.Errorf("token is not base64url without padding: %w", err)
	}
	u, err := url.Parse(string(b))
	if err != nil {
		return nil, fmt.Errorf("token does not hold a URL: %w", err)
	}
	return u, nil
}

// ExecCredential renders the token as the JSON an exec credential plugin
// prints, with a trailing newline.
func ExecCredential(t Token) ([]byte, error) {
	ec := execCredential{
		Kind:       "ExecCredential",
		APIVersion: APIVersion,
		Status: execCredentialStatus{
			// metav1.Time's encoding: RFC 3339 in UTC, whole seconds.
			ExpirationTimestamp: t.Expiration.UTC().Format(time.RFC3339),
			Token:               t.Value,
		},
	}
	b, err := json.Marshal(ec)
	if err != nil {
		return nil, fmt.Errorf("encoding ExecCredential: %w", err)
	}
	return append(b, '\n'), nil
}

// execCredential is client.authentication.k8s.io/v1beta1 ExecCredential
// (k8s.io/client-go/pkg/apis/clientauthentication/v1beta1), only what
// berth writes, with the upstream JSON names: the upstream package linked
// client-go and apimachinery into PID 1 for one struct (issue 17).
// ekstoken_test.go checks the bytes against the upstream type's.
type execCredential struct {
	Kind       string               `json:"kind,omitempty"`
	APIVersion string               `json:"apiVersion,omitempty"`
	Spec       execCredentialSpec   `json:"spec,omitempty"`
	Status     execCredentialStatus `json:"status,omitempty"`
}

type execCredentialSpec struct {
	Interactive bool `json:"interactive"`
}

type execCredentialStatus struct {
	ExpirationTimestamp string `json:"expirationTimestamp,omitempty"`
	Token               string `json:"token,omitempty"`
}
