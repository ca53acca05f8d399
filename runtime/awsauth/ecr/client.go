package ecr

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

const (
	// Target names ECR's GetAuthorizationToken operation (JSON 1.1 protocol).
	Target = "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken"
	// PublicTarget names ECR Public's (the service's internal name is
	// SpencerFrontendService).
	PublicTarget = "SpencerFrontendService.GetAuthorizationToken"
	contentType  = "application/x-amz-json-1.1"
	// DefaultTimeout bounds one GetAuthorizationToken call.
	DefaultTimeout = 20 * time.Second
	// maxBody bounds the answer read, error answers included.
	maxBody = 1 << 20
)

// API is which of the two services a registry's logins come from: they
// share the call, the protocol and the token's form, and differ in the
// target, the SigV4 service name and the answer's shape.
type API int

const (
	// Private is Amazon ECR: <account>.dkr.ecr.<region>.<domain>.
	Private API = iota
	// Public is Amazon ECR Public: public.ecr.aws and its alias
	// ecr-public.aws.com, served from us-east-1 only.
	Public
)

// apiSpec is what tells the two services apart on the wire.
type apiSpec struct {
	name        string // in errors
	target      string // X-Amz-Target
	signingName string // SigV4 service name
	// endpointEnv is the suffix of the SDKs' service-specific endpoint
	// override, from the service IDs "ECR" and "ECR PUBLIC".
	endpointEnv string
}

func (a API) spec() apiSpec {
	if a == Public {
		return apiSpec{name: "ECR Public", target: PublicTarget, signingName: "ecr-public", endpointEnv: "ECR_PUBLIC"}
	}
	return apiSpec{name: "ECR", target: Target, signingName: "ecr", endpointEnv: "ECR"}
}

// String names the service in errors.
func (a API) String() string { return a.spec().name }

// EndpointEnv is X in AWS_ENDPOINT_URL_X, the SDKs' override of the
// service's endpoint.
func (a API) EndpointEnv() string { return a.spec().endpointEnv }

// Client calls ECR's or ECR Public's GetAuthorizationToken.
type Client struct {
	// API is the service called; the zero value is ECR.
	API API
	// Endpoint is the API URL; the caller picks it (Registry.APIEndpoint,
	// or AWS_ENDPOINT_URL_ECR / AWS_ENDPOINT_URL_ECR_PUBLIC).
	Endpoint string
	// Region scopes the signature: the registry's for ECR, us-east-1 for
	// ECR Public.
	Region string
	Creds  aws.Credentials
	HTTP   *http.Client
	// Clock is the signing time source; time.Now by default.
	Clock func() time.Time
	// Timeout bounds the call when ctx has no sooner deadline; default
	// DefaultTimeout.
	Timeout time.Duration
}

// GetAuthorizationToken returns the registry login: for ECR, the caller's
// default registry (the account of the credentials, as the upstream
// plugin asks: no registryIds); for ECR Public, the one login every
// public registry takes.
func (c *Client) GetAuthorizationToken(ctx context.Context) (Auth, error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	now := time.Now
	if c.Clock != nil {
		now = c.Clock
	}
	hc := http.Client{}
	if c.HTTP != nil {
		hc = *c.HTTP // a copy, so the caller's redirect policy is left alone
	}
	// ECR never redirects. Following a redirect would send the signed
	// request, session token included, wherever it points (Go drops only
	// the Authorization header when the host changes), so the 3xx comes
	// back as the answer and is refused below.
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	ep := strings.TrimRight(c.Endpoint, "/") + "/"
	body := []byte("{}")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep, bytes.NewReader(body))
	if err != nil {
		return Auth{}, fmt.Errorf("%s GetAuthorizationToken at %s: %w", c.API, c.Endpoint, err)
	}
	req.Header.Set("X-Amz-Target", c.API.spec().target)
	req.Header.Set("Content-Type", contentType)
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(ctx, c.Creds, req, hex.EncodeToString(sum[:]), c.API.spec().signingName, c.Region, now()); err != nil {
		return Auth{}, fmt.Errorf("%s GetAuthorizationToken: signing: %w", c.API, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Auth{}, fmt.Errorf("%s GetAuthorizationToken at %s: %w", c.API, c.Endpoint, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		loc := resp.Header.Get("Location")
		if loc == "" {
			loc = "(no Location)"
		}
		return Auth{}, fmt.Errorf("%s GetAuthorizationToken at %s: POST %s answered %s, a redirect to %s: AWS APIs do not redirect, so the signed request is not sent on",
			c.API, c.Endpoint, ep, resp.Status, loc)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return Auth{}, fmt.Errorf("%s GetAuthorizationToken at %s: reading the answer: %w", c.API, c.Endpoint, err)
	}
	if resp.StatusCode != http.StatusOK {
		return Auth{}, fmt.Errorf("%s GetAuthorizationToken at %s: %s: %s", c.API, c.Endpoint, resp.Status, apiError(b))
	}
	if len(b) > maxBody {
		return Auth{}, fmt.Errorf("%s GetAuthorizationToken at %s: the answer is over the %d-byte limit; a real one is under 4 KiB", c.API, c.Endpoint, maxBody)
	}
	return ParseAuthorizationToken(c.API, b)
}

// apiError summarises a JSON 1.1 error body ({"__type": ..., "message": ...}).
func apiError(b []byte) string {
	var e struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
		Msg2    string `json:"Message"`
	}
	if json.Unmarshal(b, &e) != nil || e.Type == "" {
		if len(b) > 200 {
			b = b[:200]
		}
		return strings.TrimSpace(string(b))
	}
	if e.Message == "" {
		e.Message = e.Msg2
	}
	return e.Type + ": " + e.Message
}

