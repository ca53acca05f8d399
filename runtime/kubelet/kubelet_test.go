package kubelet

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestCPUMillicoresToReserve(t *testing.T) {
	// EKS's published reservations: 6% of core 1, 1% of core 2, 0.5% of
	// cores 3-4, 0.25% above. 64 and more are Graviton's largest sizes
	// (m7g.16xlarge, m8g.48xlarge).
	for cpus, want := range map[int]int64{0: 0, 1: 60, 2: 70, 3: 75, 4: 80, 8: 90, 16: 110, 64: 230, 96: 310, 128: 390, 192: 550} {
		if got := CPUMillicoresToReserve(cpus); got != want {
			t.Errorf("%d CPUs: %dm, want %dm", cpus, got, want)
		}
	}
}

func TestKubeReserved(t *testing.T) {
	got := KubeReserved(2, 29)
	want := map[string]string{"cpu": "70m", "ephemeral-storage": "1Gi", "memory": "574Mi"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for pods, mib := range map[int32]int64{1: 266, 17: 442, 110: 1465, 737: 8362} {
		if got := MemoryMebibytesToReserve(pods); got != mib {
			t.Errorf("%d pods: %d MiB, want %d", pods, got, mib)
		}
	}
}

func TestFlagsOrder(t *testing.T) {
	got := Flags(FlagInputs{
		BootstrapKubeconfig: BootstrapKubeconfig,
		ConfigDir:           ConfigDir,
		NodeIP:              "10.0.0.1",
		HostnameOverride:    "ip-10-0-0-1.ec2.internal",
		Labels:              map[string]string{"b.example/z": "1", "a.example/y": "2"},
		User:                []string{"--v=4", `--node-labels="x=y,z=w" --register-with-taints=a=b:NoSchedule`},
	})
	want := []string{
		"--config=/etc/kubernetes/kubelet/config.json",
		"--config-dir=/etc/kubernetes/kubelet/config.json.d",
		"--bootstrap-kubeconfig=/var/lib/kubelet/bootstrap-kubeconfig",
		"--kubeconfig=/var/lib/kubelet/kubeconfig",
		"--container-runtime-endpoint=unix:///run/containerd/containerd.sock",
		"--runtime-cgroups=/runtime.slice/containerd",
		"--image-credential-provider-config=/etc/eks/image-credential-provider/config.json",
		"--image-credential-provider-bin-dir=/usr/libexec/berth/credential-provider",
		"--node-ip=10.0.0.1",
		"--hostname-override=ip-10-0-0-1.ec2.internal",
		"--cloud-provider=external",
		"--node-labels=a.example/y=2,b.example/z=1",
		"--v=4",
		"--node-labels=x=y,z=w",
		"--register-with-taints=a=b:NoSchedule",
	}
	if !slices.Equal(got, want) {
		t.Errorf("flags:\n got %q\nwant %q", got, want)
	}
	// Optional flags are left out, not given empty values.
	min := Flags(FlagInputs{})
	if !slices.Equal(min, []string{want[0], want[3], want[4], want[5], want[6], want[7], want[10]}) {
		t.Errorf("minimal flags %q", min)
	}
}

func TestSplitUserFlags(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want []string
	}{
		{[]string{"--v=2"}, []string{"--v=2"}},
		{[]string{`--node-labels="a=b,c=d"`}, []string{"--node-labels=a=b,c=d"}},
		{[]string{`--node-labels='a=b c'`}, []string{"--node-labels=a=b c"}},
		{[]string{"  --a=1   --b=2 "}, []string{"--a=1", "--b=2"}},
		{[]string{`--x="a \"q\" b"`}, []string{`--x=a "q" b`}},
		{[]string{`--x=a\ b`}, []string{"--x=a b"}},
		{[]string{`--x="unterminated`}, []string{"--x=unterminated"}},
		{[]string{"", " "}, nil},
		{[]string{`--x=''`}, []string{"--x="}},
	} {
		if got := SplitUserFlags(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("SplitUserFlags(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestMarshalConfigIsCleanAndDeterministic(t *testing.T) {
	in := ConfigInputs{ClusterDNS: "10.100.0.10", ProviderID: ProviderID("us-west-2a", "i-1"), MaxPods: 29, CPUs: 2}
	a, err := MarshalConfig(Config(in))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		b, err := MarshalConfig(Config(in))
		if err != nil || !bytes.Equal(a, b) {
			t.Fatalf("run %d differs (%v)", i, err)
		}
	}
	var m map[string]any
	if err := json.Unmarshal(a, &m); err != nil {
		t.Fatal(err)
	}
	// Zero-valued noise is gone; what berth chose, false included, stays.
	for _, k := range []string{"syncFrequency", "memorySwap", "crashLoopBackOff", "readOnlyPort"} {
		if _, ok := m[k]; ok {
			t.Errorf("%s written though zero", k)
		}
	}
	for k, want := range map[string]any{
		"cgroupDriver": "cgroupfs", "kubeletCgroups": KubeletCgroup, "kubeReservedCgroup": RuntimeCgroup,
		"systemReservedCgroup": SystemCgroup, "serializeImagePulls": false, "maxPods": 29.0,
		"providerID": "aws:///us-west-2a/i-1", "containerRuntimeEndpoint": ContainerRuntimeURL,
	} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v", k, m[k], want)
		}
	}
	if m["logging"].(map[string]any)["verbosity"] != 2.0 {
		t.Errorf("logging = %v", m["logging"])
	}
}

