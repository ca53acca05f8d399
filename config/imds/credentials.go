package imds

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Credentials are the temporary credentials of the instance profile's role,
// from meta-data/iam/security-credentials/<role>.
type Credentials struct {
	Role            string
	AccessKeyID     string
	SecretAccessKey string
	Token           string
	Expiration      time.Time
}

// String leaves the secret and the session token out, so credentials can be
// logged or put in an error by mistake without leaking.
func (c Credentials) String() string {
	return fmt.Sprintf("role %s, key %s, expires %s", c.Role, c.AccessKeyID, c.Expiration.UTC().Format(time.RFC3339))
}

// LogValue keeps slog from printing the secret fields.
func (c Credentials) LogValue() slog.Value { return slog.StringValue(c.String()) }

// ParseCredentials decodes a role's credentials document. Error messages
// never quote the document, which holds secrets.
func ParseCredentials(b []byte) (*Credentials, error) {
	if len(b) > maxDocument {
		return nil, fmt.Errorf("credentials: %d bytes, more than the %d allowed", len(b), maxDocument)
	}
	var v struct {
		Code            string
		AccessKeyID     string `json:"AccessKeyId"`
		SecretAccessKey string
		Token           string
		Expiration      string
	}
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&v); err != nil {
		return nil, fmt.Errorf("credentials: not a JSON object of strings (%T)", err)
	}
	if v.Code != "Success" {
		return nil, fmt.Errorf("credentials: Code is %q, not \"Success\"", truncate(v.Code, 40))
	}
	var missing []string
	for _, f := range []struct{ name, val string }{{"AccessKeyId", v.AccessKeyID}, {"SecretAccessKey", v.SecretAccessKey},
		{"Token", v.Token}, {"Expiration", v.Expiration}} {
		if f.val == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("credentials: missing %s", strings.Join(missing, ", "))
	}
	exp, err := time.Parse(time.RFC3339, v.Expiration)
	if err != nil {
		return nil, fmt.Errorf("credentials: Expiration %q is not an RFC 3339 time", truncate(v.Expiration, 40))
	}
	return &Credentials{AccessKeyID: v.AccessKeyID, SecretAccessKey: v.SecretAccessKey, Token: v.Token, Expiration: exp}, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// RoleCredentials returns the credentials of the instance profile's role.
// An instance has at most one role; with none, the error wraps ErrNotFound.
func (c *Client) RoleCredentials(ctx context.Context) (*Credentials, error) {
	const dir = "meta-data/iam/security-credentials/"
	b, err := c.Get(ctx, dir)
	if err != nil {
		return nil, err
	}
	roles := ParseListing(b)
	if len(roles) == 0 {
		return nil, fmt.Errorf("imds: %s lists no role: %w", dir, ErrNotFound)
	}
	role := roles[0]
	if strings.ContainsAny(role, "/?#") {
		return nil, fmt.Errorf("imds: %s lists %q, not a role name", dir, truncate(role, 64))
	}
	b, err = c.Get(ctx, dir+role)
	if err != nil {
		return nil, err
	}
	cr, err := ParseCredentials(b)
	if err != nil {
		return nil, fmt.Errorf("imds: %s%s: %w", dir, role, err)
	}
	cr.Role = role
	return cr, nil
}
