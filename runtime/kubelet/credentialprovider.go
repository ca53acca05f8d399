package kubelet

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/berth-node/berth/awsauth/ecr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1 "k8s.io/kubelet/config/v1"
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

// CredentialProviderConfig is the JSON of kubelet's
// --image-credential-provider-config: berth's ECR provider for nodeadm's
// ECR registry patterns.
func CredentialProviderConfig() ([]byte, error) {
	cfg := kubeletv1.CredentialProviderConfig{
		TypeMeta: metav1.TypeMeta{APIVersion: credentialProviderConfigAPI, Kind: "CredentialProviderConfig"},
		Providers: []kubeletv1.CredentialProvider{{
			Name:                 ecr.ProviderName,
			MatchImages:          ecr.MatchImages(false),
			DefaultCacheDuration: &metav1.Duration{Duration: credentialProviderCache},
			APIVersion:           ecr.PluginAPIVersion,
		}},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding CredentialProviderConfig: %w", err)
	}
	return append(b, '\n'), nil
}
