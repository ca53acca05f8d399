// Package ecr is a stand-in for Amazon ECR's GetAuthorizationToken, and for
// ECR Public's (Public): the one call a node's image credential provider
// makes. Each verifies the SigV4 Authorization header (service "ecr" in the
// configured region, or "ecr-public" in us-east-1) and the session token,
// issues a registry password, and remembers it so the registry stand-in can
// check the credentials containerd presents.
package ecr

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/berth-node/berth/qemu-tests/awsstub/internal/serve"
	"github.com/berth-node/berth/qemu-tests/awsstub/sigv4"
)

// Target is GetAuthorizationToken's X-Amz-Target.
const Target = "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken"

// PublicTarget is ECR Public's GetAuthorizationToken X-Amz-Target.
const PublicTarget = "SpencerFrontendService.GetAuthorizationToken"

// PublicRegion is the only region ECR Public's API answers in.
const PublicRegion = "us-east-1"

// PublicHost is ECR Public's registry.
const PublicHost = "public.ecr.aws"

// Username is the registry user ECR tokens are for.
const Username = "AWS"

// DefaultTokenLifetime is ECR's: tokens are good for 12 hours.
const DefaultTokenLifetime = 12 * time.Hour

// Config configures the stand-in.
type Config struct {
	Credentials sigv4.Credentials
	Account     string
	Region      string
	// TokenLifetime defaults to DefaultTokenLifetime.
	TokenLifetime time.Duration
	Clock         func() time.Time
	Logger        *slog.Logger
}

// Server is the stand-in; it is an http.Handler.
type Server struct {
	cfg   Config
	clock func() time.Time
	log   *slog.Logger
	reqs  serve.Log

	mu     sync.Mutex
	issued map[string]time.Time // password → expiry
}

// New checks cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Credentials.AccessKeyID == "" || cfg.Credentials.SecretAccessKey == "" {
		return nil, fmt.Errorf("ecr stand-in: Credentials.AccessKeyID and SecretAccessKey are required")
	}
	if cfg.Account == "" || cfg.Region == "" {
		return nil, fmt.Errorf("ecr stand-in: Account and Region are required")
	}
	if cfg.TokenLifetime == 0 {
		cfg.TokenLifetime = DefaultTokenLifetime
	}
	s := &Server{cfg: cfg, clock: cfg.Clock, log: serve.Discard(cfg.Logger), issued: map[string]time.Time{}}
	if s.clock == nil {
		s.clock = time.Now
	}
	return s, nil
}

// ProxyEndpoint is the registry URL ECR reports for the account and region.
func (s *Server) ProxyEndpoint() string {
	return fmt.Sprintf("https://%s.dkr.ecr.%s.amazonaws.com", s.cfg.Account, s.cfg.Region)
}

// RegistryHost is ProxyEndpoint's host, the name images are pulled by.
func (s *Server) RegistryHost() string {
	return fmt.Sprintf("%s.dkr.ecr.%s.amazonaws.com", s.cfg.Account, s.cfg.Region)
}

// ValidCredentials says whether username/password is a live token this
// stand-in issued; the registry stand-in's check.
func (s *Server) ValidCredentials(username, password string) bool {
	if username != Username {
		return false
	}
	now := s.clock()
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := false
	for pw, exp := range s.issued {
		// Every entry is compared, so timing does not tell which matched.
		if subtle.ConstantTimeCompare([]byte(pw), []byte(password)) == 1 && now.Before(exp) {
			ok = true
		}
	}
	return ok
}

// Requests returns the request log.
func (s *Server) Requests() []serve.Request { return s.reqs.All() }

// Start serves s over plain HTTP on addr (the node reaches it through
// AWS_ENDPOINT_URL_ECR).
func (s *Server) Start(addr string) (url string, stop func(), err error) {
	return serve.Start("ecr stand-in", addr, s, nil, s.log)
}

// Public is ECR Public's API over the same issued passwords, so the
// registry stand-in takes a public login as it takes a private one.
func (s *Server) Public() http.Handler { return publicAPI{s} }

// StartPublic serves Public over plain HTTP on addr (the node reaches it
// through AWS_ENDPOINT_URL_ECR_PUBLIC).
func (s *Server) StartPublic(addr string) (url string, stop func(), err error) {
	return serve.Start("ecr-public stand-in", addr, s.Public(), nil, s.log)
}

type publicAPI struct{ s *Server }

func (p publicAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.s.handle(w, r, p.s.public())
}

// operation is what differs between ECR's GetAuthorizationToken and ECR
// Public's: what the signature is scoped to, the target, and how the
// login is wrapped in the answer.
type operation struct {
	name    string // in logs
	service string
	region  string
	target  string
	answer  func(token string, expiresAt float64) any
}

