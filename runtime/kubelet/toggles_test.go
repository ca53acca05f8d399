package kubelet

import (
	"bytes"
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"time"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

func TestVersionToggles(t *testing.T) {
	const grace, critical = 150 * time.Second, 30 * time.Second
	dra := map[string]bool{"DynamicResourceAllocation": true}
	both := map[string]bool{"DynamicResourceAllocation": true, "MutableCSINodeAllocatableCount": true}
	for _, tc := range []struct {
		version string
		want    Toggles
	}{
		{"v1.31.9", Toggles{FeatureGates: map[string]bool{}}},
		{"v1.32.5", Toggles{FeatureGates: map[string]bool{}}},
		{"1.33.0-eks-1", Toggles{FeatureGates: dra}},
		{"v1.34.0", Toggles{FeatureGates: both, ShutdownGracePeriod: grace, ShutdownGracePeriodCriticalPods: critical}},
		{"v1.35.4", Toggles{FeatureGates: both, ShutdownGracePeriod: grace, ShutdownGracePeriodCriticalPods: critical}},
		{"v2.0.0", Toggles{FeatureGates: both, ShutdownGracePeriod: grace, ShutdownGracePeriodCriticalPods: critical}},
	} {
		got, err := VersionToggles(tc.version)
		if err != nil {
			t.Errorf("%s: %v", tc.version, err)
			continue
		}
		if !maps.Equal(got.FeatureGates, tc.want.FeatureGates) || got.ShutdownGracePeriod != tc.want.ShutdownGracePeriod ||
			got.ShutdownGracePeriodCriticalPods != tc.want.ShutdownGracePeriodCriticalPods {
			t.Errorf("%s: %+v, want %+v", tc.version, got, tc.want)
		}
	}
	if _, err := VersionToggles("latest"); err == nil || !strings.Contains(err.Error(), `kubelet version "latest"`) {
		t.Errorf("bad version: %v", err)
	}
}

// The toggles land in config.json in kubelet's own field names, beside
// nodeadm's base gate; with none, the shutdown fields are absent, not "0s".
func TestConfigToggles(t *testing.T) {
	for _, version := range []string{"v1.33.1", "v1.35.4"} {
		tg, err := VersionToggles(version)
		if err != nil {
			t.Fatal(err)
		}
		b, err := MarshalConfig(Config(ConfigInputs{ClusterDNS: "10.100.0.10", MaxPods: 29, CPUs: 2, Toggles: tg}))
		if err != nil {
			t.Fatal(err)
		}
		var c kubeletv1beta1.KubeletConfiguration
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			t.Fatalf("%s: %v\n%s", version, err, b)
		}
		wantGates := maps.Clone(tg.FeatureGates)
		wantGates["RotateKubeletServerCertificate"] = true
		if !maps.Equal(c.FeatureGates, wantGates) {
			t.Errorf("%s: featureGates %v, want %v", version, c.FeatureGates, wantGates)
		}
		if c.ShutdownGracePeriod.Duration != tg.ShutdownGracePeriod || c.ShutdownGracePeriodCriticalPods.Duration != tg.ShutdownGracePeriodCriticalPods {
			t.Errorf("%s: shutdown %v/%v, want %v/%v", version, c.ShutdownGracePeriod, c.ShutdownGracePeriodCriticalPods, tg.ShutdownGracePeriod, tg.ShutdownGracePeriodCriticalPods)
		}
		if on := tg.ShutdownGracePeriod > 0; bytes.Contains(b, []byte(`"shutdownGracePeriod": "2m30s"`)) != on ||
			bytes.Contains(b, []byte(`"shutdownGracePeriodCriticalPods": "30s"`)) != on || (!on && bytes.Contains(b, []byte("shutdownGracePeriod"))) {
			t.Errorf("%s: shutdown fields in\n%s", version, b)
		}
	}
}
