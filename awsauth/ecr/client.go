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
	// Target names the GetAuthorizationToken operation (JSON 1.1 protocol).
	Target      = "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken"
	contentType = "application/x-amz-json-1.1"
	// DefaultTimeout bounds one GetAuthorizationToken call.
	DefaultTimeout = 20 * time.Second
	// maxBody bounds the answer read, error answers included.
	maxBody = 1 << 20
)

// Client calls ECR's GetAuthorizationToken.
type Client struct {
	// Endpoint is the API URL; the caller picks it (Registry.APIEndpoint,
	// or AWS_ENDPOINT_URL_ECR).
	Endpoint string
	Region   string
	Creds    aws.Credentials
	HTTP     *http.Client
	// Clock is the signing time source; time.Now by default.
	Clock func() time.Time
	// Timeout bounds the call when ctx has no sooner deadline; default
	// DefaultTimeout.
	Timeout time.Duration
}

// GetAuthorizationToken returns the registry login for the caller's
// default registry (the account of the credentials, as the upstream
// plugin asks: no registryIds).
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
		return Auth{}, fmt.Errorf("ECR GetAuthorizationToken at %s: %w", c.Endpoint, err)
	}
	req.Header.Set("X-Amz-Target", Target)
	req.Header.Set("Content-Type", contentType)
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(ctx, c.Creds, req, hex.EncodeToString(sum[:]), "ecr", c.Region, now()); err != nil {
		return Auth{}, fmt.Errorf("ECR GetAuthorizationToken: signing: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Auth{}, fmt.Errorf("ECR GetAuthorizationToken at %s: %w", c.Endpoint, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		loc := resp.Header.Get("Location")
		if loc == "" {
			loc = "(no Location)"
		}
		return Auth{}, fmt.Errorf("ECR GetAuthorizationToken at %s: POST %s answered %s, a redirect to %s: AWS APIs do not redirect, so the signed request is not sent on",
			c.Endpoint, ep, resp.Status, loc)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return Auth{}, fmt.Errorf("ECR GetAuthorizationToken at %s: reading the answer: %w", c.Endpoint, err)
	}
	if resp.StatusCode != http.StatusOK {
		return Auth{}, fmt.Errorf("ECR GetAuthorizationToken at %s: %s: %s", c.Endpoint, resp.Status, apiError(b))
	}
	if len(b) > maxBody {
		return Auth{}, fmt.Errorf("ECR GetAuthorizationToken at %s: the answer is over the %d-byte limit; a real one is under 4 KiB", c.Endpoint, maxBody)
	}
	return ParseAuthorizationToken(b)
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

// ParseAuthorizationToken decodes a GetAuthorizationToken answer: the
// first authorizationData's base64 "AWS:<password>" and its expiresAt
// (epoch seconds). Errors never quote the token.
func ParseAuthorizationToken(b []byte) (Auth, error) {
	var v struct {
		AuthorizationData []struct {
			AuthorizationToken string      `json:"authorizationToken"`
			ExpiresAt          json.Number `json:"expiresAt"`
		} `json:"authorizationData"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return Auth{}, fmt.Errorf("ECR GetAuthorizationToken answer: not the expected JSON (%T)", err)
	}
	if len(v.AuthorizationData) == 0 {
		return Auth{}, fmt.Errorf("ECR GetAuthorizationToken answer: no authorizationData")
	}
	d := v.AuthorizationData[0]
	raw, err := base64.StdEncoding.DecodeString(d.AuthorizationToken)
	if err != nil {
		return Auth{}, fmt.Errorf("ECR GetAuthorizationToken answer: authorizationData[0].authorizationToken is not base64")
	}
	user, pass, ok := strings.Cut(string(raw), ":")
	if !ok || user == "" || pass == "" {
		return Auth{}, fmt.Errorf("ECR GetAuthorizationToken answer: authorizationData[0].authorizationToken is not user:password")
	}
	secs, err := d.ExpiresAt.Float64()
	if err != nil || secs <= 0 || math.IsInf(secs, 0) || secs > 1e11 {
		return Auth{}, fmt.Errorf("ECR GetAuthorizationToken answer: authorizationData[0].expiresAt %q is not epoch seconds", d.ExpiresAt)
	}
	whole, frac := math.Modf(secs)
	return Auth{Username: user, Password: pass, ExpiresAt: time.Unix(int64(whole), int64(frac*1e9)).UTC()}, nil
}
