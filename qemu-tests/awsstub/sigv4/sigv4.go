// Package sigv4 verifies AWS Signature Version 4 requests on the server side,
// as AWS services do: it rebuilds the request's canonical form from what was
// signed, re-signs it with the secret the server knows for the access key,
// and compares the signatures in constant time. Signing is left to the
// aws-sdk-go-v2 signer so the server and the clients share one
// implementation of the canonicalisation rules.
package sigv4

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Algorithm is the only signing algorithm accepted.
const Algorithm = "AWS4-HMAC-SHA256"

// timeFormat is X-Amz-Date's layout.
const timeFormat = "20060102T150405Z"

// MaxSkew is how far a request's signing time may be ahead of the server's
// clock, and how old a header-signed request may be (AWS allows 15 minutes).
const MaxSkew = 15 * time.Minute

// Credentials are what the server knows about one access key.
type Credentials struct {
	AccessKeyID     string
	SecretAccessKey string
	// SessionToken, when set, must be presented with the request
	// (temporary credentials, as IMDS hands out).
	SessionToken string
}

// Lookup returns the credentials for an access key ID, or false if the key
// is unknown.
type Lookup func(accessKeyID string) (Credentials, bool)

// Static is a Lookup that knows one set of credentials.
func Static(c Credentials) Lookup {
	return func(id string) (Credentials, bool) {
		if id == c.AccessKeyID {
			return c, true
		}
		return Credentials{}, false
	}
}

// Error codes, as STS names them; services with other names map them.
const (
	CodeIncompleteSignature   = "IncompleteSignature"
	CodeMissingAuthentication = "MissingAuthenticationToken"
	CodeInvalidClientTokenID  = "InvalidClientTokenId"
	CodeSignatureDoesNotMatch = "SignatureDoesNotMatch"
	CodeExpiredToken          = "ExpiredToken"
)

// Error is a verification failure: an AWS error code and a message meant
// for the client.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func fail(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Verified describes a request whose signature checked out.
type Verified struct {
	AccessKeyID string
	Region      string
	Service     string
	// SignedAt is the request's X-Amz-Date.
	SignedAt time.Time
	// Expires is X-Amz-Expires for a presigned request, zero otherwise.
	Expires time.Duration
	// SignedHeaders lists the signed header names, lower case, sorted.
	SignedHeaders []string
}

// scope is the parsed credential scope: AKID/date/region/service/aws4_request.
type scope struct {
	akid, date, region, service string
}

func parseScope(s string) (scope, *Error) {
	parts := strings.Split(s, "/")
	if len(parts) != 5 || parts[4] != "aws4_request" || parts[0] == "" {
		return scope{}, fail(CodeIncompleteSignature, "credential %q is not AKID/date/region/service/aws4_request", s)
	}
	return scope{akid: parts[0], date: parts[1], region: parts[2], service: parts[3]}, nil
}

// Expect is what the server requires of every request.
type Expect struct {
	// Service is the signing name (sts, ecr).
	Service string
	// Region, when set, must equal the credential scope's region.
	Region string
	Now    time.Time
	// PresignedValidFor, when set, replaces X-Amz-Expires as how long a
	// presigned request stays good after X-Amz-Date.
	PresignedValidFor time.Duration
}

func (e Expect) check(sc scope, signedAt time.Time) *Error {
	if sc.service != e.Service {
		return fail(CodeSignatureDoesNotMatch, "credential should be scoped to correct service: '%s'", e.Service)
	}
	if e.Region != "" && sc.region != e.Region {
		return fail(CodeSignatureDoesNotMatch, "credential should be scoped to a valid region, not '%s'", sc.region)
	}
	if sc.date != signedAt.Format("20060102") {
		return fail(CodeSignatureDoesNotMatch, "credential should be scoped to a valid date: '%s'", signedAt.Format("20060102"))
	}
	if signedAt.After(e.Now.Add(MaxSkew)) {
		return fail(CodeSignatureDoesNotMatch, "signature not yet current: %s is after %s", signedAt.Format(timeFormat), e.Now.Add(MaxSkew).Format(timeFormat))
	}
	return nil
}

func lookupCreds(lookup Lookup, akid, token string) (Credentials, *Error) {
	c, ok := lookup(akid)
	if !ok {
		return Credentials{}, fail(CodeInvalidClientTokenID, "the security token included in the request is invalid")
	}
	if subtle.ConstantTimeCompare([]byte(c.SessionToken), []byte(token)) != 1 {
		return Credentials{}, fail(CodeInvalidClientTokenID, "the security token included in the request is invalid")
	}
	return c, nil
}

func sameSignature(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(strings.ToLower(got)), []byte(want)) == 1
}

// emptyHash is the SHA-256 of an empty payload.
var emptyHash = hashHex(nil)

