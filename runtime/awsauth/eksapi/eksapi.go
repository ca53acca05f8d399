// Package eksapi calls Amazon EKS's DescribeCluster with the instance
// role's credentials: berth's one AWS call for config outside IMDS. Amazon
// Linux 2's bootstrap.sh made it when its user data gave no API server
// endpoint or CA (the EKS CloudFormation node group template passes only
// the cluster name), and took the service CIDR from the answer too; berth
// does the same for such a script (nodeconfig.Result.DescribeCluster).
// The protocol is EKS's REST-JSON: GET /clusters/{name} on
// eks.{region}.{domain}, signed with SigV4 for service "eks".
package eksapi

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/berth-node/berth/config/nodeconfig"
)

const (
	// DefaultTimeout bounds one call, retries included, when ctx has no
	// sooner deadline.
	DefaultTimeout = 30 * time.Second
	// EndpointEnv is the SDKs' override of EKS's endpoint
	// (AWS_ENDPOINT_URL_EKS), from the service ID "EKS".
	EndpointEnv = "AWS_ENDPOINT_URL_EKS"
	// maxBody bounds the answer read; a real one is a few KiB.
	maxBody = 1 << 20
)

// Cluster is what a node needs from the answer.
type Cluster struct {
	Name     string
	Endpoint string
	// CertificateAuthority is the CA bundle in PEM (decoded from the
	// answer's base64).
	CertificateAuthority []byte
	ServiceIPv4CIDR      string
	ServiceIPv6CIDR      string
	// IPFamily is ipv4 or ipv6.
	IPFamily string
	ID       string
	Status   string
}

// Client calls DescribeCluster.
type Client struct {
	// Endpoint is the API URL: Endpoint(region, domain), or
	// AWS_ENDPOINT_URL_EKS.
	Endpoint string
	Region   string
	Creds    aws.Credentials
	HTTP     *http.Client
	// Clock is the signing time source; time.Now by default.
	Clock func() time.Time
	// Timeout bounds the call when ctx has no sooner deadline; default
	// DefaultTimeout.
	Timeout time.Duration
	// Retry is the pause before each retry of a throttled, failed (5xx)
	// or unreachable call; default 1 s, 2 s, 4 s... within Timeout.
	Retry func(attempt int) time.Duration
}

// Domain is the AWS domain of region's endpoints: amazonaws.com.cn in the
// China regions, amazonaws.com elsewhere.
func Domain(region string) string {
	if strings.HasPrefix(region, "cn-") {
		return "amazonaws.com.cn"
	}
	return "amazonaws.com"
}

// Endpoint is EKS's regional API URL.
func Endpoint(region, domain string) string {
	if domain == "" {
		domain = "amazonaws.com"
	}
	return "https://eks." + region + "." + domain
}

// retryable marks an answer worth another try: throttling, a server
// error, no answer at all.
type retryable struct{ error }

func (r retryable) Unwrap() error { return r.error }

// Described is cl as nodeconfig.FillFromEKS takes it.
func (cl Cluster) Described() nodeconfig.DescribedCluster {
	return nodeconfig.DescribedCluster{Endpoint: cl.Endpoint, CertificateAuthority: cl.CertificateAuthority,
		ServiceIPv4CIDR: cl.ServiceIPv4CIDR, ServiceIPv6CIDR: cl.ServiceIPv6CIDR, IPFamily: cl.IPFamily, ID: cl.ID}
}

// DescribeCluster returns the named cluster, retrying what EKS answers
// with throttling or a 5xx, and failed connections, until c.Timeout.
// Errors name the call, the cluster and the endpoint.
func (c *Client) DescribeCluster(ctx context.Context, name string) (Cluster, error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pause := c.Retry
	if pause == nil {
		pause = func(n int) time.Duration { return time.Second << min(n, 4) }
	}
	var last error
	for attempt := 0; ; attempt++ {
		cl, err := c.once(ctx, name)
		if err == nil {
			return cl, nil
		}
		// A call the deadline cut says less than the answer before it.
		if last == nil || ctx.Err() == nil {
			last = fmt.Errorf("eks:DescribeCluster %s at %s (region %s): %w", name, c.Endpoint, c.Region, err)
		}
		if !errors.As(err, new(retryable)) {
			return Cluster{}, last
		}
		select {
		case <-ctx.Done():
			return Cluster{}, fmt.Errorf("%w (gave up after %d attempts in %s)", last, attempt+1, timeout)
		case <-time.After(pause(attempt)):
		}
	}
}

