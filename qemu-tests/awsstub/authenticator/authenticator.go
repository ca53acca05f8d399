// Package authenticator is a stand-in for the EKS IAM authenticator
// (kubernetes-sigs/aws-iam-authenticator): kube-apiserver's token webhook.
// It decodes a `k8s-aws-v1.` token into the presigned STS GetCallerIdentity
// URL inside, checks that URL the way the real authenticator does, asks STS
// (here the STS stand-in) who signed it, and maps the caller's role to a
// Kubernetes user, as EKS's aws-auth mapRoles does for node roles.
package authenticator

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/berth-node/berth/qemu-tests/awsstub/internal/serve"
	"github.com/berth-node/berth/qemu-tests/awsstub/sts"
	"github.com/berth-node/berth/qemu-tests/controlplane"
)

// TokenPrefix starts every EKS token.
const TokenPrefix = "k8s-aws-v1."

// maxTokenAge is how long after X-Amz-Date a token is accepted, as in
// aws-iam-authenticator.
const maxTokenAge = 15 * time.Minute

// maxExpires bounds X-Amz-Expires: EKS tokens are presigned for 60 s.
const maxExpires = 60

// NodeGroups are the groups EKS gives a node role's users.
var NodeGroups = []string{"system:bootstrappers", "system:nodes"}

// RoleMapping maps one IAM role to a Kubernetes user, like an aws-auth
// mapRoles entry.
type RoleMapping struct {
	// RoleARN is the role's IAM ARN: arn:aws:iam::<account>:role/<name>.
	RoleARN string
	// Username may use {{EC2PrivateDNSName}} and {{SessionName}}.
	Username string
	Groups   []string
}

// NodeRole is the mapping EKS writes for a node group's instance role.
func NodeRole(roleARN string) RoleMapping {
	return RoleMapping{RoleARN: roleARN, Username: "system:node:{{EC2PrivateDNSName}}", Groups: NodeGroups}
}

// Config configures the authenticator.
type Config struct {
	// ClusterID is the cluster name tokens must be bound to (x-k8s-aws-id).
	ClusterID string
	// STSURL is where GetCallerIdentity requests go instead of the host in
	// the token (the STS stand-in's base URL). The token's host is still
	// sent as Host, so the signature over it verifies.
	STSURL string
	Roles  []RoleMapping
	// PrivateDNSNames maps instance ID → private DNS name, what EKS asks
	// EC2 DescribeInstances for {{EC2PrivateDNSName}}.
	PrivateDNSNames map[string]string
	// HTTPClient calls STS; nil means a client with a 10 s timeout.
	HTTPClient *http.Client
	Clock      func() time.Time
	Logger     *slog.Logger
}

// Server is the webhook; it is an http.Handler.
type Server struct {
	cfg    Config
	clock  func() time.Time
	log    *slog.Logger
	client *http.Client
	reqs   serve.Log
	ca     *controlplane.KeyPair
	cert   tls.Certificate
}

// New checks cfg and creates the CA and serving certificate (for 127.0.0.1,
// ::1 and localhost; kube-apiserver runs on the same host).
func New(cfg Config) (*Server, error) {
	if cfg.ClusterID == "" {
		return nil, errors.New("authenticator: ClusterID is required")
	}
	if _, err := url.Parse(cfg.STSURL); err != nil || cfg.STSURL == "" {
		return nil, fmt.Errorf("authenticator: STSURL %q is not a URL", cfg.STSURL)
	}
	for i, m := range cfg.Roles {
		if _, _, err := parseRoleARN(m.RoleARN); err != nil {
			return nil, fmt.Errorf("authenticator: Roles[%d].RoleARN: %w", i, err)
		}
	}
	s := &Server{cfg: cfg, clock: cfg.Clock, log: serve.Discard(cfg.Logger), client: cfg.HTTPClient}
	if s.clock == nil {
		s.clock = time.Now
	}
	if s.client == nil {
		s.client = &http.Client{Timeout: 10 * time.Second}
	}
	now := time.Now()
	ca, err := controlplane.NewCA("berth-authenticator-ca", now)
	if err != nil {
		return nil, fmt.Errorf("authenticator: %w", err)
	}
	leaf, err := ca.Issue(controlplane.CertSpec{
		CommonName: "berth-authenticator", DNSNames: []string{"localhost"},
		IPs: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, Server: true,
	}, now)
	if err != nil {
		return nil, fmt.Errorf("authenticator: %w", err)
	}
	cert, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("authenticator: loading serving key pair: %w", err)
	}
	s.ca, s.cert = ca, cert
	return s, nil
}

// CAPEM is the CA of the serving certificate, for the apiserver's webhook
// kubeconfig (controlplane.Options.TokenWebhookCA).
func (s *Server) CAPEM() []byte { return s.ca.CertPEM }

// ClientTLS trusts the serving certificate, for tests calling the webhook.
func (s *Server) ClientTLS() *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(s.ca.Cert)
	return &tls.Config{RootCAs: pool}
}

