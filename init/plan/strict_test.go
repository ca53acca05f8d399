package plan

import (
	"bytes"
	"encoding/json"
	"testing"

	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/berth-node/berth/runtime/kubelet"
)

// TestFilesDecodeStrictly checks every rendered kubelet config, drop-in and
// kubeconfig against the upstream types with unknown fields refused, so a
// misspelt field can never reach kubelet unnoticed.
func TestFilesDecodeStrictly(t *testing.T) {
	for _, c := range goldenCases() {
		p, err := Build(c.inputs(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range p.Files {
			var err error
			switch f.Path {
			case kubelet.ConfigPath, kubelet.DropInPath:
				var kc kubeletv1beta1.KubeletConfiguration
				dec := json.NewDecoder(bytes.NewReader(f.Data))
				dec.DisallowUnknownFields()
				err = dec.Decode(&kc)
				if err == nil && (kc.Kind != "KubeletConfiguration" || kc.APIVersion != "kubelet.config.k8s.io/v1beta1") {
					t.Errorf("%s %s: type meta %q %q", c.name, f.Path, kc.APIVersion, kc.Kind)
				}
			case kubelet.KubeconfigPath, kubelet.BootstrapKubeconfig:
				var kc clientcmdv1.Config
				err = yaml.UnmarshalStrict(f.Data, &kc)
				if err == nil && (len(kc.Clusters) != 1 || kc.Clusters[0].Cluster.Server == "" || kc.CurrentContext != "kubelet") {
					t.Errorf("%s %s: incomplete kubeconfig %+v", c.name, f.Path, kc)
				}
			default:
				continue
			}
			if err != nil {
				t.Errorf("%s %s: %v", c.name, f.Path, err)
			}
		}
	}
}
