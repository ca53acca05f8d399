// Package sts is a stand-in for AWS STS's GetCallerIdentity, reached the way
// the EKS authenticator reaches it: a presigned URL, forwarded with the
// x-k8s-aws-id header. It verifies the SigV4 query signature with the secret
// the IMDS stand-in hands the node, and answers with the caller's
// assumed-role identity or an STS error.
package sts

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/berth-node/berth/qemu-tests/awsstub/internal/serve"
	"github.com/berth-node/berth/qemu-tests/awsstub/sigv4"
)

// ClusterIDHeader is the header EKS tokens sign to bind them to a cluster.
const ClusterIDHeader = "x-k8s-aws-id"

const xmlns = "https://sts.amazonaws.com/doc/2011-06-15/"

// Config is who the caller is and how requests are checked.
type Config struct {
	Credentials sigv4.Credentials
	// Account, RoleName and SessionName make the assumed-role ARN; EC2 names
	// an instance role's session after the instance ID.
	Account     string
	RoleName    string
	SessionName string
	// RoleID is the role's unique ID (AROA...); UserId is RoleID:SessionName.
	RoleID string
	// Region, when set, must be the credential scope's region.
	Region string
	// TokenValidFor, when set, is how long a presigned URL stays good after
	// its X-Amz-Date, instead of its X-Amz-Expires (60 s for EKS tokens).
	// EKS documents its tokens as good for 15 minutes and clients cache
	// them for 14, so an end-to-end test whose node caches tokens longer
	// than X-Amz-Expires sets this to 15m.
	TokenValidFor time.Duration
	Clock         func() time.Time
	Logger        *slog.Logger
}

// Identity is GetCallerIdentity's result.
type Identity struct {
	Arn     string `xml:"Arn" json:"Arn"`
	UserID  string `xml:"UserId" json:"UserId"`
	Account string `xml:"Account" json:"Account"`
}

// Server is the stand-in; it is an http.Handler.
type Server struct {
	cfg   Config
	clock func() time.Time
	log   *slog.Logger
	reqs  serve.Log
}

// New returns a stand-in for cfg; it fails when the identity is incomplete.
func New(cfg Config) (*Server, error) {
	if cfg.Credentials.AccessKeyID == "" || cfg.Credentials.SecretAccessKey == "" {
		return nil, fmt.Errorf("sts stand-in: Credentials.AccessKeyID and SecretAccessKey are required")
	}
	if cfg.Account == "" || cfg.RoleName == "" || cfg.SessionName == "" {
		return nil, fmt.Errorf("sts stand-in: Account, RoleName and SessionName are required")
	}
	if cfg.RoleID == "" {
		cfg.RoleID = "AROA" + strings.ToUpper(cfg.Account) + "BERTH"
	}
	s := &Server{cfg: cfg, clock: cfg.Clock, log: serve.Discard(cfg.Logger)}
	if s.clock == nil {
		s.clock = time.Now
	}
	return s, nil
}

// Identity is what a verified caller is told it is.
func (s *Server) Identity() Identity {
	c := s.cfg
	return Identity{
		Arn:     fmt.Sprintf("arn:aws:sts::%s:assumed-role/%s/%s", c.Account, c.RoleName, c.SessionName),
		UserID:  c.RoleID + ":" + c.SessionName,
		Account: c.Account,
	}
}

// Requests returns the request log.
func (s *Server) Requests() []serve.Request { return s.reqs.All() }