func (c *Client) once(ctx context.Context, name string) (Cluster, error) {
	now := time.Now
	if c.Clock != nil {
		now = c.Clock
	}
	hc := http.Client{}
	if c.HTTP != nil {
		hc = *c.HTTP
	}
	// EKS never redirects; following one would send the signed request
	// and its session token wherever it points.
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	u := strings.TrimRight(c.Endpoint, "/") + "/clusters/" + url.PathEscape(name)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return Cluster{}, err
	}
	sum := sha256.Sum256(nil)
	if err := v4.NewSigner().SignHTTP(ctx, c.Creds, req, hex.EncodeToString(sum[:]), "eks", c.Region, now()); err != nil {
		return Cluster{}, fmt.Errorf("signing: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Cluster{}, retryable{err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return Cluster{}, retryable{fmt.Errorf("reading the answer: %w", err)}
	}
	if len(b) > maxBody {
		return Cluster{}, fmt.Errorf("the answer is over the %d-byte limit", maxBody)
	}
	if resp.StatusCode != http.StatusOK {
		e := fmt.Errorf("%s: %s", resp.Status, apiError(resp.Header.Get("X-Amzn-Errortype"), b))
		if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests || strings.Contains(resp.Header.Get("X-Amzn-Errortype"), "Throttl") {
			return Cluster{}, retryable{e}
		}
		return Cluster{}, e
	}
	return ParseDescribeCluster(b)
}

// apiError is an error answer in a line: its type and message.
func apiError(typ string, b []byte) string {
	typ, _, _ = strings.Cut(typ, ":") // "Code:http://internal..." in some answers
	var e struct {
		Message  string `json:"message"`
		Message2 string `json:"Message"`
	}
	_ = json.Unmarshal(b, &e)
	msg := e.Message + e.Message2
	if msg == "" {
		msg = strings.TrimSpace(string(b[:min(len(b), 200)]))
	}
	if typ == "" {
		return msg
	}
	return typ + ": " + msg
}

// ParseDescribeCluster decodes DescribeCluster's answer: a cluster with
// an endpoint and a CA, neither of which a CREATING cluster has yet.
func ParseDescribeCluster(b []byte) (Cluster, error) {
	var v struct {
		Cluster *struct {
			Name                 string `json:"name"`
			ID                   string `json:"id"`
			Endpoint             string `json:"endpoint"`
			Status               string `json:"status"`
			CertificateAuthority struct {
				Data string `json:"data"`
			} `json:"certificateAuthority"`
			KubernetesNetworkConfig struct {
				ServiceIpv4Cidr string `json:"serviceIpv4Cidr"`
				ServiceIpv6Cidr string `json:"serviceIpv6Cidr"`
				IPFamily        string `json:"ipFamily"`
			} `json:"kubernetesNetworkConfig"`
		} `json:"cluster"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return Cluster{}, fmt.Errorf("the answer is not DescribeCluster's JSON: %w", err)
	}
	if v.Cluster == nil {
		return Cluster{}, fmt.Errorf("the answer has no cluster")
	}
	in := v.Cluster
	if in.Endpoint == "" || in.CertificateAuthority.Data == "" {
		return Cluster{}, fmt.Errorf("cluster %q (status %s) has no endpoint or no certificate authority yet", in.Name, in.Status)
	}
	ca, err := base64.StdEncoding.DecodeString(in.CertificateAuthority.Data)
	if err != nil {
		return Cluster{}, fmt.Errorf("cluster %q: certificateAuthority.data is not base64: %w", in.Name, err)
	}
	n := in.KubernetesNetworkConfig
	return Cluster{Name: in.Name, Endpoint: in.Endpoint, CertificateAuthority: ca, ServiceIPv4CIDR: n.ServiceIpv4Cidr,
		ServiceIPv6CIDR: n.ServiceIpv6Cidr, IPFamily: n.IPFamily, ID: in.ID, Status: in.Status}, nil
}