func hashHex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// signedCopy builds a request carrying only what the client signed: the
// method, host, path and query q, and the named headers from r. Re-signing
// it must reproduce the client's signature.
func signedCopy(r *http.Request, q url.Values, signed []string, bodyLen int64) (*http.Request, *Error) {
	u := url.URL{Scheme: "https", Host: r.Host, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: q.Encode()}
	if u.Path == "" {
		u.Path = "/"
	}
	c, err := http.NewRequest(r.Method, u.String(), nil)
	if err != nil {
		return nil, fail(CodeIncompleteSignature, "rebuilding request: %v", err)
	}
	c.Host = r.Host
	for _, h := range signed {
		switch h {
		case "host":
			continue
		case "content-length":
			c.ContentLength = bodyLen
			continue
		}
		vals := r.Header.Values(h)
		if len(vals) == 0 {
			return nil, fail(CodeSignatureDoesNotMatch, "signed header %q is missing from the request", h)
		}
		for _, v := range vals {
			c.Header.Add(h, v)
		}
	}
	return c, nil
}

func splitSigned(s string) ([]string, *Error) {
	if s == "" {
		return nil, fail(CodeIncompleteSignature, "no signed headers")
	}
	hs := strings.Split(s, ";")
	hasHost := false
	for _, h := range hs {
		if h != strings.ToLower(h) || h == "" {
			return nil, fail(CodeIncompleteSignature, "signed header %q is not a lower-case name", h)
		}
		hasHost = hasHost || h == "host"
	}
	if !hasHost {
		return nil, fail(CodeSignatureDoesNotMatch, "host must be a signed header")
	}
	return hs, nil
}

// VerifyPresigned checks a request authenticated by query parameters (a
// presigned URL). r.Host must be the host the client signed for (a proxy
// forwarding to a stand-in sets it). The payload is the empty body, as for
// every presigned GET.
func VerifyPresigned(r *http.Request, lookup Lookup, exp Expect) (Verified, *Error) {
	q := r.URL.Query()
	get := func(k string) string { return q.Get(k) }
	if get("X-Amz-Signature") == "" || get("X-Amz-Credential") == "" {
		return Verified{}, fail(CodeMissingAuthentication, "request is missing X-Amz-Signature or X-Amz-Credential")
	}
	if a := get("X-Amz-Algorithm"); a != Algorithm {
		return Verified{}, fail(CodeIncompleteSignature, "unsupported X-Amz-Algorithm %q, want %s", a, Algorithm)
	}
	sc, e := parseScope(get("X-Amz-Credential"))
	if e != nil {
		return Verified{}, e
	}
	signedAt, err := time.Parse(timeFormat, get("X-Amz-Date"))
	if err != nil {
		return Verified{}, fail(CodeIncompleteSignature, "X-Amz-Date %q is not %s", get("X-Amz-Date"), timeFormat)
	}
	secs, err := strconv.ParseInt(get("X-Amz-Expires"), 10, 64)
	if err != nil || secs < 1 || secs > 7*24*3600 {
		return Verified{}, fail(CodeIncompleteSignature, "X-Amz-Expires %q must be 1..604800 seconds", get("X-Amz-Expires"))
	}
	expires := time.Duration(secs) * time.Second
	if e := exp.check(sc, signedAt); e != nil {
		return Verified{}, e
	}
	creds, e := lookupCreds(lookup, sc.akid, get("X-Amz-Security-Token"))
	if e != nil {
		return Verified{}, e
	}
	signed, e := splitSigned(get("X-Amz-SignedHeaders"))
	if e != nil {
		return Verified{}, e
	}
	gotSig := get("X-Amz-Signature")
	q.Del("X-Amz-Signature")
	c, e := signedCopy(r, q, signed, 0)
	if e != nil {
		return Verified{}, e
	}
	s := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableHeaderHoisting = true })
	signedURL, hdr, err := s.PresignHTTP(context.Background(), awsCreds(creds), c, emptyHash, sc.service, sc.region, signedAt)
	if err != nil {
		return Verified{}, fail(CodeIncompleteSignature, "re-signing: %v", err)
	}
	want, err := url.Parse(signedURL)
	if err != nil {
		return Verified{}, fail(CodeIncompleteSignature, "re-signing: %v", err)
	}
	wq := want.Query()
	if wq.Get("X-Amz-SignedHeaders") != get("X-Amz-SignedHeaders") || len(hdr) != len(signed) {
		return Verified{}, fail(CodeSignatureDoesNotMatch, "the request signature we calculated does not match the signature you provided")
	}
	if !sameSignature(gotSig, wq.Get("X-Amz-Signature")) {
		return Verified{}, fail(CodeSignatureDoesNotMatch, "the request signature we calculated does not match the signature you provided")
	}
	// Expiry is checked after the signature so a forged X-Amz-Expires
	// cannot turn a bad signature into a softer error.
	valid := expires
	if exp.PresignedValidFor > 0 {
		valid = exp.PresignedValidFor
	}
	if exp.Now.After(signedAt.Add(valid)) {
		return Verified{}, fail(CodeExpiredToken, "request has expired: signed %s, good for %s", signedAt.Format(timeFormat), valid)
	}
	return Verified{AccessKeyID: sc.akid, Region: sc.region, Service: sc.service, SignedAt: signedAt, Expires: expires, SignedHeaders: signed}, nil
}

