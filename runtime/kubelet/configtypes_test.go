package kubelet

import (
	"bytes"
	"encoding/json"
	"testing"

	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	kubeletv1 "k8s.io/kubelet/config/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

// berth's local config types must render exactly what the upstream types
// rendered before they replaced them: each output is decoded strictly into
// the upstream type, re-rendered the old way, and compared byte for byte.
func TestLocalTypesRenderAsUpstream(t *testing.T) {
	for _, version := range []string{"v1.31.0", "v1.33.1", "v1.35.4"} {
		tg, err := VersionToggles(version)
		if err != nil {
			t.Fatal(err)
		}
		got, err := MarshalConfig(Config(ConfigInputs{ClusterDNS: "10.100.0.10", ProviderID: ProviderID("us-west-2a", "i-0"), MaxPods: 29, CPUs: 2, Toggles: tg}))
		if err != nil {
			t.Fatal(err)
		}
		var up kubeletv1beta1.KubeletConfiguration
		strictJSON(t, got, &up)
		upGeneric, err := toGeneric(&up)
		if err != nil {
			t.Fatal(err)
		}
		upZero, err := toGeneric(&kubeletv1beta1.KubeletConfiguration{})
		if err != nil {
			t.Fatal(err)
		}
		want, err := marshalIndent(pruneZero(upGeneric, upZero))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: KubeletConfiguration differs from upstream's rendering:\n%s\nwant\n%s", version, got, want)
		}
	}

	for _, public := range []bool{false, true} {
		got, err := CredentialProviderConfig(public)
		if err != nil {
			t.Fatal(err)
		}
		var up kubeletv1.CredentialProviderConfig
		strictJSON(t, got, &up)
		want, err := json.MarshalIndent(up, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if want = append(want, '\n'); !bytes.Equal(got, want) {
			t.Errorf("CredentialProviderConfig differs from upstream's:\n%s\nwant\n%s", got, want)
		}
	}

	for _, in := range []KubeconfigInputs{
		{Server: "https://x.eks", Exec: BerthEKSToken.Exec("c1", "eu-west-1")},
		{Server: "https://x.eks", Exec: AWSCLI.Exec("c1", "eu-west-1")},
		{Server: "https://10.0.2.2:6443", BootstrapToken: "abcdef.0123456789abcdef"},
	} {
		got, err := Kubeconfig(in)
		if err != nil {
			t.Fatal(err)
		}
		var up clientcmdv1.Config
		if err := yaml.UnmarshalStrict(got, &up); err != nil {
			t.Fatalf("%v\n%s", err, got)
		}
		want, err := yaml.Marshal(up)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("kubeconfig differs from upstream's:\n%s\nwant\n%s", got, want)
		}
	}
}

func strictJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
}
