package nodeconfig

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestLoadBottlerocket: Bottlerocket settings user data (Karpenter's) is
// read as a NodeConfig named by its part; its taints and labels are
// kubelet flags, its cluster DNS address, max pods and reservations
// kubelet's config, and the settings berth ignores are warnings naming
// their path.
func TestLoadBottlerocket(t *testing.T) {
	data, err := os.ReadFile("../bottlerocket/testdata/golden/karpenter.toml")
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	res, err := Load(context.Background(), quiet, []Source{{Name: UserDataSource, Data: data}})
	if err != nil {
		t.Fatalf("Load: %v\n%q", err, strs(res.Problems))
	}
	if !slices.Equal(res.Used, []string{"user-data (Bottlerocket settings)"}) {
		t.Errorf("used %q", res.Used)
	}
	c := res.Config
	if c.Spec.Cluster.Name != "prod-west" || !strings.HasPrefix(string(c.Spec.Cluster.CertificateAuthority), "-----BEGIN CERTIFICATE-----") || c.Spec.Cluster.CIDR != "" {
		t.Errorf("cluster %+v", c.Spec.Cluster)
	}
	kc, _ := json.Marshal(c.Spec.Kubelet.Config)
	for _, want := range []string{`"clusterDNS":["10.100.0.10"]`, `"maxPods":58`, `"kubeReserved":{"cpu":"70m","ephemeral-storage":"1Gi","memory":"893Mi"}`} {
		if !strings.Contains(string(kc), want) {
			t.Errorf("kubelet config %s lacks %s", kc, want)
		}
	}
	flags := strings.Join(c.Spec.Kubelet.Flags, " ")
	if !strings.Contains(flags, "--register-with-taints=") || !strings.Contains(flags, "karpenter.sh/unregistered:NoExecute") || !strings.Contains(flags, "team=payments") {
		t.Errorf("flags %q", flags)
	}
	for _, p := range res.Problems {
		if !strings.HasPrefix(p.Source, "user-data (Bottlerocket settings)") || !strings.HasPrefix(p.Path, "settings.") {
			t.Errorf("problem not named by source and settings path: %s", p)
		}
	}
}

// TestLoadBottlerocketRefused: a setting berth cannot honour stops the
// node with its path named.
func TestLoadBottlerocketRefused(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	doc := "[settings.kubernetes]\ncluster-name = 'c'\n[settings.host-containers.mine]\nenabled = true\nsource = 'x'\n"
	res, err := Load(context.Background(), quiet, []Source{{Name: UserDataSource, Data: []byte(doc)}})
	if err == nil || !slices.ContainsFunc(strs(res.Problems), func(s string) bool {
		return strings.HasPrefix(s, "error: user-data (Bottlerocket settings): settings.host-containers.mine")
	}) {
		t.Errorf("an enabled host container: %v %q", err, strs(res.Problems))
	}
}