func TestDropIn(t *testing.T) {
	out, err := DropIn(map[string]json.RawMessage{"maxPods": json.RawMessage("110"), "kubeReserved": json.RawMessage(`{"memory":"1Gi","cpu":"1"}`)})
	if err != nil {
		t.Fatal(err)
	}
	want := `{
    "apiVersion": "kubelet.config.k8s.io/v1beta1",
    "kind": "KubeletConfiguration",
    "kubeReserved": {
        "cpu": "1",
        "memory": "1Gi"
    },
    "maxPods": 110
}
`
	if string(out) != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
	// The user's own apiVersion is kept.
	out, err = DropIn(map[string]json.RawMessage{"apiVersion": json.RawMessage(`"kubelet.config.k8s.io/v1"`)})
	if err != nil || !strings.Contains(string(out), `"kubelet.config.k8s.io/v1"`) {
		t.Errorf("user apiVersion lost: %s %v", out, err)
	}
}

func TestKubeconfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      KubeconfigInputs
		want    []string
		wantErr string
	}{
		{name: "aws cli", in: KubeconfigInputs{Server: "https://x.eks", Exec: AWSCLI.Exec("c1", "eu-west-1")},
			want: []string{"command: aws", "- get-token", "- c1", "- eu-west-1", "certificate-authority: /etc/kubernetes/pki/ca.crt", "server: https://x.eks"}},
		{name: "berth signer", in: KubeconfigInputs{Server: "https://x.eks", Exec: BerthEKSToken.Exec("c1", "eu-west-1")},
			want: []string{"command: /sbin/berth", "- eks-token", "- --cluster-name"}},
		{name: "bootstrap token", in: KubeconfigInputs{Server: "https://10.0.2.2:6443", BootstrapToken: "abcdef.0123456789abcdef"},
			want: []string{"token: abcdef.0123456789abcdef"}},
		{name: "no server", in: KubeconfigInputs{BootstrapToken: "abcdef.0123456789abcdef"}, wantErr: "apiServerEndpoint"},
		{name: "no credentials", in: KubeconfigInputs{Server: "https://x"}, wantErr: "no credentials"},
		{name: "both", in: KubeconfigInputs{Server: "https://x", Exec: AWSCLI.Exec("c", "r"), BootstrapToken: "t"}, wantErr: "both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Kubeconfig(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("kubeconfig lacks %q:\n%s", w, out)
				}
			}
			// It must be a kubeconfig clientcmd can read back.
			var back map[string]any
			if err := yaml.Unmarshal(out, &back); err != nil || back["current-context"] != "kubelet" {
				t.Errorf("not a kubeconfig: %v %v", err, back)
			}
		})
	}
}

func TestLabelValue(t *testing.T) {
	for in, want := range map[string]string{
		"v0.1.0":                "v0.1.0",
		"v0.1.0+dirty":          "v0.1.0_dirty",
		"-x-":                   "x",
		"":                      "",
		strings.Repeat("a", 70): strings.Repeat("a", 63),
		"(devel)":               "devel",
	} {
		if got := LabelValue(in); got != want {
			t.Errorf("LabelValue(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzSplitUserFlags(f *testing.F) {
	for _, s := range []string{`--node-labels="a=b,c=d"`, `--a='x y' --b=\"`, "--v=2", `"`, `\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		words := SplitUserFlags([]string{s})
		total := 0
		for _, w := range words {
			total += len(w)
		}
		// Splitting only ever removes characters.
		if total > len(s) {
			t.Fatalf("%q split into %q: longer than the input", s, words)
		}
		// A word with no quotes, backslashes or spaces is its own split.
		if !strings.ContainsAny(s, "'\"\\ \t\r\n") && s != "" && (len(words) != 1 || words[0] != s) {
			t.Fatalf("plain %q split into %q", s, words)
		}
	})
}
