package kubelet

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/runtime/awsauth/ecr"
	kubeletv1 "k8s.io/kubelet/config/v1"
)

// The config must decode into kubelet's own type with nothing unknown (a
// typo would make kubelet refuse to start) and carry nodeadm's values.
func TestCredentialProviderConfig(t *testing.T) {
	for _, public := range []bool{false, true} {
		b, err := CredentialProviderConfig(public)
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
		if !slices.Equal(p.MatchImages, ecr.MatchImages(public)) || !slices.Contains(p.MatchImages, "*.dkr.ecr.*.amazonaws.com") ||
			slices.Contains(p.MatchImages, "public.ecr.aws") != public || slices.Contains(p.MatchImages, "ecr-public.aws.com") != public {
			t.Errorf("ecrPublic %v: matchImages %q", public, p.MatchImages)
		}
	}
}

func TestServesECRPublic(t *testing.T) {
	for v, want := range map[string]bool{
		"v1.35.4": true, "v1.32.0": true, "1.32.0-rc.1": true, "v1.32": true, "v2.0.0": true,
		"v1.31.9": false, "1.31.2-eks-1": false, "v1.27.0": false, " v1.33.1\n": true,
	} {
		got, err := ServesECRPublic(v)
		if err != nil || got != want {
			t.Errorf("ServesECRPublic(%q) = %v, %v; want %v", v, got, err, want)
		}
	}
	for _, bad := range []string{"", "v1", "latest", "vx.32", "v1.x"} {
		if _, err := ServesECRPublic(bad); err == nil || !strings.Contains(err.Error(), "kubelet version") {
			t.Errorf("ServesECRPublic(%q): err %v", bad, err)
		}
	}
}
