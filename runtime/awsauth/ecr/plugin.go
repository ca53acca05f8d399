// Package ecr is berth's kubelet image credential provider for Amazon ECR
// and ECR Public: the plugin protocol (a
// credentialprovider.kubelet.k8s.io/v1 CredentialProviderRequest on stdin,
// a CredentialProviderResponse on stdout), the registry host patterns
// nodeadm configures, and a GetAuthorizationToken client for either
// service, signed with SigV4. It replaces the separate
// ecr-credential-provider binary, so the image tracks one Go program.
//
// Parsing and rendering are pure; Client is the only part that talks to
// the network, and every call it makes has a deadline.
package ecr

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"
)

const (
	// ProviderName is the plugin's name in the CredentialProviderConfig and
	// the file name kubelet runs from the bin dir (a link to berth).
	ProviderName = "ecr-credential-provider"
	// PluginAPIVersion is the plugin protocol version berth speaks.
	PluginAPIVersion = "credentialprovider.kubelet.k8s.io/v1"
	// maxRequest bounds what is read from stdin: a request is one image
	// name and perhaps a service account token.
	maxRequest = 1 << 20
	// CacheMargin is taken off the token's lifetime so kubelet stops
	// using it before ECR does, with room for a long pull.
	CacheMargin = 30 * time.Minute
)

// Amazon ECR Public's registry host, its alias, and the one region its API
// is in. Upstream's plugin (kubernetes/cloud-provider-aws
// cmd/ecr-credential-provider/main.go: ecrPublicHost, ecrPublicRegion)
// calls ecrpublic.GetAuthorizationToken with a session pinned to us-east-1
// whatever the node's region, and answers for the image's host; the
// version read compares only public.ecr.aws, but nodeadm matches the alias
// too, and a plugin that refused a host kubelet sends it would fail the
// pull, so both are served.
const (
	PublicHost      = "public.ecr.aws"
	PublicAliasHost = "ecr-public.aws.com"
	PublicRegion    = "us-east-1"
)

// MatchImages are nodeadm's registry patterns
// (nodeadm/internal/kubelet/image-credential-provider.template.json), a
// fresh slice each call. ecrPublic adds ECR Public's two hosts, which
// nodeadm lists only for kubelet 1.32 and later (see
// runtime/kubelet.ServesECRPublic).
func MatchImages(ecrPublic bool) []string {
	m := []string{
		"*.dkr.ecr.*.amazonaws.com",
		"*.dkr-ecr.*.on.aws",
		"*.dkr.ecr.*.amazonaws.com.cn",
		"*.dkr-ecr.*.on.amazonwebservices.com.cn",
		"*.dkr.ecr-fips.*.amazonaws.com",
		"*.dkr-ecr-fips.*.on.aws",
		"*.dkr.ecr.*.c2s.ic.gov",
		"*.dkr.ecr.*.sc2s.sgov.gov",
		"*.dkr.ecr.*.cloud.adc-e.uk",
		"*.dkr.ecr.*.csp.hci.ic.gov",
		// The AWS European Sovereign Cloud (nodeadm added it after the list
		// above; its API is api.ecr.<region>.amazonaws.eu, as elsewhere).
		"*.dkr.ecr.*.amazonaws.eu",
	}
	if ecrPublic {
		m = append(m, PublicHost, PublicAliasHost)
	}
	return m
}

// hostRE matches the registry hosts of MatchImages, capturing the account,
// the dkr label (which says FIPS or dual-stack), the region and the domain.
var hostRE = regexp.MustCompile(`^([0-9]{12})\.(dkr\.ecr|dkr\.ecr-fips|dkr-ecr|dkr-ecr-fips)\.([a-z0-9][a-z0-9-]*)\.(amazonaws\.com|amazonaws\.com\.cn|on\.aws|on\.amazonwebservices\.com\.cn|c2s\.ic\.gov|sc2s\.sgov\.gov|cloud\.adc-e\.uk|csp\.hci\.ic\.gov|amazonaws\.eu)$`)

// Registry is an ECR or ECR Public registry named in an image reference.
type Registry struct {
	// Host is the registry as written in the image, port included: the key
	// of the response's auth map, so kubelet matches it to the image.
	Host string
	// API says which service issues its logins.
	API API
	// Account is empty for ECR Public: one login serves every public
	// repository.
	Account string
	// Region is the signing region: the registry's, or PublicRegion.
	Region string
	FIPS   bool
	// Domain is the DNS suffix after the region (ECR only).
	Domain string
}

// APIEndpoint is the API endpoint for the registry's logins: ECR Public's
// in us-east-1, or ECR's in the registry's region, FIPS and the
// dual-stack (on.aws) registries mapping to their API counterparts.
func (r Registry) APIEndpoint() string {
	if r.API == Public {
		return "https://api.ecr-public." + PublicRegion + ".amazonaws.com"
	}
	switch r.Domain {
	case "on.aws":
		if r.FIPS {
			return "https://ecr-fips." + r.Region + ".api.aws"
		}
		return "https://ecr." + r.Region + ".api.aws"
	case "on.amazonwebservices.com.cn":
		return "https://ecr." + r.Region + ".api.amazonwebservices.com.cn"
	}
	if r.FIPS {
		return "https://ecr-fips." + r.Region + "." + r.Domain
	}
	return "https://api.ecr." + r.Region + "." + r.Domain
}

