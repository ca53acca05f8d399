package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berth-node/berth/config/nodeconfig"
	"github.com/berth-node/berth/runtime/kubelet"
)

func caseByName(t testing.TB, name string) goldenCase {
	t.Helper()
	for _, c := range goldenCases() {
		if c.name == name {
			return c
		}
	}
	t.Fatalf("no case %s", name)
	return goldenCase{}
}

func fileData(p *Plan, path string) []byte {
	for _, f := range p.Files {
		if f.Path == path {
			return f.Data
		}
	}
	return nil
}

// TestDeterministic builds every case twice: the files and the
// description must be byte-identical.
func TestDeterministic(t *testing.T) {
	for _, c := range goldenCases() {
		// The second build reuses the first's inputs: Build must not have
		// changed them.
		in := c.inputs(t)
		a, err := Build(in)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Build(in)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Describe(), b.Describe()) || len(a.Files) != len(b.Files) {
			t.Fatalf("%s: plans differ", c.name)
		}
		for i := range a.Files {
			if a.Files[i].Path != b.Files[i].Path || !bytes.Equal(a.Files[i].Data, b.Files[i].Data) {
				t.Fatalf("%s: %s differs between builds", c.name, a.Files[i].Path)
			}
		}
		if !slices.IsSortedFunc(a.Files, func(x, y File) int { return strings.Compare(x.Path, y.Path) }) {
			t.Errorf("%s: files not sorted by path", c.name)
		}
	}
}

// TestKubeReservedUsesEffectiveMaxPods is the fix for nodeadm's bug: with
// kubelet.config.maxPods set, nodeadm still reserves memory for the table's
// max pods. berth reserves for the pods the node will really run.
func TestKubeReservedUsesEffectiveMaxPods(t *testing.T) {
	in := caseByName(t, "karpenter").inputs(t) // m5.large (29 by table), maxPods 110 in kubelet.config
	p, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	if p.MaxPods != 110 {
		t.Fatalf("MaxPods = %d, want the user's 110", p.MaxPods)
	}
	var cfg struct {
		MaxPods      int32             `json:"maxPods"`
		KubeReserved map[string]string `json:"kubeReserved"`
	}
	if err := json.Unmarshal(fileData(p, kubelet.ConfigPath), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.MaxPods != 110 || cfg.KubeReserved["memory"] != "1465Mi" { // 11*110+255, not nodeadm's 11*29+255=574
		t.Errorf("config.json maxPods %d kubeReserved %v", cfg.MaxPods, cfg.KubeReserved)
	}
}

func TestMaxPodsSources(t *testing.T) {
	for _, tc := range []struct {
		name, typ, expr, userMax string
		want                     int32
		warn                     string
	}{
		{name: "table", typ: "m5.large", want: 29},
		{name: "expression", typ: "m5.large", expr: "max_pods * 2", want: 58},
		{name: "user wins over expression", typ: "m5.large", expr: "max_pods * 2", userMax: "17", want: 17, warn: "maxPodsExpression ignored"},
		{name: "unknown type", typ: "nope.large", want: 110, warn: "not in the max-pods table"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := caseByName(t, "eksctl").inputs(t)
			in.Instance.InstanceType = tc.typ
			in.Config.Spec.Kubelet.MaxPodsExpression = tc.expr
			if tc.userMax != "" {
				in.Config.Spec.Kubelet.Config = nodeconfig.InlineDocument{"maxPods": json.RawMessage(tc.userMax)}
			}
			p, err := Build(in)
			if err != nil {
				t.Fatal(err)
			}
			if p.MaxPods != tc.want {
				t.Errorf("MaxPods = %d, want %d", p.MaxPods, tc.want)
			}
			w := strings.Join(p.Warnings, "\n")
			if (tc.warn == "") != (w == "") || !strings.Contains(w, tc.warn) {
				t.Errorf("warnings %q, want %q", w, tc.warn)
			}
		})
	}
}

