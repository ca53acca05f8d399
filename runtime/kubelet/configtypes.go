package kubelet

import (
	"encoding/json"
	"fmt"
	"time"
)

// The types below are the subset of kubelet's config APIs
// (k8s.io/kubelet/config/v1beta1 KubeletConfiguration, config/v1
// CredentialProviderConfig) that berth writes, with the upstream JSON
// names. They replace the upstream structs because importing those linked
// k8s.io/api, apimachinery's scheme, component-base, prometheus and otel
// into PID 1 for a few dozen fields (issue 17). configtypes_test.go checks
// that they encode to the same bytes as the upstream structs.

// KubeletConfiguration is kubelet.config.k8s.io/v1beta1
// KubeletConfiguration, only the fields berth sets.
type KubeletConfiguration struct {
	APIVersion                      string                `json:"apiVersion,omitempty"`
	Kind                            string                `json:"kind,omitempty"`
	Address                         string                `json:"address,omitempty"`
	ReadOnlyPort                    int32                 `json:"readOnlyPort,omitempty"`
	TLSCipherSuites                 []string              `json:"tlsCipherSuites,omitempty"`
	ServerTLSBootstrap              bool                  `json:"serverTLSBootstrap,omitempty"`
	Authentication                  KubeletAuthentication `json:"authentication"`
	Authorization                   KubeletAuthorization  `json:"authorization"`
	ClusterDomain                   string                `json:"clusterDomain,omitempty"`
	ClusterDNS                      []string              `json:"clusterDNS,omitempty"`
	KubeletCgroups                  string                `json:"kubeletCgroups,omitempty"`
	CgroupRoot                      string                `json:"cgroupRoot,omitempty"`
	CgroupDriver                    string                `json:"cgroupDriver,omitempty"`
	HairpinMode                     string                `json:"hairpinMode,omitempty"`
	MaxPods                         int32                 `json:"maxPods,omitempty"`
	SerializeImagePulls             *bool                 `json:"serializeImagePulls,omitempty"`
	EvictionHard                    map[string]string     `json:"evictionHard,omitempty"`
	ProtectKernelDefaults           bool                  `json:"protectKernelDefaults,omitempty"`
	FeatureGates                    map[string]bool       `json:"featureGates,omitempty"`
	KubeReserved                    map[string]string     `json:"kubeReserved,omitempty"`
	SystemReservedCgroup            string                `json:"systemReservedCgroup,omitempty"`
	KubeReservedCgroup              string                `json:"kubeReservedCgroup,omitempty"`
	VolumePluginDir                 string                `json:"volumePluginDir,omitempty"`
	ProviderID                      string                `json:"providerID,omitempty"`
	Logging                         LoggingConfiguration  `json:"logging,omitempty"`
	ShutdownGracePeriod             Duration              `json:"shutdownGracePeriod,omitempty"`
	ShutdownGracePeriodCriticalPods Duration              `json:"shutdownGracePeriodCriticalPods,omitempty"`
	ContainerRuntimeEndpoint        string                `json:"containerRuntimeEndpoint"`
}

// KubeletAuthentication is v1beta1's, field for field.
type KubeletAuthentication struct {
	X509      KubeletX509Authentication      `json:"x509"`
	Webhook   KubeletWebhookAuthentication   `json:"webhook"`
	Anonymous KubeletAnonymousAuthentication `json:"anonymous"`
}

// KubeletX509Authentication is v1beta1's, field for field.
type KubeletX509Authentication struct {
	ClientCAFile string `json:"clientCAFile,omitempty"`
}

// KubeletWebhookAuthentication is v1beta1's, field for field.
type KubeletWebhookAuthentication struct {
	Enabled  *bool    `json:"enabled,omitempty"`
	CacheTTL Duration `json:"cacheTTL,omitempty"`
}

// KubeletAnonymousAuthentication is v1beta1's, field for field.
type KubeletAnonymousAuthentication struct {
	Enabled *bool `json:"enabled,omitempty"`
}

// KubeletAuthorization is v1beta1's, field for field.
type KubeletAuthorization struct {
	Mode    string                      `json:"mode,omitempty"`
	Webhook KubeletWebhookAuthorization `json:"webhook"`
}

// KubeletWebhookAuthorization is v1beta1's, field for field.
type KubeletWebhookAuthorization struct {
	CacheAuthorizedTTL   Duration `json:"cacheAuthorizedTTL,omitempty"`
	CacheUnauthorizedTTL Duration `json:"cacheUnauthorizedTTL,omitempty"`
}

// LoggingConfiguration is component-base's logs/api/v1
// LoggingConfiguration, only verbosity.
type LoggingConfiguration struct {
	Verbosity uint32 `json:"verbosity"`
}

// Values of v1beta1's enums that berth writes.
const (
	authorizationModeWebhook = "Webhook"
	hairpinVeth              = "hairpin-veth"
)

// credentialProviderConfig is kubelet.config.k8s.io/v1
// CredentialProviderConfig.
type credentialProviderConfig struct {
	Kind       string               `json:"kind,omitempty"`
	APIVersion string               `json:"apiVersion,omitempty"`
	Providers  []credentialProvider `json:"providers"`
}

// credentialProvider is v1's, without args and env, which berth never sets.
type credentialProvider struct {
	Name                 string    `json:"name"`
	MatchImages          []string  `json:"matchImages"`
	DefaultCacheDuration *Duration `json:"defaultCacheDuration"`
	APIVersion           string    `json:"apiVersion"`
}

// Duration encodes as metav1.Duration does: Go's duration string ("2m0s").
type Duration struct {
	time.Duration
}

// MarshalJSON writes the duration string, as metav1.Duration.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.Duration.String())
}

// UnmarshalJSON reads a duration string, as metav1.Duration.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration %s: %w", b, err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	d.Duration = v
	return nil
}
