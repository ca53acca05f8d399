package awsstub

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/berth-node/berth/qemu-tests/awsstub/authenticator"
	"github.com/berth-node/berth/qemu-tests/awsstub/ecr"
	"github.com/berth-node/berth/qemu-tests/awsstub/eks"
	"github.com/berth-node/berth/qemu-tests/awsstub/registry"
	"github.com/berth-node/berth/qemu-tests/awsstub/sigv4"
	"github.com/berth-node/berth/qemu-tests/awsstub/sts"
	"github.com/berth-node/berth/qemu-tests/imdsserver"
)

// GuestHost is the host as a QEMU user-network guest reaches it.
const GuestHost = "10.0.2.2"

// Config is one node's AWS world: the same instance (and role credentials)
// the IMDS stand-in serves.
type Config struct {
	// Instance must have a Role with credentials; its InstanceID is the
	// role session name and LocalHostname its private DNS name.
	Instance imdsserver.Instance
	// ClusterName is what tokens must be bound to (NodeConfig
	// spec.cluster.name).
	ClusterName string
	// Addr is where every server listens (default 127.0.0.1:0: QEMU's
	// user network forwards the guest's 10.0.2.2 to the host's loopback).
	Addr string
	// Images are OCI image-layout tarballs the registry serves, by path;
	// each image under its io.containerd.image.name without the host.
	Images []string
	// TokenValidFor is how long after signing STS accepts a token (default
	// 15 minutes, what EKS documents: `berth eks-token`, like the AWS CLI,
	// presigns for 60 s but reports 14 minutes, and kubelet caches it that
	// long). StrictExpires enforces each token's X-Amz-Expires instead.
	TokenValidFor time.Duration
	StrictExpires bool
	Clock         func() time.Time
	Logger        *slog.Logger
}

// Stack is the four stand-ins, started.
type Stack struct {
	STS           *sts.Server
	Authenticator *authenticator.Server
	ECR           *ecr.Server
	// EKS answers DescribeCluster for ClusterName: CREATING (no endpoint,
	// no CA) until the test gives it its control plane's (EKS.SetCluster).
	EKS      *eks.Server
	Registry *registry.Server
	// Host URLs (http://127.0.0.1:port, the webhook https). ECRPublicURL
	// is ECR's Public API (ECR.Public), for AWS_ENDPOINT_URL_ECR_PUBLIC.
	STSURL, WebhookURL, ECRURL, ECRPublicURL, EKSURL, RegistryURL string
	// WebhookCA signs the webhook's certificate (controlplane.Options.TokenWebhookCA).
	WebhookCA []byte
	stops     []func()
}

// Start starts STS, the authenticator (wired to this STS, mapping the
// instance role to system:node:<LocalHostname>), ECR and ECR Public (one
// stand-in, two endpoints) and the registry (accepting what either issues). On error nothing is left running.
func Start(cfg Config) (_ *Stack, err error) {
	in := cfg.Instance
	if in.Role == nil || in.Role.AccessKeyID == "" || in.Role.SecretAccessKey == "" {
		return nil, errors.New("awsstub: Instance.Role with AccessKeyID and SecretAccessKey is required")
	}
	if in.InstanceID == "" || in.LocalHostname == "" || in.AccountID == "" || in.Region == "" {
		return nil, errors.New("awsstub: Instance InstanceID, LocalHostname, AccountID and Region are required")
	}
	if cfg.ClusterName == "" {
		return nil, errors.New("awsstub: ClusterName is required")
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.TokenValidFor == 0 {
		cfg.TokenValidFor = 15 * time.Minute
	}
	if cfg.StrictExpires {
		cfg.TokenValidFor = 0
	}
	creds := sigv4.Credentials{AccessKeyID: in.Role.AccessKeyID, SecretAccessKey: in.Role.SecretAccessKey, SessionToken: in.Role.Token}
	s := &Stack{}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	start := func(name string, f func(string) (string, func(), error)) (string, error) {
		u, stop, err := f(cfg.Addr)
		if err != nil {
			return "", fmt.Errorf("awsstub: starting %s: %w", name, err)
		}
		s.stops = append(s.stops, stop)
		return u, nil
	}
	if s.STS, err = sts.New(sts.Config{Credentials: creds, Account: in.AccountID, RoleName: in.Role.Name,
		SessionName: in.InstanceID, Region: in.Region, TokenValidFor: cfg.TokenValidFor,
		Clock: cfg.Clock, Logger: cfg.Logger}); err != nil {
		return nil, err
	}
	if s.STSURL, err = start("sts", s.STS.Start); err != nil {
		return nil, err
	}
	if s.Authenticator, err = authenticator.New(authenticator.Config{
		ClusterID: cfg.ClusterName, STSURL: s.STSURL,
		Roles:           []authenticator.RoleMapping{authenticator.NodeRole(fmt.Sprintf("arn:aws:iam::%s:role/%s", in.AccountID, in.Role.Name))},
		PrivateDNSNames: map[string]string{in.InstanceID: in.LocalHostname},
		Clock:           cfg.Clock, Logger: cfg.Logger,
	}); err != nil {
		return nil, err
	}
	s.WebhookCA = s.Authenticator.CAPEM()
	if s.WebhookURL, err = start("authenticator", s.Authenticator.Start); err != nil {
		return nil, err
	}
	if s.ECR, err = ecr.New(ecr.Config{Credentials: creds, Account: in.AccountID, Region: in.Region, Clock: cfg.Clock, Logger: cfg.Logger}); err != nil {
		return nil, err
	}
	if s.ECRURL, err = start("ecr", s.ECR.Start); err != nil {
		return nil, err
	}
	if s.ECRPublicURL, err = start("ecr-public", s.ECR.StartPublic); err != nil {
		return nil, err
	}
	if s.EKS, err = eks.New(eks.Config{Credentials: creds, Region: in.Region, Cluster: eks.Cluster{Name: cfg.ClusterName, Status: "CREATING"},
		Clock: cfg.Clock, Logger: cfg.Logger}); err != nil {
		return nil, err
	}
	if s.EKSURL, err = start("eks", s.EKS.Start); err != nil {
		return nil, err
	}
	s.Registry = registry.New(registry.Config{Realm: s.ECR.RegistryHost(), Authorize: s.ECR.ValidCredentials, Logger: cfg.Logger})
	for _, p := range cfg.Images {
		if err := loadFile(s.Registry, p); err != nil {
			return nil, err
		}
	}
	if s.RegistryURL, err = start("registry", s.Registry.Start); err != nil {
		return nil, err
	}
	return s, nil
}

func loadFile(r *registry.Server, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("awsstub: opening image %s: %w", path, err)
	}
	defer f.Close()
	if _, err := r.Load(io.Reader(f), ""); err != nil {
		return fmt.Errorf("awsstub: loading image %s: %w", path, err)
	}
	return nil
}

// Stop stops every server that was started; safe to call more than once.
func (s *Stack) Stop() {
	for i := len(s.stops) - 1; i >= 0; i-- {
		s.stops[i]()
	}
}

// GuestURL rewrites a host URL on 127.0.0.1 to the address a QEMU guest
// dials (10.0.2.2), e.g. for AWS_ENDPOINT_URL_ECR.
func GuestURL(hostURL string) string {
	return strings.Replace(hostURL, "://127.0.0.1:", "://"+GuestHost+":", 1)
}