func TestNodeNameAndIP(t *testing.T) {
	p, err := Build(caseByName(t, "instance-id-node-name").inputs(t))
	if err != nil {
		t.Fatal(err)
	}
	kubeletArgs := strings.Join(p.Services[1].Argv, " ")
	if p.NodeName != "i-0123456789abcdef0" || !strings.Contains(kubeletArgs, "--hostname-override=i-0123456789abcdef0") {
		t.Errorf("InstanceIdNodeName: node name %q, argv %s", p.NodeName, kubeletArgs)
	}
	p, err = Build(caseByName(t, "ipv6").inputs(t))
	if err != nil {
		t.Fatal(err)
	}
	if p.NodeIP != "2600:1f14:abc:de00:1234:5678:9abc:def0" || p.ClusterDNS != "fd12:3456:789a::a" {
		t.Errorf("IPv6: node IP %q, cluster DNS %q", p.NodeIP, p.ClusterDNS)
	}
}

func TestBootstrapToken(t *testing.T) {
	p, err := Build(caseByName(t, "bootstrap-token").inputs(t))
	if err != nil {
		t.Fatal(err)
	}
	if !p.BootstrapToken || fileData(p, kubelet.KubeconfigPath) != nil {
		t.Error("bootstrap join still writes the exec kubeconfig")
	}
	for _, f := range p.Files {
		if f.Path == kubelet.BootstrapKubeconfig && f.Mode != 0o600 {
			t.Errorf("bootstrap kubeconfig mode %o, want 0600", f.Mode)
		}
	}
	if !slices.Contains(p.Services[1].Argv, "--bootstrap-kubeconfig="+kubelet.BootstrapKubeconfig) {
		t.Errorf("argv lacks --bootstrap-kubeconfig: %q", p.Services[1].Argv)
	}
	if bytes.Contains(p.Describe(), []byte("abcdef.0123456789abcdef")) {
		t.Error("the plan description leaks the token")
	}
}

// A manifest without a kubelet version still gets nodeadm's ECR patterns,
// without ECR Public's, and says so.
func TestCredentialProviderWithoutKubeletVersion(t *testing.T) {
	in := caseByName(t, "eksctl").inputs(t)
	delete(in.Manifest.Components, "kubelet")
	p, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fileData(p, kubelet.CredentialProviderConfigPath)
	if !bytes.Contains(cfg, []byte(`"*.dkr.ecr.*.amazonaws.com"`)) || bytes.Contains(cfg, []byte("public.ecr.aws")) {
		t.Errorf("config.json:\n%s", cfg)
	}
	if !strings.Contains(strings.Join(p.Warnings, "\n"), "image manifest names no kubelet version") {
		t.Errorf("warnings %q", p.Warnings)
	}
}

func TestBuildErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Inputs)
		want   string
	}{
		{"no config", func(in *Inputs) { in.Config = nil }, "no NodeConfig"},
		{"no CA", func(in *Inputs) { in.Config.Spec.Cluster.CertificateAuthority = nil }, "spec.cluster.certificateAuthority"},
		{"bad cidr", func(in *Inputs) { in.Config.Spec.Cluster.CIDR = "10.0.0.0" }, "spec.cluster.cidr"},
		{"no hostname", func(in *Inputs) { in.Instance.LocalHostname = "" }, "local-hostname"},
		{"ipv6 without address", func(in *Inputs) { in.Config.Spec.Cluster.CIDR = "fd00::/108" }, "no IPv6 address"},
		{"no cpus", func(in *Inputs) { in.Host.CPUs = 0 }, "CPUs"},
		{"no region", func(in *Inputs) { in.Instance.Region = "" }, "region"},
		{"bad containerd version", func(in *Inputs) { in.Manifest.Components["containerd"] = "nightly" }, "containerd version"},
		{"bad kubelet version", func(in *Inputs) { in.Manifest.Components["kubelet"] = "nightly" }, `kubelet version "nightly" from the image manifest`},
		{"bad token", func(in *Inputs) {
			in.Config.Metadata = map[string]json.RawMessage{"annotations": json.RawMessage(`{"berth.dev/bootstrap-token":"secret-but-wrong"}`)}
		}, "bootstrap token of the form"},
		{"bad user maxPods", func(in *Inputs) {
			in.Config.Spec.Kubelet.Config = nodeconfig.InlineDocument{"maxPods": json.RawMessage(`"many"`)}
		}, "spec.kubelet.config.maxPods"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := caseByName(t, "eksctl").inputs(t)
			tc.change(&in)
			_, err := Build(in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "secret-but-wrong") {
				t.Error("error echoes the token")
			}
		})
	}
}