// Requests returns the request log; Code is the failure reason, if any.
func (s *Server) Requests() []serve.Request { return s.reqs.All() }

// Start serves the webhook over HTTPS on addr; the URL is what
// controlplane.Options.TokenWebhookURL takes.
func (s *Server) Start(addr string) (url string, stop func(), err error) {
	return serve.Start("authenticator", addr, s, &tls.Config{Certificates: []tls.Certificate{s.cert}, MinVersion: tls.VersionTLS12}, s.log)
}

// TokenReview is the subset of authentication.k8s.io/v1 TokenReview the
// webhook protocol uses.
type TokenReview struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Spec       ReviewSpec   `json:"spec"`
	Status     ReviewStatus `json:"status"`
}

// ReviewSpec is what the apiserver asks about.
type ReviewSpec struct {
	Token     string   `json:"token"`
	Audiences []string `json:"audiences,omitempty"`
}

// ReviewStatus is the answer.
type ReviewStatus struct {
	Authenticated bool      `json:"authenticated"`
	User          *UserInfo `json:"user,omitempty"`
	Audiences     []string  `json:"audiences,omitempty"`
	Error         string    `json:"error,omitempty"`
}

// UserInfo is the authenticated user.
type UserInfo struct {
	Username string              `json:"username"`
	UID      string              `json:"uid,omitempty"`
	Groups   []string            `json:"groups,omitempty"`
	Extra    map[string][]string `json:"extra,omitempty"`
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	status, reason := s.serve(w, r)
	s.reqs.Add(serve.Request{Method: r.Method, Path: r.URL.Path, Status: status, Code: reason})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) (int, string) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST a TokenReview", http.StatusMethodNotAllowed)
		return http.StatusMethodNotAllowed, "method"
	}
	var tr TokenReview
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&tr); err != nil {
		http.Error(w, "decoding TokenReview: "+err.Error(), http.StatusBadRequest)
		return http.StatusBadRequest, "decode"
	}
	user, err := s.Authenticate(r, tr.Spec.Token)
	resp := TokenReview{APIVersion: "authentication.k8s.io/v1", Kind: "TokenReview"}
	reason := ""
	if err != nil {
		// Not authenticated is an answer, not a webhook failure: 200 lets
		// the apiserver go on to its other authenticators.
		resp.Status = ReviewStatus{Authenticated: false, Error: err.Error()}
		reason = err.Error()
		s.log.Info("token rejected", "err", err)
	} else {
		resp.Status = ReviewStatus{Authenticated: true, User: &user, Audiences: tr.Spec.Audiences}
		s.log.Info("token accepted", "user", user.Username)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
	return http.StatusOK, reason
}

var stsHostRE = regexp.MustCompile(`^sts(\.[a-z0-9-]+)?\.amazonaws\.com(\.cn)?$`)

// allowedParams are the only query parameters a token's URL may carry
// (lower case); anything else could smuggle a different request to STS.
var allowedParams = map[string]bool{
	"action": true, "version": true, "x-amz-algorithm": true, "x-amz-credential": true,
	"x-amz-date": true, "x-amz-expires": true, "x-amz-security-token": true,
	"x-amz-signature": true, "x-amz-signedheaders": true,
}

// ParseToken checks a token's form and returns its presigned URL. It needs
// no network; Authenticate calls it first.
func ParseToken(token string, now time.Time) (*url.URL, error) {
	if !strings.HasPrefix(token, TokenPrefix) {
		return nil, fmt.Errorf("token does not start with %q", TokenPrefix)
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(token, TokenPrefix))
	if err != nil {
		return nil, fmt.Errorf("token is not base64url without padding: %w", err)
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		return nil, fmt.Errorf("token URL: %w", err)
	}
	if u.Scheme != "https" {
		return nil, fmt.Errorf("token URL scheme %q, want https", u.Scheme)
	}
	if !stsHostRE.MatchString(u.Host) {
		return nil, fmt.Errorf("token URL host %q is not an STS endpoint", u.Host)
	}
	if u.Path != "/" {
		return nil, fmt.Errorf("token URL path %q, want /", u.Path)
	}
	if u.User != nil || u.Fragment != "" {
		return nil, errors.New("token URL has user info or a fragment")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("token URL query: %w", err)
	}
	lower := map[string]string{}
	for k, v := range q {
		lk := strings.ToLower(k)
		if !allowedParams[lk] {
			return nil, fmt.Errorf("token URL has unexpected query parameter %q", k)
		}
		if _, dup := lower[lk]; dup || len(v) != 1 {
			return nil, fmt.Errorf("token URL has query parameter %q more than once", k)
		}
		lower[lk] = v[0]
	}
	if lower["action"] != "GetCallerIdentity" {
		return nil, fmt.Errorf("token URL action %q, want GetCallerIdentity", lower["action"])
	}
	signed := strings.Split(lower["x-amz-signedheaders"], ";")
	found := false
	for _, h := range signed {
		found = found || h == sts.ClusterIDHeader
	}
	if !found {
		return nil, fmt.Errorf("token URL does not sign %s", sts.ClusterIDHeader)
	}
	date, err := time.Parse("20060102T150405Z", lower["x-amz-date"])
	if err != nil {
		return nil, fmt.Errorf("token URL X-Amz-Date %q: %w", lower["x-amz-date"], err)
	}
	if now.After(date.Add(maxTokenAge)) {
		return nil, fmt.Errorf("token expired: X-Amz-Date %s is more than %s ago", lower["x-amz-date"], maxTokenAge)
	}
	exp, err := strconv.Atoi(lower["x-amz-expires"])
	if err != nil || exp < 1 || exp > maxExpires {
		return nil, fmt.Errorf("token URL X-Amz-Expires %q, want 1..%d", lower["x-amz-expires"], maxExpires)
	}
	return u, nil
}