// ParseImage finds the ECR or ECR Public registry in an image reference as
// kubelet passes it (`123456789012.dkr.ecr.us-east-1.amazonaws.com/app:v1`,
// `public.ecr.aws/eks/pause:3.10`, perhaps with a scheme, a port or a
// digest).
func ParseImage(image string) (Registry, error) {
	s := image
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
	}
	host, _, _ := strings.Cut(s, "/")
	if host == "" {
		return Registry{}, fmt.Errorf("image %q names no registry host", image)
	}
	name := host
	if h, port, err := net.SplitHostPort(host); err == nil {
		if _, err := url.Parse("https://" + host); err != nil || port == "" {
			return Registry{}, fmt.Errorf("image %q: registry %q has a bad port", image, host)
		}
		name = h
	}
	lower := strings.ToLower(name)
	if lower == PublicHost || lower == PublicAliasHost {
		return Registry{Host: host, API: Public, Region: PublicRegion}, nil
	}
	m := hostRE.FindStringSubmatch(lower)
	if m == nil {
		return Registry{}, fmt.Errorf("image %q: registry %q is not an ECR registry (<account>.dkr.ecr.<region>.amazonaws.com or another of nodeadm's patterns, or %s or %s)", image, host, PublicHost, PublicAliasHost)
	}
	return Registry{Host: host, Account: m[1], FIPS: strings.HasSuffix(m[2], "fips"), Region: m[3], Domain: m[4]}, nil
}

// ParseRequest decodes the CredentialProviderRequest kubelet writes to the
// plugin's stdin. Unknown fields are ignored, so a newer kubelet that
// adds some still gets credentials.
func ParseRequest(b []byte) (*Request, error) {
	if len(b) > maxRequest {
		return nil, fmt.Errorf("CredentialProviderRequest: %d bytes, more than the %d allowed", len(b), maxRequest)
	}
	var req Request
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&req); err != nil {
		return nil, fmt.Errorf("CredentialProviderRequest: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("CredentialProviderRequest: data after the JSON object")
	}
	if req.APIVersion != PluginAPIVersion || req.Kind != "CredentialProviderRequest" {
		return nil, fmt.Errorf("CredentialProviderRequest: apiVersion %q kind %q, want %q CredentialProviderRequest", req.APIVersion, req.Kind, PluginAPIVersion)
	}
	if req.Image == "" {
		return nil, fmt.Errorf("CredentialProviderRequest: image is empty")
	}
	return &req, nil
}

// Auth is a registry login.
type Auth struct {
	Username string
	Password string
	// ExpiresAt is when the registry stops accepting it.
	ExpiresAt time.Time
}

// CacheDuration is how long kubelet may reuse a login expiring at exp,
// seen at now: its remaining life less CacheMargin, or zero (do not cache)
// when that leaves nothing.
func CacheDuration(now, exp time.Time) time.Duration {
	d := exp.Sub(now) - CacheMargin
	if d < 0 {
		return 0
	}
	return d.Truncate(time.Second)
}

// Response renders the CredentialProviderResponse for reg, with a
// trailing newline. The cache key is the registry, so one login serves
// every image in it.
func Response(reg Registry, a Auth, now time.Time) ([]byte, error) {
	resp := response{
		APIVersion:    PluginAPIVersion,
		Kind:          "CredentialProviderResponse",
		CacheKeyType:  registryPluginCacheKeyType,
		CacheDuration: CacheDuration(now, a.ExpiresAt).String(),
		Auth:          map[string]authConfig{reg.Host: {Username: a.Username, Password: a.Password}},
	}
	b, err := json.Marshal(resp)
	if err != nil {
		return nil, fmt.Errorf("encoding CredentialProviderResponse: %w", err)
	}
	return append(b, '\n'), nil
}

// The plugin protocol's types (k8s.io/kubelet/pkg/apis/credentialprovider/v1),
// only the fields berth reads or writes, with the upstream JSON names:
// the upstream package linked apimachinery's scheme into PID 1 for four
// structs (issue 17). ecr_test.go decodes and re-encodes them with the
// upstream types.

// Request is a CredentialProviderRequest, without the service account
// fields berth does not use.
type Request struct {
	Kind       string `json:"kind,omitempty"`
	APIVersion string `json:"apiVersion,omitempty"`
	// Image is the image kubelet is pulling.
	Image string `json:"image"`
}

// response is a CredentialProviderResponse. CacheDuration is the duration
// string metav1.Duration writes; berth always sets it.
type response struct {
	Kind          string                `json:"kind,omitempty"`
	APIVersion    string                `json:"apiVersion,omitempty"`
	CacheKeyType  string                `json:"cacheKeyType"`
	CacheDuration string                `json:"cacheDuration,omitempty"`
	Auth          map[string]authConfig `json:"auth,omitempty"`
}

type authConfig struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// registryPluginCacheKeyType is v1's RegistryPluginCacheKeyType.
const registryPluginCacheKeyType = "Registry"
