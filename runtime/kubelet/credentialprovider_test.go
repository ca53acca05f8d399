package kubelet

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/berth-node/berth/awsauth/ecr"
	kubeletv1 "k8s.io/kubelet/config/v1"
)

// The config must decode into kubelet's own type with nothing unknown (a
// typo would make kubelet refuse to start) and carry nodeadm's values.
func TestCredentialProviderConfig(t *testing.T) {
	b, err := CredentialProviderConfig()
	if err != nil {
		t.Fatal(err)
	}
	var cfg kubeletv1.CredentialProviderConfig
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if cfg.APIVersion != "kubelet.config.k8s.io/v1" || cfg.Kind != "CredentialProviderConfig" || len(cfg.Providers) != 1 {
		t.Fatalf("config %+v", cfg)
	}
	p := cfg.Providers[0]
	if p.Name != "ecr-credential-provider" || p.APIVersion != "credentialprovider.kubelet.k8s.io/v1" ||
		p.DefaultCacheDuration == nil || p.DefaultCacheDuration.Duration != 12*time.Hour {
		t.Errorf("provider %+v", p)
	}
	if !slices.Equal(p.MatchImages, ecr.MatchImages(false)) || !slices.Contains(p.MatchImages, "*.dkr.ecr.*.amazonaws.com") {
		t.Errorf("matchImages %q", p.MatchImages)
	}
}