// Authenticate verifies token with STS and maps the caller to a user. ctx
// comes from r.
func (s *Server) Authenticate(r *http.Request, token string) (UserInfo, error) {
	u, err := ParseToken(token, s.clock())
	if err != nil {
		return UserInfo{}, err
	}
	id, err := s.callerIdentity(r, u)
	if err != nil {
		return UserInfo{}, err
	}
	return s.mapIdentity(id, u)
}

func (s *Server) callerIdentity(r *http.Request, u *url.URL) (sts.Identity, error) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, strings.TrimSuffix(s.cfg.STSURL, "/")+"/?"+u.RawQuery, nil)
	if err != nil {
		return sts.Identity{}, fmt.Errorf("building STS request: %w", err)
	}
	req.Host = u.Host
	req.Header.Set(sts.ClusterIDHeader, s.cfg.ClusterID)
	resp, err := s.client.Do(req)
	if err != nil {
		return sts.Identity{}, fmt.Errorf("calling STS GetCallerIdentity: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return sts.Identity{}, fmt.Errorf("reading STS GetCallerIdentity response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		if e, perr := sts.ParseError(body); perr == nil {
			return sts.Identity{}, fmt.Errorf("STS GetCallerIdentity: %s: %s: %s", resp.Status, e.Code, e.Message)
		}
		return sts.Identity{}, fmt.Errorf("STS GetCallerIdentity: %s", resp.Status)
	}
	return sts.ParseIdentity(body)
}

// assumedRoleRE matches arn:aws:sts::<acct>:assumed-role/<role>/<session>.
var assumedRoleRE = regexp.MustCompile(`^arn:(aws[a-z-]*):sts::([0-9]{12}):assumed-role/([^/]+)/([^/]+)$`)

// roleARNRE matches arn:aws:iam::<acct>:role/[path/]<name>.
var roleARNRE = regexp.MustCompile(`^arn:aws[a-z-]*:iam::([0-9]{12}):role/(?:.*/)?([^/]+)$`)

func parseRoleARN(arn string) (account, name string, err error) {
	m := roleARNRE.FindStringSubmatch(arn)
	if m == nil {
		return "", "", fmt.Errorf("%q is not arn:aws:iam::<12-digit account>:role/<name>", arn)
	}
	return m[1], m[2], nil
}

func (s *Server) mapIdentity(id sts.Identity, u *url.URL) (UserInfo, error) {
	m := assumedRoleRE.FindStringSubmatch(id.Arn)
	if m == nil {
		return UserInfo{}, fmt.Errorf("caller %s is not an assumed role", id.Arn)
	}
	partition, account, role, session := m[1], m[2], m[3], m[4]
	canonical := fmt.Sprintf("arn:%s:iam::%s:role/%s", partition, account, role)
	for _, rm := range s.cfg.Roles {
		acct, name, _ := parseRoleARN(rm.RoleARN)
		if acct != account || name != role {
			continue
		}
		username := strings.ReplaceAll(rm.Username, "{{SessionName}}", session)
		if strings.Contains(username, "{{EC2PrivateDNSName}}") {
			dns, ok := s.cfg.PrivateDNSNames[session]
			if !ok {
				return UserInfo{}, fmt.Errorf("role %s: session %q is not a known instance", canonical, session)
			}
			username = strings.ReplaceAll(username, "{{EC2PrivateDNSName}}", dns)
		}
		akid := ""
		if c := u.Query().Get("X-Amz-Credential"); c != "" {
			akid, _, _ = strings.Cut(c, "/")
		}
		return UserInfo{
			Username: username,
			UID:      "aws-iam-authenticator:" + account + ":" + id.UserID,
			Groups:   append([]string(nil), rm.Groups...),
			Extra: map[string][]string{
				"arn":          {id.Arn},
				"canonicalArn": {canonical},
				"sessionName":  {session},
				"accessKeyId":  {akid},
			},
		}, nil
	}
	return UserInfo{}, fmt.Errorf("role %s is not mapped to a Kubernetes user", canonical)
}
