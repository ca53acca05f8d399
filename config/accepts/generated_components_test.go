//go:build components

package accepts

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestGenerated reads what components/kubeaccepts and
// components/containerdaccepts wrote (`make accepts`) strictly into this
// package's types, and checks that it describes the components: a drift
// between the generators' types and these fails here, not on a node.
func TestGenerated(t *testing.T) {
	dir := os.Getenv("BERTH_COMPONENTS_DIR")
	if dir == "" {
		t.Fatal("BERTH_COMPONENTS_DIR is not set: run `make accepts` and set it to build/components")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "accepts", "*.json"))
	if len(files) != 2 {
		t.Fatalf("want the kubelet and containerd files under %s/accepts, got %v: run `make accepts`", dir, files)
	}
	a := &Accepts{}
	for _, f := range files {
		b, err := Load(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Merge(b); err != nil {
			t.Fatal(err)
		}
	}
	k, c := a.Kubelet, a.Containerd
	if k == nil || c == nil {
		t.Fatalf("kubelet %v, containerd %v", k, c)
	}
	if k.Flags["v"].Shorthand != "v" || k.Flags["max-pods"].Type != "int32" || k.Flags["fail-swap-on"].NoOptDefVal != "true" {
		t.Errorf("kubelet flags: v %+v, max-pods %+v, fail-swap-on %+v", k.Flags["v"], k.Flags["max-pods"], k.Flags["fail-swap-on"])
	}
	if _, ok := k.FeatureGates["RotateKubeletServerCertificate"]; !ok {
		t.Error("no RotateKubeletServerCertificate gate")
	}
	if !slices.Contains(k.ConfigAPIVersions, "kubelet.config.k8s.io/v1beta1") || !slices.Contains(k.EvictionSignals, "memory.available") ||
		!slices.Contains(k.TLSCipherSuites, "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256") || !slices.Contains(k.TLSVersions, "VersionTLS13") {
		t.Errorf("kubelet: api versions %v, signals %v, ciphers %v, versions %v", k.ConfigAPIVersions, k.EvictionSignals, k.TLSCipherSuites, k.TLSVersions)
	}
	if got := k.Config.Field("shutdownGracePeriod"); got == nil || got.Kind != KindDuration {
		t.Errorf("shutdownGracePeriod: %+v", got)
	}
	if got := k.Config.Field("logging").Field("verbosity"); got == nil || got.Kind != "uint32" {
		t.Errorf("logging.verbosity: %+v", got)
	}
	if !slices.Contains(c.ConfigVersions, 2) || !slices.Contains(c.ConfigVersions, 3) {
		t.Errorf("containerd config versions %v", c.ConfigVersions)
	}
	rt := c.Config.Field("plugins").Field("io.containerd.cri.v1.runtime")
	if got := rt.Field("enable_cdi"); got == nil || got.Kind != KindBool {
		t.Errorf("CRI runtime enable_cdi: %+v", got)
	}
	if got := c.Config.Field("oom_score"); got == nil || got.Kind != "int64" {
		t.Errorf("oom_score: %+v", got)
	}
	if got := c.RuntimeSpec.Field("process").Field("rlimits"); got == nil || got.Kind != KindList {
		t.Errorf("runtime spec process.rlimits: %+v", got)
	}
	runc := c.RuntimeOptions["io.containerd.runc.v2"]
	if got := runc.Field("SystemdCgroup"); got == nil || got.Kind != KindBool {
		t.Errorf("runc options SystemdCgroup: %+v", got)
	}
	if got := runc.Field("IoUid"); got == nil || got.Kind != "uint32" {
		t.Errorf("runc options IoUid: %+v", got)
	}
}