func TestWriteToRejectsEscapingPaths(t *testing.T) {
	root := t.TempDir()
	for _, bad := range []string{"etc/x", "/etc/../../x", "/etc//x"} {
		p := &Plan{Files: []File{{Path: bad, Mode: 0o644, Data: []byte("x")}}}
		if err := p.WriteTo(root); err == nil {
			t.Errorf("WriteTo accepted %q", bad)
		}
	}
	p := &Plan{Files: []File{{Path: "/etc/a/b", Mode: 0o600, Data: []byte("x")}}}
	if err := p.WriteTo(root); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(root, "etc/a/b"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("written file: %v %v", st, err)
	}
}

func TestParseMetadata(t *testing.T) {
	m, err := ParseMetadata([]byte(`{"instanceId":"i-1","instanceType":"m5.large","availabilityZone":"us-west-2a","region":"us-west-2","localIpv4":"10.0.0.1"}`))
	if err != nil || m.LocalIPv4 != "10.0.0.1" {
		t.Fatalf("%+v %v", m, err)
	}
	for in, want := range map[string]string{
		`{"instanceId":"i-1"}`: "instanceType is required",
		`{"instanceId":"i-1","instanceType":"m5.large","availabilityZone":"a","region":"r","typo":1}`: "unknown field",
		`[]`: "decoding",
		`{"instanceId":"i-1","instanceType":"m5.large","availabilityZone":"a","region":"r"} {}`: "more than one",
	} {
		if _, err := ParseMetadata([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseMetadata(%s) = %v, want %q", in, err, want)
		}
	}
}

func FuzzParseMetadata(f *testing.F) {
	for _, s := range []string{
		`{"instanceId":"i-1","instanceType":"m5.large","availabilityZone":"us-west-2a","region":"us-west-2"}`,
		`{"instanceId":"i-1","instanceType":"m5.large","availabilityZone":"a","region":"r","ipv6s":["::1"]}`,
		`{}`, `null`, `{"instanceId":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseMetadata(data)
		if err != nil {
			return
		}
		if m.InstanceID == "" || m.InstanceType == "" || m.AvailabilityZone == "" || m.Region == "" {
			t.Fatalf("accepted metadata without required fields: %+v", m)
		}
	})
}

// BenchmarkRender is the whole pure render, Build plus Describe, for every
// golden case (user-config is the richest: user kubelet and containerd
// config and a base runtime spec; maxpods-expression compiles CEL).
func BenchmarkRender(b *testing.B) {
	for _, c := range goldenCases() {
		b.Run(c.name, func(b *testing.B) {
			in := c.inputs(b)
			b.ReportAllocs()
			for b.Loop() {
				p, err := Build(in)
				if err != nil {
					b.Fatal(err)
				}
				if len(p.Describe()) == 0 {
					b.Fatal("empty description")
				}
			}
		})
	}
}

// BenchmarkRenderToDisk adds writing the files under a directory.
func BenchmarkRenderToDisk(b *testing.B) {
	in := caseByName(b, "eksctl").inputs(b)
	out := b.TempDir()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Render(in, out, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRenderedFilesBounded: a file over MaxRenderedFile, or files over
// MaxRendered in all, stop the plan with the path and the bound named.
func TestRenderedFilesBounded(t *testing.T) {
	p := &Plan{Files: []File{{Path: "/etc/containerd/config.toml", Data: make([]byte, MaxRenderedFile+1)}}}
	if err := p.checkRendered(); err == nil || !strings.Contains(err.Error(), "plan file /etc/containerd/config.toml: 1048577 bytes, over the 1048576-byte bound") {
		t.Errorf("one big file: %v", err)
	}
	p = &Plan{}
	for i := range 5 {
		p.Files = append(p.Files, File{Path: fmt.Sprintf("/etc/f%d", i), Data: make([]byte, MaxRenderedFile)})
	}
	if err := p.checkRendered(); err == nil || !strings.Contains(err.Error(), "plan files: 5242880 bytes in all, over the 4194304-byte bound (plan.MaxRendered)") {
		t.Errorf("many files: %v", err)
	}
	p.Files = p.Files[:4]
	if err := p.checkRendered(); err != nil {
		t.Errorf("at the bounds: %v", err)
	}
}
