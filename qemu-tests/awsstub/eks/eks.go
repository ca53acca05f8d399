// Package eks is a stand-in for Amazon EKS's DescribeCluster, the one EKS
// call a node makes: Amazon Linux 2's bootstrap.sh made it (with the
// instance role) when its user data gave no API server endpoint or CA, and
// berth does the same. It speaks EKS's REST-JSON protocol: GET
// /clusters/{name}, a SigV4 Authorization header for service "eks" in the
// configured region (session token checked), the cluster as
// {"cluster": {...}}, and errors as a 4xx with X-Amzn-Errortype and
// {"message": ...}. The real SDK client's test (eks_test.go) holds it to
// the protocol.
package eks

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/berth-node/berth/qemu-tests/awsstub/internal/serve"
	"github.com/berth-node/berth/qemu-tests/awsstub/sigv4"
)

// Cluster is what DescribeCluster answers for the configured cluster; the
// field names and nesting are EKS's (a subset: what a node reads).
type Cluster struct {
	Name                    string                   `json:"name"`
	Arn                     string                   `json:"arn,omitempty"`
	ID                      string                   `json:"id,omitempty"`
	Endpoint                string                   `json:"endpoint,omitempty"`
	Status                  string                   `json:"status"`
	Version                 string                   `json:"version,omitempty"`
	CertificateAuthority    *CertificateAuthority    `json:"certificateAuthority,omitempty"`
	KubernetesNetworkConfig *KubernetesNetworkConfig `json:"kubernetesNetworkConfig,omitempty"`
}

// CertificateAuthority holds the cluster CA, base64 of its PEM.
type CertificateAuthority struct {
	Data string `json:"data"`
}

// KubernetesNetworkConfig is the service network.
type KubernetesNetworkConfig struct {
	ServiceIpv4Cidr string `json:"serviceIpv4Cidr,omitempty"`
	ServiceIpv6Cidr string `json:"serviceIpv6Cidr,omitempty"`
	IPFamily        string `json:"ipFamily,omitempty"`
}

// Config configures the stand-in.
type Config struct {
	Credentials sigv4.Credentials
	Region      string
	Cluster     Cluster
	Clock       func() time.Time
	Logger      *slog.Logger
}

// Server is the stand-in; it is an http.Handler.
type Server struct {
	cfg   Config
	clock func() time.Time
	log   *slog.Logger
	reqs  serve.Log

	mu      sync.Mutex
	cluster Cluster
}

// New checks cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Credentials.AccessKeyID == "" || cfg.Credentials.SecretAccessKey == "" {
		return nil, fmt.Errorf("eks stand-in: Credentials.AccessKeyID and SecretAccessKey are required")
	}
	if cfg.Region == "" || cfg.Cluster.Name == "" {
		return nil, fmt.Errorf("eks stand-in: Region and Cluster.Name are required")
	}
	s := &Server{cfg: cfg, clock: cfg.Clock, log: serve.Discard(cfg.Logger), cluster: cfg.Cluster}
	if s.clock == nil {
		s.clock = time.Now
	}
	return s, nil
}

// SetCluster replaces the cluster answered, by name too: a test's control
// plane starts after the stand-ins it authenticates with, so its endpoint
// and CA come later (until then the cluster is, say, CREATING).
func (s *Server) SetCluster(c Cluster) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cluster = c
}

// Requests returns the request log.
func (s *Server) Requests() []serve.Request { return s.reqs.All() }

// Start serves s over plain HTTP on addr (a node reaches it through
// AWS_ENDPOINT_URL_EKS).
func (s *Server) Start(addr string) (url string, stop func(), err error) {
	return serve.Start("eks stand-in", addr, s, nil, s.log)
}

// eksCodes are the error types EKS answers for sigv4's failures.
var eksCodes = map[string]struct {
	code   string
	status int
}{
	sigv4.CodeIncompleteSignature:   {"IncompleteSignatureException", 400},
	sigv4.CodeMissingAuthentication: {"MissingAuthenticationTokenException", 403},
	sigv4.CodeInvalidClientTokenID:  {"UnrecognizedClientException", 403},
	sigv4.CodeSignatureDoesNotMatch: {"InvalidSignatureException", 403},
	sigv4.CodeExpiredToken:          {"ExpiredTokenException", 403},
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	status, code := s.serve(w, r)
	s.reqs.Add(serve.Request{Method: r.Method, Path: r.URL.Path, Status: status, Code: code})
	s.log.Debug("eks stand-in", "status", status, "code", code)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) (int, string) {
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/clusters/")
	if r.Method != http.MethodGet || !ok || rest == "" || strings.Contains(rest, "/") {
		return writeError(w, http.StatusNotFound, "UnknownOperationException", "GET /clusters/{name} (DescribeCluster) is the only operation")
	}
	name, err := url.PathUnescape(rest)
	if err != nil {
		return writeError(w, http.StatusBadRequest, "InvalidParameterException", "cluster name: "+err.Error())
	}
	if _, verr := sigv4.VerifyHeader(r, nil, sigv4.Static(s.cfg.Credentials), sigv4.Expect{Service: "eks", Region: s.cfg.Region, Now: s.clock()}); verr != nil {
		c := eksCodes[verr.Code]
		return writeError(w, c.status, c.code, verr.Message)
	}
	s.mu.Lock()
	c := s.cluster
	s.mu.Unlock()
	if name != c.Name {
		return writeError(w, http.StatusNotFound, "ResourceNotFoundException", "No cluster found for name: "+name+".")
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(struct {
		Cluster Cluster `json:"cluster"`
	}{c})
	return http.StatusOK, ""
}

func writeError(w http.ResponseWriter, status int, code, msg string) (int, string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-Errortype", code)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Message string `json:"message"`
	}{msg})
	return status, code
}
