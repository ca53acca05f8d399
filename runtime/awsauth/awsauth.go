// Package awsauth runs berth's two AWS credential plugins end to end:
// `berth eks-token` (kubelet's exec credential plugin for EKS) and
// `berth ecr-credential-provider` (kubelet's image credential provider for
// ECR and ECR Public). It wires the instance role credentials from IMDS
// (creds) to the signers (ekstoken, ecr); the CLI in init only parses
// flags and moves bytes between stdin, stdout and these functions.
package awsauth

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/berth-node/berth/config/cmdline"
	"github.com/berth-node/berth/config/imds"
	"github.com/berth-node/berth/runtime/awsauth/creds"
	"github.com/berth-node/berth/runtime/awsauth/ecr"
	"github.com/berth-node/berth/runtime/awsauth/ekstoken"
)

// DefaultTimeout bounds one plugin run when the caller's context has no
// sooner deadline: IMDS, then STS signing or one ECR call.
const DefaultTimeout = 30 * time.Second

// Options are what both plugins share.
type Options struct {
	// IMDS are the endpoints to read credentials (and the region) from;
	// empty means EC2's defaults.
	IMDS []string
	// Creds, when set, is used instead of a fresh cache over IMDS (a
	// long-lived caller, or a benchmark of the warm path).
	Creds *creds.Cache
	// Getenv reads AWS_ENDPOINT_URL_*; nil reads nothing.
	Getenv func(string) string
	// Clock is the signing time; time.Now by default.
	Clock  func() time.Time
	HTTP   *http.Client
	Logger *slog.Logger
}

func (o *Options) fill() {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Getenv == nil {
		o.Getenv = func(string) string { return "" }
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// IMDSEndpoints picks the IMDS endpoints: flag (tests) over the kernel
// command line's berth.imds= over EC2's defaults (nil). berth.imds=off is
// an error: there is then no role to sign with.
func IMDSEndpoints(flag, procCmdline string) ([]string, error) {
	if flag != "" {
		return []string{flag}, nil
	}
	ov := imds.ParseOverride(cmdline.Parse(procCmdline).Get(imds.CmdlineKey))
	if ov.Off {
		return nil, fmt.Errorf("%s=off on the kernel command line: no IMDS, so no instance role credentials", imds.CmdlineKey)
	}
	return ov.Endpoints(), nil
}

func (o *Options) imdsClient() *imds.Client {
	return imds.New(imds.Options{Endpoints: o.IMDS, Logger: o.Logger})
}

func (o *Options) cache(c *imds.Client) *creds.Cache {
	if o.Creds != nil {
		return o.Creds
	}
	return creds.NewCache(c, creds.Options{Clock: o.Clock, Logger: o.Logger})
}

// endpointOverride is the SDKs' service-specific endpoint override
// (AWS_ENDPOINT_URL_<SERVICE>), then the global one (AWS_ENDPOINT_URL).
func endpointOverride(getenv func(string) string, service string) string {
	if v := getenv("AWS_ENDPOINT_URL_" + service); v != "" {
		return v
	}
	return getenv("AWS_ENDPOINT_URL")
}

// EKSTokenOptions are `berth eks-token`'s inputs.
type EKSTokenOptions struct {
	Options
	Cluster string
	// Region defaults to IMDS's placement/region.
	Region string
}

// EKSToken returns the ExecCredential JSON for the cluster.
func EKSToken(ctx context.Context, o EKSTokenOptions) ([]byte, error) {
	o.fill()
	if o.Cluster == "" {
		return nil, fmt.Errorf("eks-token: --cluster-name is required")
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	c := o.imdsClient()
	defer c.Close()
	region := o.Region
	if region == "" {
		b, err := c.Get(ctx, "meta-data/placement/region")
		if err != nil {
			return nil, fmt.Errorf("eks-token: no --region, and reading it from IMDS failed: %w", err)
		}
		region = strings.TrimSpace(string(b))
	}
	if !ekstoken.ValidRegion(region) {
		return nil, fmt.Errorf("eks-token: region %q is not an AWS region name", region)
	}
	cr, err := o.cache(c).Get(ctx)
	if err != nil {
		return nil, fmt.Errorf("eks-token: %w", err)
	}
	tok, err := ekstoken.New(ctx, ekstoken.Request{
		Cluster: o.Cluster, Region: region, Creds: creds.AWS(cr), Now: o.Clock(),
		Endpoint: endpointOverride(o.Getenv, "STS"),
	})
	if err != nil {
		return nil, fmt.Errorf("eks-token: %w", err)
	}
	return ekstoken.ExecCredential(tok)
}

// ECRCredentials answers one CredentialProviderRequest (stdin's bytes)
// with the CredentialProviderResponse JSON.
func ECRCredentials(ctx context.Context, request []byte, o Options) ([]byte, error) {
	o.fill()
	req, err := ecr.ParseRequest(request)
	if err != nil {
		return nil, fmt.Errorf("ecr-credential-provider: %w", err)
	}
	reg, err := ecr.ParseImage(req.Image)
	if err != nil {
		return nil, fmt.Errorf("ecr-credential-provider: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	c := o.imdsClient()
	defer c.Close()
	cr, err := o.cache(c).Get(ctx)
	if err != nil {
		return nil, fmt.Errorf("ecr-credential-provider: %w", err)
	}
	// AWS_ENDPOINT_URL_ECR or AWS_ENDPOINT_URL_ECR_PUBLIC: each service
	// its own override, as the AWS SDKs read them, so a test endpoint for
	// one never receives the other's signed call.
	ep := endpointOverride(o.Getenv, reg.API.EndpointEnv())
	if ep == "" {
		ep = reg.APIEndpoint()
	}
	cl := ecr.Client{API: reg.API, Endpoint: ep, Region: reg.Region, Creds: creds.AWS(cr), HTTP: o.HTTP, Clock: o.Clock}
	auth, err := cl.GetAuthorizationToken(ctx)
	if err != nil {
		return nil, fmt.Errorf("ecr-credential-provider: registry %s: %w", reg.Host, err)
	}
	return ecr.Response(reg, auth, o.Clock())
}
