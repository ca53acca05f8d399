package kubelet

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/berth-node/berth/runtime/awsauth/ecr"
)

// Where kubelet finds its image credential provider: nodeadm's config path,
// and a bin dir of berth's own that holds ecr-credential-provider as a link
// to berth (see image/spec.yaml).
const (
	CredentialProviderConfigPath = "/etc/eks/image-credential-provider/config.json"
	CredentialProviderBinDir     = "/usr/libexec/berth/credential-provider"
	credentialProviderConfigAPI  = "kubelet.config.k8s.io/v1"
	// credentialProviderCache is nodeadm's defaultCacheDuration; the
	// plugin's answer sets its own from the token's expiry anyway.
	credentialProviderCache = 12 * time.Hour
)

// ECR Public's registries (public.ecr.aws, ecr-public.aws.com) join the
// match list from this kubelet minor on, as nodeadm lists them. nodeadm's
// template (awslabs/amazon-eks-ami nodeadm/internal/kubelet/
// image-credential-provider.json.tpl) takes the list as .MatchImages,
// picked by kubelet version in its Go; that Go was not in the sources
// searched, so the cut is issue 14's record of it: kubelet >= 1.32. Below it a node keeps nodeadm's config exactly, so pulls
// from ECR Public stay anonymous there, as on an AL2023 node of the same
// version, and a node role without ecr-public:GetAuthorizationToken
// behaves the same as before.
const (
	ecrPublicSinceMajor = 1
	ecrPublicSinceMinor = 32
)

// ServesECRPublic says whether the config for a kubelet of version (the
// image manifest's components["kubelet"], e.g. "v1.35.4" or
// "1.31.2-eks-1") matches ECR Public's registries: kubelet 1.32 and later.
func ServesECRPublic(version string) (bool, error) {
	major, minor, err := majorMinor(version)
	if err != nil {
		return false, fmt.Errorf("kubelet version %q from the image manifest: %w", version, err)
	}
	if major != ecrPublicSinceMajor {
		return major > ecrPublicSinceMajor, nil
	}
	return minor >= ecrPublicSinceMinor, nil
}

// majorMinor reads the leading <major>.<minor> of a version; what follows
// (patch, pre-release, build) does not move the cut.
func majorMinor(version string) (int, int, error) {
	v := strings.TrimPrefix(strings.TrimSpace(version), "v")
	maj, rest, ok := strings.Cut(v, ".")
	if !ok {
		return 0, 0, fmt.Errorf("no <major>.<minor>")
	}
	end := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(rest)
	}
	major, err := strconv.Atoi(maj)
	if err != nil {
		return 0, 0, fmt.Errorf("major version: %w", err)
	}
	minor, err := strconv.Atoi(rest[:end])
	if err != nil {
		return 0, 0, fmt.Errorf("minor version: %w", err)
	}
	return major, minor, nil
}

// CredentialProviderConfig is the JSON of kubelet's
// --image-credential-provider-config: berth's ECR provider for nodeadm's
// ECR registry patterns, and ECR Public's hosts when ecrPublic (see
// ServesECRPublic).
func CredentialProviderConfig(ecrPublic bool) ([]byte, error) {
	cfg := credentialProviderConfig{
		APIVersion: credentialProviderConfigAPI,
		Kind:       "CredentialProviderConfig",
		Providers: []credentialProvider{{
			Name:                 ecr.ProviderName,
			MatchImages:          ecr.MatchImages(ecrPublic),
			DefaultCacheDuration: &Duration{Duration: credentialProviderCache},
			APIVersion:           ecr.PluginAPIVersion,
		}},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding CredentialProviderConfig: %w", err)
	}
	return append(b, '\n'), nil
}