// ParseAuthorizationToken decodes a GetAuthorizationToken answer of api:
// the base64 "AWS:<password>" and its expiresAt (epoch seconds), from the
// first entry of ECR's authorizationData list or from ECR Public's one
// authorizationData object. Errors never quote the token.
func ParseAuthorizationToken(api API, b []byte) (Auth, error) {
	type data struct {
		AuthorizationToken string      `json:"authorizationToken"`
		ExpiresAt          json.Number `json:"expiresAt"`
	}
	var v struct {
		AuthorizationData json.RawMessage `json:"authorizationData"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return Auth{}, fmt.Errorf("%s GetAuthorizationToken answer: not the expected JSON (%T)", api, err)
	}
	if len(v.AuthorizationData) == 0 || string(v.AuthorizationData) == "null" {
		return Auth{}, fmt.Errorf("%s GetAuthorizationToken answer: no authorizationData", api)
	}
	// The shape is checked first so an error says which service's answer
	// came back; a decoding error below it is about the fields.
	var d data
	field := "authorizationData"
	shape := bytes.TrimSpace(v.AuthorizationData)[0]
	if api == Public {
		if shape != '{' {
			return Auth{}, fmt.Errorf("%s GetAuthorizationToken answer: authorizationData is not an object", api)
		}
		if err := json.Unmarshal(v.AuthorizationData, &d); err != nil {
			return Auth{}, fmt.Errorf("%s GetAuthorizationToken answer: authorizationData is not the expected JSON (%T)", api, err)
		}
	} else {
		if shape != '[' {
			return Auth{}, fmt.Errorf("%s GetAuthorizationToken answer: authorizationData is not a list", api)
		}
		var list []data
		if err := json.Unmarshal(v.AuthorizationData, &list); err != nil {
			return Auth{}, fmt.Errorf("%s GetAuthorizationToken answer: authorizationData is not the expected JSON (%T)", api, err)
		}
		if len(list) == 0 {
			return Auth{}, fmt.Errorf("%s GetAuthorizationToken answer: no authorizationData", api)
		}
		d, field = list[0], "authorizationData[0]"
	}
	raw, err := base64.StdEncoding.DecodeString(d.AuthorizationToken)
	if err != nil {
		return Auth{}, fmt.Errorf("%s GetAuthorizationToken answer: %s.authorizationToken is not base64", api, field)
	}
	user, pass, ok := strings.Cut(string(raw), ":")
	if !ok || user == "" || pass == "" {
		return Auth{}, fmt.Errorf("%s GetAuthorizationToken answer: %s.authorizationToken is not user:password", api, field)
	}
	secs, err := d.ExpiresAt.Float64()
	if err != nil || secs <= 0 || math.IsInf(secs, 0) || secs > 1e11 {
		return Auth{}, fmt.Errorf("%s GetAuthorizationToken answer: %s.expiresAt %q is not epoch seconds", api, field, d.ExpiresAt)
	}
	whole, frac := math.Modf(secs)
	return Auth{Username: user, Password: pass, ExpiresAt: time.Unix(int64(whole), int64(frac*1e9)).UTC()}, nil
}