// Start serves s over plain HTTP on addr.
func (s *Server) Start(addr string) (url string, stop func(), err error) {
	return serve.Start("sts stand-in", addr, s, nil, s.log)
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	status, code := s.serve(w, r)
	s.reqs.Add(serve.Request{Method: r.Method, Path: r.URL.Path, Status: status, Code: code})
	s.log.Debug("sts stand-in", "method", r.Method, "status", status, "code", code)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) (int, string) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		return writeError(w, r, http.StatusMethodNotAllowed, "InvalidAction", "method "+r.Method+" is not supported")
	}
	if r.URL.Path != "/" {
		return writeError(w, r, http.StatusNotFound, "InvalidAction", "path "+r.URL.Path+" is not /")
	}
	q := r.URL.Query()
	if q.Get("Action") != "GetCallerIdentity" {
		return writeError(w, r, http.StatusBadRequest, "InvalidAction", fmt.Sprintf("could not find operation %q", q.Get("Action")))
	}
	if q.Get("Version") != "2011-06-15" {
		return writeError(w, r, http.StatusBadRequest, "InvalidAction", fmt.Sprintf("version %q is not 2011-06-15", q.Get("Version")))
	}
	v, verr := sigv4.VerifyPresigned(r, sigv4.Static(s.cfg.Credentials), sigv4.Expect{Service: "sts", Region: s.cfg.Region, Now: s.clock(), PresignedValidFor: s.cfg.TokenValidFor})
	if verr != nil {
		status := http.StatusForbidden
		if verr.Code == sigv4.CodeIncompleteSignature || verr.Code == sigv4.CodeMissingAuthentication {
			status = http.StatusBadRequest
		}
		return writeError(w, r, status, verr.Code, verr.Message)
	}
	// Only EKS tokens come here, and a token not bound to a cluster would
	// be good for any cluster trusting the role.
	if !contains(v.SignedHeaders, ClusterIDHeader) {
		return writeError(w, r, http.StatusForbidden, sigv4.CodeSignatureDoesNotMatch, ClusterIDHeader+" is not a signed header")
	}
	id := s.Identity()
	reqID := requestID(r)
	if wantsJSON(r) {
		w.Header().Set("Content-Type", "application/json")
		body := map[string]any{"GetCallerIdentityResponse": map[string]any{
			"GetCallerIdentityResult": id,
			"ResponseMetadata":        map[string]string{"RequestId": reqID},
		}}
		_ = json.NewEncoder(w).Encode(body)
		return http.StatusOK, ""
	}
	type result struct {
		XMLName   xml.Name `xml:"GetCallerIdentityResponse"`
		Xmlns     string   `xml:"xmlns,attr"`
		Result    Identity `xml:"GetCallerIdentityResult"`
		RequestID string   `xml:"ResponseMetadata>RequestId"`
	}
	w.Header().Set("Content-Type", "text/xml")
	_, _ = w.Write([]byte(xml.Header))
	_ = xml.NewEncoder(w).Encode(result{Xmlns: xmlns, Result: id, RequestID: reqID})
	return http.StatusOK, ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func wantsJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "application/json")
}

// requestID is deterministic per signature so logs and golden output are
// stable; STS's own IDs are random UUIDs and nothing depends on them.
func requestID(r *http.Request) string {
	sig := r.URL.Query().Get("X-Amz-Signature")
	if len(sig) >= 32 {
		return sig[:8] + "-" + sig[8:12] + "-" + sig[12:16] + "-" + sig[16:20] + "-" + sig[20:32]
	}
	return "00000000-0000-0000-0000-000000000000"
}

// ErrorResponse is STS's error body.
type ErrorResponse struct {
	XMLName   xml.Name `xml:"ErrorResponse"`
	Xmlns     string   `xml:"xmlns,attr"`
	Error     Error    `xml:"Error"`
	RequestID string   `xml:"RequestId"`
}

// Error is one STS error.
type Error struct {
	Type    string `xml:"Type" json:"Type"`
	Code    string `xml:"Code" json:"Code"`
	Message string `xml:"Message" json:"Message"`
}

func writeError(w http.ResponseWriter, r *http.Request, status int, code, msg string) (int, string) {
	e := Error{Type: "Sender", Code: code, Message: msg}
	if wantsJSON(r) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"Error": e, "RequestId": requestID(r)})
		return status, code
	}
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(xml.Header))
	_ = xml.NewEncoder(w).Encode(ErrorResponse{Xmlns: xmlns, Error: e, RequestID: requestID(r)})
	return status, code
}

// ParseError decodes an STS XML error body, for clients of the stand-in.
func ParseError(body []byte) (Error, error) {
	var er ErrorResponse
	if err := xml.Unmarshal(body, &er); err != nil {
		return Error{}, fmt.Errorf("decoding STS error body: %w", err)
	}
	return er.Error, nil
}

// ParseIdentity decodes a GetCallerIdentity XML response.
func ParseIdentity(body []byte) (Identity, error) {
	var res struct {
		Result Identity `xml:"GetCallerIdentityResult"`
	}
	if err := xml.Unmarshal(body, &res); err != nil {
		return Identity{}, fmt.Errorf("decoding GetCallerIdentity response: %w", err)
	}
	if res.Result.Arn == "" {
		return Identity{}, fmt.Errorf("decoding GetCallerIdentity response: no Arn")
	}
	return res.Result, nil
}