func (s *Server) private() operation {
	return operation{name: "ecr stand-in", service: "ecr", region: s.cfg.Region, target: Target,
		answer: func(tok string, exp float64) any {
			return Response{AuthorizationData: []AuthorizationData{{AuthorizationToken: tok, ExpiresAt: exp, ProxyEndpoint: s.ProxyEndpoint()}}}
		}}
}

func (s *Server) public() operation {
	return operation{name: "ecr-public stand-in", service: "ecr-public", region: PublicRegion, target: PublicTarget,
		answer: func(tok string, exp float64) any {
			return PublicResponse{AuthorizationData: PublicAuthorizationData{AuthorizationToken: tok, ExpiresAt: exp}}
		}}
}

// AuthorizationData is one entry of the response.
type AuthorizationData struct {
	AuthorizationToken string  `json:"authorizationToken"`
	ExpiresAt          float64 `json:"expiresAt"`
	ProxyEndpoint      string  `json:"proxyEndpoint"`
}

// Response is GetAuthorizationToken's answer.
type Response struct {
	AuthorizationData []AuthorizationData `json:"authorizationData"`
}

// PublicAuthorizationData is ECR Public's login: no proxyEndpoint, as
// every public registry is the same one.
type PublicAuthorizationData struct {
	AuthorizationToken string  `json:"authorizationToken"`
	ExpiresAt          float64 `json:"expiresAt"`
}

// PublicResponse is ECR Public's GetAuthorizationToken answer: one
// authorizationData object, not a list.
type PublicResponse struct {
	AuthorizationData PublicAuthorizationData `json:"authorizationData"`
}

// ErrorBody is the JSON 1.1 protocol's error shape.
type ErrorBody struct {
	Type    string `json:"__type"`
	Message string `json:"message"`
}

// ecrCodes renames sigv4's STS-style codes to what JSON-protocol services
// answer.
var ecrCodes = map[string]struct {
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
	s.handle(w, r, s.private())
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request, op operation) {
	status, code := s.serve(w, r, op)
	s.reqs.Add(serve.Request{Method: r.Method, Path: r.URL.Path, Status: status, Code: code})
	s.log.Debug(op.name, "status", status, "code", code)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, op operation) (int, string) {
	if r.Method != http.MethodPost || r.URL.Path != "/" {
		return writeError(w, http.StatusNotFound, "UnknownOperationException", "POST / is the only operation")
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return writeError(w, http.StatusBadRequest, "SerializationException", "reading body: "+err.Error())
	}
	v, verr := sigv4.VerifyHeader(r, body, sigv4.Static(s.cfg.Credentials), sigv4.Expect{Service: op.service, Region: op.region, Now: s.clock()})
	if verr != nil {
		c := ecrCodes[verr.Code]
		return writeError(w, c.status, c.code, verr.Message)
	}
	if t := r.Header.Get("X-Amz-Target"); t != op.target {
		return writeError(w, http.StatusBadRequest, "UnknownOperationException", fmt.Sprintf("X-Amz-Target %q is not %s", t, op.target))
	}
	if !headerSigned(v.SignedHeaders, "x-amz-target") {
		return writeError(w, http.StatusForbidden, "InvalidSignatureException", "x-amz-target must be signed")
	}
	var in struct {
		RegistryIDs []string `json:"registryIds"`
	}
	if len(body) > 0 {
		if err := json.Unmarshal(body, &in); err != nil {
			return writeError(w, http.StatusBadRequest, "SerializationException", "body is not JSON: "+err.Error())
		}
	}
	for _, id := range in.RegistryIDs {
		if id != s.cfg.Account {
			return writeError(w, http.StatusBadRequest, "InvalidParameterException", fmt.Sprintf("registry %s is not in account %s", id, s.cfg.Account))
		}
	}
	pw, err := randomPassword()
	if err != nil {
		return writeError(w, http.StatusInternalServerError, "ServerException", err.Error())
	}
	exp := s.clock().Add(s.cfg.TokenLifetime)
	s.mu.Lock()
	now := s.clock()
	for p, e := range s.issued {
		if !now.Before(e) {
			delete(s.issued, p)
		}
	}
	s.issued[pw] = exp
	s.mu.Unlock()
	resp := op.answer(base64.StdEncoding.EncodeToString([]byte(Username+":"+pw)), float64(exp.Unix()))
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(resp)
	return http.StatusOK, ""
}

func headerSigned(list []string, h string) bool {
	for _, x := range list {
		if x == h {
			return true
		}
	}
	return false
}

func randomPassword() (string, error) {
	b := make([]byte, 48)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("drawing a registry password: %w", err)
	}
	return base64.RawStdEncoding.EncodeToString(b), nil
}

func writeError(w http.ResponseWriter, status int, code, msg string) (int, string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-Errortype", code)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(ErrorBody{Type: code, Message: msg})
	return status, code
}
