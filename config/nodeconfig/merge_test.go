package nodeconfig

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func mustParse(t *testing.T, spec string) *NodeConfig {
	t.Helper()
	cfg, ps, err := Parse("t", []byte("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n"+spec))
	if err != nil || len(ps) > 0 {
		t.Fatalf("Parse(%q): %v %v", spec, err, ps)
	}
	return cfg
}

func mustMerge(t *testing.T, docs ...*NodeConfig) *NodeConfig {
	t.Helper()
	m, err := Merge(docs...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func rawJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestMergeLaterWinsEmptyKeeps: scalars from later documents win; empty
// ones keep the earlier value.
func TestMergeLaterWinsEmptyKeeps(t *testing.T) {
	a := mustParse(t, "  cluster:\n    name: a\n    cidr: 10.0.0.0/16\n    enableOutpost: true\n    id: x\n  kubelet:\n    maxPodsExpression: max_pods\n  instance:\n    localStorage:\n      strategy: RAID0\n      mountPath: /a\n")
	b := mustParse(t, "  cluster:\n    name: b\n    enableOutpost: false\n  instance:\n    localStorage:\n      mountPath: /b\n")
	m := mustMerge(t, a, b)
	c := m.Spec.Cluster
	if c.Name != "b" || c.CIDR != "10.0.0.0/16" || c.ID != "x" {
		t.Errorf("cluster = %+v, want name b (later wins), cidr and id kept", c)
	}
	if c.EnableOutpost == nil || *c.EnableOutpost {
		t.Errorf("enableOutpost = %v, want an explicit false from the later document", c.EnableOutpost)
	}
	if ls := m.Spec.Instance.LocalStorage; ls.Strategy != LocalStorageRAID0 || ls.MountPath != "/b" {
		t.Errorf("localStorage = %+v", ls)
	}
	if m.Spec.Kubelet.MaxPodsExpression != "max_pods" {
		t.Errorf("maxPodsExpression = %q, want kept", m.Spec.Kubelet.MaxPodsExpression)
	}
	if *a.Spec.Cluster.EnableOutpost != true || a.Spec.Cluster.Name != "a" {
		t.Error("Merge modified its input")
	}
}

// TestMergeSlicesReplaced: lists are replaced whole, never concatenated,
// except kubelet flags.
func TestMergeSlicesReplaced(t *testing.T) {
	a := mustParse(t, "  instance:\n    localStorage:\n      disabledMounts: [Containerd, PodLogs]\n    network:\n      nameservers: [1.1.1.1, 8.8.8.8]\n      domains: [a]\n")
	b := mustParse(t, "  instance:\n    localStorage:\n      disabledMounts: [PodLogs]\n    network:\n      nameservers: [9.9.9.9]\n")
	m := mustMerge(t, a, b)
	if got := m.Spec.Instance.LocalStorage.DisabledMounts; !reflect.DeepEqual(got, []DisabledMount{"PodLogs"}) {
		t.Errorf("disabledMounts = %v", got)
	}
	if got := m.Spec.Instance.Network; !reflect.DeepEqual(got.Nameservers, []string{"9.9.9.9"}) || !reflect.DeepEqual(got.Domains, []string{"a"}) {
		t.Errorf("network = %+v", got)
	}
}

// TestMergeFlagsAppend: kubelet.flags append in document order.
func TestMergeFlagsAppend(t *testing.T) {
	a := mustParse(t, "  kubelet:\n    flags: [--v=2, --node-labels=a=1]\n")
	b := mustParse(t, "  cluster:\n    name: x\n")
	c := mustParse(t, "  kubelet:\n    flags: [--v=4]\n")
	m := mustMerge(t, a, b, c)
	if want := []string{"--v=2", "--node-labels=a=1", "--v=4"}; !reflect.DeepEqual(m.Spec.Kubelet.Flags, want) {
		t.Errorf("flags = %q, want %q", m.Spec.Kubelet.Flags, want)
	}
	if len(a.Spec.Kubelet.Flags) != 2 {
		t.Error("Merge modified its input's flags")
	}
}

// TestMergeMapsPerKey: environment and featureGates merge key by key, and a
// later false turns a gate off.
func TestMergeMapsPerKey(t *testing.T) {
	a := mustParse(t, "  instance:\n    environment:\n      A: \"1\"\n      B: \"1\"\n  featureGates:\n    InstanceIdNodeName: true\n    FastImagePull: true\n")
	b := mustParse(t, "  instance:\n    environment:\n      B: \"2\"\n      C: \"2\"\n  featureGates:\n    FastImagePull: false\n")
	m := mustMerge(t, a, b)
	if want := map[string]string{"A": "1", "B": "2", "C": "2"}; !reflect.DeepEqual(m.Spec.Instance.Environment, want) {
		t.Errorf("environment = %v, want %v", m.Spec.Instance.Environment, want)
	}
	if want := map[Feature]bool{InstanceIdNodeName: true, FastImagePull: false}; !reflect.DeepEqual(m.Spec.FeatureGates, want) {
		t.Errorf("featureGates = %v, want %v", m.Spec.FeatureGates, want)
	}
	if !m.Spec.FeatureEnabled(InstanceIdNodeName) || m.Spec.FeatureEnabled(FastImagePull) || m.Spec.FeatureEnabled(OSManagedNoManageENIs) {
		t.Error("FeatureEnabled disagrees with the merged gates")
	}
	if a.Spec.Instance.Environment["B"] != "1" {
		t.Error("Merge modified its input's map")
	}
}

// TestMergeKubeletConfigDeep: kubelet.config deep-merges as JSON: nested
// objects merge, lists and scalars are replaced, null does not override.
func TestMergeKubeletConfigDeep(t *testing.T) {
	a := mustParse(t, "  kubelet:\n    config:\n      maxPods: 10\n      clusterDNS: [10.0.0.10, 10.0.0.11]\n      evictionHard:\n        memory.available: 100Mi\n        nodefs.available: 10%\n      registryPullQPS: 5\n")
	b := mustParse(t, "  kubelet:\n    config:\n      maxPods: 20\n      clusterDNS: [10.0.0.12]\n      evictionHard:\n        memory.available: 200Mi\n      registryPullQPS: null\n      serializeImagePulls: false\n")
	m := mustMerge(t, a, b)
	got := rawJSON(t, m.Spec.Kubelet.Config)
	want := `{"clusterDNS":["10.0.0.12"],"evictionHard":{"memory.available":"200Mi","nodefs.available":"10%"},"maxPods":20,"registryPullQPS":5,"serializeImagePulls":false}`
	if got != want {
		t.Errorf("kubelet.config =\n %s\nwant\n %s", got, want)
	}
}

// TestMergeBaseRuntimeSpecDeep: baseRuntimeSpec deep-merges the same way.
func TestMergeBaseRuntimeSpecDeep(t *testing.T) {
	a := mustParse(t, "  containerd:\n    baseRuntimeSpec:\n      process:\n        user: {uid: 0}\n        rlimits: [{type: RLIMIT_NOFILE, soft: 1, hard: 1}]\n      linux: {sysctl: {a: \"1\"}}\n")
	b := mustParse(t, "  containerd:\n    baseRuntimeSpec:\n      process:\n        rlimits: [{type: RLIMIT_NOFILE, soft: 2, hard: 2}]\n      linux: {sysctl: {b: \"2\"}}\n")
	m := mustMerge(t, a, b)
	got := rawJSON(t, m.Spec.Containerd.BaseRuntimeSpec)
	want := `{"linux":{"sysctl":{"a":"1","b":"2"}},"process":{"rlimits":[{"hard":2,"soft":2,"type":"RLIMIT_NOFILE"}],"user":{"uid":0}}}`
	if got != want {
		t.Errorf("baseRuntimeSpec =\n %s\nwant\n %s", got, want)
	}
}

// TestMergeContainerdTOML: containerd.config deep-merges as TOML tables;
// a single value is kept verbatim; output is deterministic.
func TestMergeContainerdTOML(t *testing.T) {
	a := mustParse(t, "  containerd:\n    config: |\n      version = 2\n      [plugins.\"io.containerd.grpc.v1.cri\".containerd]\n      snapshotter = \"overlayfs\"\n      discard_unpacked_layers = true\n      [metrics]\n      address = \"\"\n")
	only := mustMerge(t, a)
	if only.Spec.Containerd.Config != a.Spec.Containerd.Config {
		t.Errorf("single containerd.config was rewritten:\n%s", only.Spec.Containerd.Config)
	}
	b := mustParse(t, "  containerd:\n    config: |\n      [plugins.\"io.containerd.grpc.v1.cri\".containerd]\n      snapshotter = \"soci\"\n      [plugins.\"io.containerd.grpc.v1.cri\".registry]\n      config_path = \"/etc/containerd/certs.d\"\n      [metrics]\n      grpc_histogram = [1, 2]\n")
	m := mustMerge(t, a, b)
	want := `version = 2

[metrics]
  address = ''
  grpc_histogram = [1, 2]

[plugins]
  [plugins.'io.containerd.grpc.v1.cri']
    [plugins.'io.containerd.grpc.v1.cri'.containerd]
      discard_unpacked_layers = true
      snapshotter = 'soci'

    [plugins.'io.containerd.grpc.v1.cri'.registry]
      config_path = '/etc/containerd/certs.d'
`
	if got := m.Spec.Containerd.Config; got != want {
		t.Errorf("merged TOML =\n%s\nwant\n%s", got, want)
	}
	for range 20 {
		if again := mustMerge(t, a, b); again.Spec.Containerd.Config != want {
			t.Fatal("merged TOML is not deterministic")
		}
	}
	bad := &NodeConfig{Spec: NodeConfigSpec{Containerd: ContainerdOptions{Config: "[x"}}}
	if _, err := Merge(a, bad); err == nil || !strings.Contains(err.Error(), "merging document 2: spec.containerd.config: invalid TOML") {
		t.Errorf("Merge with bad TOML: %v", err)
	}
}

// TestMergeTOMLTypes: a table replaced by a scalar, and arrays of tables,
// follow "later wins" without merging element-wise.
func TestMergeTOMLTypes(t *testing.T) {
	got, err := MergeTOML("a = {x = 1}\n[[b]]\nn = 1\n[[b]]\nn = 2\n", "a = 3\n[[b]]\nn = 9\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "a = 3\n\n[[b]]\n  n = 9\n"
	if got != want {
		t.Errorf("MergeTOML = %q, want %q", got, want)
	}
}

// TestMergeCertificateAuthorityAndMeta: bytes and type meta follow the
// later-wins rule; nil documents are ignored.
func TestMergeCertificateAuthorityAndMeta(t *testing.T) {
	a := &NodeConfig{APIVersion: APIVersion, Kind: Kind, Spec: NodeConfigSpec{Cluster: ClusterDetails{CertificateAuthority: []byte("A")}}}
	b := &NodeConfig{Spec: NodeConfigSpec{Cluster: ClusterDetails{CertificateAuthority: []byte("B")}}}
	m := mustMerge(t, a, nil, b, &NodeConfig{})
	if string(m.Spec.Cluster.CertificateAuthority) != "B" || m.APIVersion != APIVersion || m.Kind != Kind {
		t.Errorf("merged = %+v", m)
	}
	b.Spec.Cluster.CertificateAuthority[0] = 'X'
	if string(m.Spec.Cluster.CertificateAuthority) != "B" {
		t.Error("merged CA aliases its input")
	}
	empty := mustMerge(t)
	if !reflect.DeepEqual(empty, &NodeConfig{}) {
		t.Errorf("Merge() = %+v, want empty", empty)
	}
}