// VerifyHeader checks a request authenticated by its Authorization header;
// body is the request payload the client hashed.
func VerifyHeader(r *http.Request, body []byte, lookup Lookup, exp Expect) (Verified, *Error) {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return Verified{}, fail(CodeMissingAuthentication, "missing Authentication Token")
	}
	alg, rest, _ := strings.Cut(auth, " ")
	if alg != Algorithm {
		return Verified{}, fail(CodeIncompleteSignature, "unsupported algorithm %q, want %s", alg, Algorithm)
	}
	fields := map[string]string{}
	for _, f := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(f), "=")
		if !ok {
			return Verified{}, fail(CodeIncompleteSignature, "authorization header field %q is not key=value", f)
		}
		fields[k] = v
	}
	for _, k := range []string{"Credential", "SignedHeaders", "Signature"} {
		if fields[k] == "" {
			return Verified{}, fail(CodeIncompleteSignature, "authorization header requires a '%s' parameter", k)
		}
	}
	sc, e := parseScope(fields["Credential"])
	if e != nil {
		return Verified{}, e
	}
	signedAt, err := time.Parse(timeFormat, r.Header.Get("X-Amz-Date"))
	if err != nil {
		return Verified{}, fail(CodeIncompleteSignature, "X-Amz-Date header %q is not %s", r.Header.Get("X-Amz-Date"), timeFormat)
	}
	if e := exp.check(sc, signedAt); e != nil {
		return Verified{}, e
	}
	creds, e := lookupCreds(lookup, sc.akid, r.Header.Get("X-Amz-Security-Token"))
	if e != nil {
		return Verified{}, e
	}
	signed, e := splitSigned(fields["SignedHeaders"])
	if e != nil {
		return Verified{}, e
	}
	c, e := signedCopy(r, r.URL.Query(), signed, int64(len(body)))
	if e != nil {
		return Verified{}, e
	}
	// The signer adds X-Amz-Date and X-Amz-Security-Token itself from the
	// time and credentials; set them only through those.
	c.Header.Del("X-Amz-Date")
	c.Header.Del("X-Amz-Security-Token")
	payloadHash, e := headerPayloadHash(r, body, signed)
	if e != nil {
		return Verified{}, e
	}
	s := v4.NewSigner()
	if err := s.SignHTTP(context.Background(), awsCreds(creds), c, payloadHash, sc.service, sc.region, signedAt); err != nil {
		return Verified{}, fail(CodeIncompleteSignature, "re-signing: %v", err)
	}
	wantSigned, wantSig := authFields(c.Header.Get("Authorization"))
	if wantSigned != fields["SignedHeaders"] || !sameSignature(fields["Signature"], wantSig) {
		return Verified{}, fail(CodeSignatureDoesNotMatch, "the request signature we calculated does not match the signature you provided")
	}
	if exp.Now.After(signedAt.Add(MaxSkew)) {
		return Verified{}, fail(CodeExpiredToken, "signature expired: %s is now earlier than %s", signedAt.Format(timeFormat), exp.Now.Add(-MaxSkew).Format(timeFormat))
	}
	return Verified{AccessKeyID: sc.akid, Region: sc.region, Service: sc.service, SignedAt: signedAt, SignedHeaders: signed}, nil
}

// UnsignedPayload is the payload hash a client signs with when it streams
// a body it does not hash (EBS PutSnapshotBlock, S3 over TLS): the
// X-Amz-Content-Sha256 header says so and is itself signed.
const UnsignedPayload = "UNSIGNED-PAYLOAD"

// headerPayloadHash is the payload hash the client signed: the body's,
// or UNSIGNED-PAYLOAD when a signed X-Amz-Content-Sha256 header says so.
// A hex X-Amz-Content-Sha256 must be the body's hash, as AWS checks it.
func headerPayloadHash(r *http.Request, body []byte, signed []string) (string, *Error) {
	h := r.Header.Get("X-Amz-Content-Sha256")
	signedHash := false
	for _, n := range signed {
		signedHash = signedHash || n == "x-amz-content-sha256"
	}
	switch {
	case h == "":
		return hashHex(body), nil
	case !signedHash:
		return "", fail(CodeSignatureDoesNotMatch, "x-amz-content-sha256 must be a signed header")
	case h == UnsignedPayload:
		return UnsignedPayload, nil
	case h != hashHex(body):
		return "", fail(CodeSignatureDoesNotMatch, "the provided 'x-amz-content-sha256' header does not match what was computed")
	}
	return h, nil
}

func authFields(auth string) (signedHeaders, signature string) {
	_, rest, _ := strings.Cut(auth, " ")
	for _, f := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
		switch k {
		case "SignedHeaders":
			signedHeaders = v
		case "Signature":
			signature = v
		}
	}
	return signedHeaders, signature
}

func awsCreds(c Credentials) aws.Credentials {
	return aws.Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, SessionToken: c.SessionToken}
}
