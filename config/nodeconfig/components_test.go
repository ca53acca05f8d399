package nodeconfig

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/berth-node/berth/config/accepts"
)

// testAccepts is a small slice of what make accepts generates for kubelet
// 1.35 and containerd 2.2 (the oracle test uses the whole of it).
func testAccepts() *accepts.Accepts {
	obj := func(f map[string]*accepts.Type) *accepts.Type {
		return &accepts.Type{Kind: accepts.KindObject, Fields: f}
	}
	kind := func(k string) *accepts.Type { return &accepts.Type{Kind: k} }
	strMap := &accepts.Type{Kind: accepts.KindMap, Elem: kind(accepts.KindString)}
	return &accepts.Accepts{
		Kubelet: &accepts.Kubelet{
			Version: "v1.35.4",
			Flags: map[string]accepts.Flag{
				"v":                          {Type: "Level", Value: "v1.verbosityLevelPflag", Shorthand: "v"},
				"max-pods":                   {Type: "int32", Value: "*pflag.int32Value"},
				"fail-swap-on":               {Type: "bool", Value: "*pflag.boolValue", NoOptDefVal: "true"},
				"feature-gates":              {Type: "mapStringBool", Value: "*flag.MapStringBool"},
				"eviction-hard":              {Type: "mapStringString", Value: "*flag.LangleSeparatedMapStringString"},
				"kube-reserved":              {Type: "mapStringString", Value: "*flag.MapStringString"},
				"node-labels":                {Type: "mapStringString", Value: "*flag.ConfigurationMap"},
				"kubeconfig":                 {Type: "string", Value: "*pflag.stringValue"},
				"sync-frequency":             {Type: "duration", Value: "*pflag.durationValue"},
				"help":                       {Type: "bool", Value: "*pflag.boolValue", Shorthand: "h", NoOptDefVal: "true"},
				"container-runtime-endpoint": {Type: "string", Value: "*pflag.stringValue"},
			},
			FeatureGates: map[string]accepts.Gate{
				"RotateKubeletServerCertificate": {Default: true},
				"Locked":                         {Default: true, LockToDefault: true},
			},
			ConfigAPIVersions: []string{"kubelet.config.k8s.io/v1beta1"},
			Config: obj(map[string]*accepts.Type{
				"apiVersion": kind(accepts.KindString), "kind": kind(accepts.KindString),
				"maxPods": kind("int32"), "cgroupDriver": kind(accepts.KindString),
				"featureGates":        {Kind: accepts.KindMap, Elem: kind(accepts.KindBool)},
				"tlsCipherSuites":     {Kind: accepts.KindList, Elem: kind(accepts.KindString)},
				"shutdownGracePeriod": kind(accepts.KindDuration),
				"evictionHard":        strMap, "kubeReserved": strMap,
				"logging": obj(map[string]*accepts.Type{"verbosity": kind("uint32")}),
			}),
			TLSCipherSuites:     []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"},
			TLSVersions:         []string{"VersionTLS12", "VersionTLS13"},
			EvictionSignals:     []string{"memory.available", "nodefs.available"},
			ReservableResources: []string{"cpu", "ephemeral-storage", "memory", "pid"},
		},
		Containerd: &accepts.Containerd{
			Version:        "v2.2.3",
			ConfigVersions: []int{1, 2, 3},
			Config: obj(map[string]*accepts.Type{
				"version": kind("int64"), "oom_score": kind("int64"), "root": kind(accepts.KindString),
				"plugins": obj(map[string]*accepts.Type{
					"*": kind(accepts.KindAny),
					"io.containerd.cri.v1.runtime": obj(map[string]*accepts.Type{
						"enable_cdi":                  kind(accepts.KindBool),
						"max_container_log_line_size": kind("int64"),
						"cni": obj(map[string]*accepts.Type{
							"bin_dirs": {Kind: accepts.KindList, Elem: kind(accepts.KindString)},
							"conf_dir": kind(accepts.KindString),
						}),
						"containerd": obj(map[string]*accepts.Type{
							"default_runtime_name": kind(accepts.KindString),
							"runtimes": {Kind: accepts.KindMap, Elem: obj(map[string]*accepts.Type{
								"runtime_type": kind(accepts.KindString),
								"sandboxer":    kind(accepts.KindString),
								"options":      {Kind: accepts.KindMap, Elem: kind(accepts.KindAny)},
							})},
						}),
					}),
					"io.containerd.cri.v1.images": obj(map[string]*accepts.Type{
						"discard_unpacked_layers":  kind(accepts.KindBool),
						"max_concurrent_downloads": kind("int64"),
						"pinned_images":            strMap,
						"registry":                 obj(map[string]*accepts.Type{"config_path": kind(accepts.KindString)}),
					}),
					"io.containerd.grpc.v1.cri": obj(map[string]*accepts.Type{
						"stream_server_port": kind(accepts.KindString),
					}),
				}),
			}),
			RuntimeOptions: map[string]*accepts.Type{
				"io.containerd.runc.v2": obj(map[string]*accepts.Type{
					"SystemdCgroup": kind(accepts.KindBool), "BinaryName": kind(accepts.KindString), "IoUid": kind("uint32"),
				}),
			},
			RuntimeSpec: obj(map[string]*accepts.Type{
				"ociVersion": kind(accepts.KindString),
				"process": obj(map[string]*accepts.Type{
					"rlimits": {Kind: accepts.KindList, Elem: obj(map[string]*accepts.Type{"type": kind(accepts.KindString), "soft": kind("uint64")})},
				}),
			}),
		},
	}
}

// TestComponentProblems: each check against what the components accept,
// by the message it gives, and the same input without the data passes
// those checks (only the version-independent rules run).
func TestComponentProblems(t *testing.T) {
	for _, tc := range []struct {
		name, spec string
		want       string // "" for no error
	}{
		{"flag ok", `kubelet: {flags: ["--v=2", "-v", "3", "--max-pods", "30", "--fail-swap-on", "--node-labels=a=b"]}`, ""},
		{"flag unknown", `kubelet: {flags: [--no-such=1]}`, "has no flag --no-such"},
		{"flag underscore", `kubelet: {flags: [--max_pods=3]}`, ""},
		{"flag short unknown", `kubelet: {flags: [-x]}`, "kubelet has no flag -x"},
		{"flag int", `kubelet: {flags: [--max-pods=many]}`, "--max-pods: strconv.ParseInt"},
		{"flag level", `kubelet: {flags: [--v=two]}`, "is not a log level"},
		{"flag duration", `kubelet: {flags: [--sync-frequency=often]}`, "--sync-frequency: time: invalid duration"},
		{"flag no value", `kubelet: {flags: [--max-pods]}`, "--max-pods needs a value"},
		{"flag positional", `kubelet: {flags: [run]}`, `"run" is not a flag`},
		{"flag help", `kubelet: {flags: [-h]}`, "--help makes kubelet print and exit"},
		{"flag gate unknown", `kubelet: {flags: ["--feature-gates=Nope=true"]}`, `no feature gate "Nope"`},
		{"flag gate locked", `kubelet: {flags: ["--feature-gates=Locked=false"]}`, "locked to true"},
		{"flag eviction", `kubelet: {flags: ["--eviction-hard=memory.available=1Gi"]}`, `want KEY<VALUE`},
		{"flag eviction signal", `kubelet: {flags: ["--eviction-hard=memory.nope<1Gi"]}`, `no eviction signal "memory.nope"`},
		{"flag reserved", `kubelet: {flags: ["--kube-reserved=gpu=1"]}`, `reserves only cpu`},
		{"owned flag value not read as a word", `kubelet: {flags: [--container-runtime-endpoint, unix:///x.sock]}`, "is set by berth"},
		{"config ok", `kubelet: {config: {maxPods: 30, shutdownGracePeriod: 30s, featureGates: {RotateKubeletServerCertificate: true}, logging: {verbosity: 3}}}`, ""},
		{"config api", `kubelet: {config: {apiVersion: kubelet.config.k8s.io/v2}}`, "has no kubelet config API"},
		{"config type", `kubelet: {config: {logging: {verbosity: high}}}`, "spec.kubelet.config.logging.verbosity: want an integer"},
		{"config duration", `kubelet: {config: {shutdownGracePeriod: soon}}`, "is not a duration"},
		{"config range", `kubelet: {config: {maxPods: 99999999999}}`, "spec.kubelet.config.maxPods"},
		{"config gate", `kubelet: {config: {featureGates: {Nope: true}}}`, `no feature gate "Nope"`},
		{"config gate yes", `kubelet: {config: {featureGates: {RotateKubeletServerCertificate: "yes"}}}`, "want true or false"},
		{"config cipher", `kubelet: {config: {tlsCipherSuites: [TLS_NOPE]}}`, `does not support cipher suite "TLS_NOPE"`},
		{"config signal", `kubelet: {config: {evictionHard: {memory.nope: 1Gi}}}`, `no eviction signal "memory.nope"`},
		{"config resource", `kubelet: {config: {kubeReserved: {gpu: "1"}}}`, `reserves only cpu`},
		{"containerd ok", `containerd: {config: "version = 3\n[plugins.'io.containerd.cri.v1.runtime']\nenable_cdi = true\n"}`, ""},
		{"containerd type", `containerd: {config: "oom_score = 'high'\n"}`, "spec.containerd.config: oom_score: want an integer, got a string"},
		{"containerd plugin type", `containerd: {config: "[plugins.'io.containerd.cri.v1.runtime']\nenable_cdi = 'yes'\n"}`, `[plugins."io.containerd.cri.v1.runtime"] enable_cdi: want true or false`},
		{"containerd key case", `containerd: {config: "OOM_Score = 'high'\n"}`, "spec.containerd.config: OOM_Score: want an integer"},
		{"v2 ok", `containerd: {config: "version = 2\n[plugins.'io.containerd.grpc.v1.cri']\nenable_cdi = true\nsandbox_image = 'x'\nstream_server_port = '0'\nmax_concurrent_downloads = 3\n[plugins.'io.containerd.grpc.v1.cri'.cni]\nbin_dir = '/opt/cni/bin'\n[plugins.'io.containerd.grpc.v1.cri'.containerd]\ndiscard_unpacked_layers = true\n[plugins.'io.containerd.grpc.v1.cri'.containerd.runtimes.runc]\nsandbox_mode = 'podsandbox'\n[plugins.'io.containerd.grpc.v1.cri'.containerd.runtimes.runc.options]\nSystemdCgroup = false\n"}`, ""},
		{"v2 runtime key", `containerd: {config: "version = 2\n[plugins.'io.containerd.grpc.v1.cri']\nmax_container_log_line_size = 'big'\n"}`, `spec.containerd.config: [plugins."io.containerd.grpc.v1.cri"] max_container_log_line_size: want an integer, got a string (containerd v2.2.3 refuses it)`},
		{"v2 images key", `containerd: {config: "version = 2\n[plugins.'io.containerd.grpc.v1.cri']\nmax_concurrent_downloads = 'many'\n"}`, `[plugins."io.containerd.grpc.v1.cri"] max_concurrent_downloads: want an integer`},
		{"v2 sandbox image", `containerd: {config: "version = 2\n[plugins.'io.containerd.grpc.v1.cri']\nsandbox_image = 5\n"}`, `[plugins."io.containerd.grpc.v1.cri"] sandbox_image: want a string`},
		{"v2 stream key stays", `containerd: {config: "version = 2\n[plugins.'io.containerd.grpc.v1.cri']\nstream_server_port = 10010\n"}`, `[plugins."io.containerd.grpc.v1.cri"] stream_server_port: want a string`},
		{"v2 containerd images key", `containerd: {config: "version = 2\n[plugins.'io.containerd.grpc.v1.cri'.containerd]\ndiscard_unpacked_layers = 'no'\n"}`, `[plugins."io.containerd.grpc.v1.cri".containerd] discard_unpacked_layers: want true or false`},
		{"v2 containerd runtime key", `containerd: {config: "version = 2\n[plugins.'io.containerd.grpc.v1.cri'.containerd]\ndefault_runtime_name = 1\n"}`, `[plugins."io.containerd.grpc.v1.cri".containerd] default_runtime_name: want a string`},
		{"v2 cni bin_dir", `containerd: {config: "version = 2\n[plugins.'io.containerd.grpc.v1.cri'.cni]\nbin_dir = ['/opt']\n"}`, `[plugins."io.containerd.grpc.v1.cri".cni] bin_dir: want a string, got an array`},
		{"v2 sandbox_mode", `containerd: {config: "version = 2\n[plugins.'io.containerd.grpc.v1.cri'.containerd.runtimes.runc]\nsandbox_mode = 1\n"}`, `[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc] sandbox_mode: want a string`},
		{"v2 runtimes not a table", `containerd: {config: "version = 2\n[plugins.'io.containerd.grpc.v1.cri'.containerd]\nruntimes = 5\n"}`, `[plugins."io.containerd.grpc.v1.cri".containerd] runtimes: want a table, got an integer`},
		{"v2 plugin not a table", `containerd: {config: "version = 2\n[plugins]\n'io.containerd.grpc.v1.cri' = 5\n"}`, `[plugins] "io.containerd.grpc.v1.cri": want a table`},
		{"v3 keys in a v2 document", `containerd: {config: "version = 2\n[plugins.'io.containerd.cri.v1.runtime']\nenable_cdi = 'yes'\n"}`, `[plugins."io.containerd.cri.v1.runtime"] enable_cdi: want true or false`},
		{"runc options", `containerd: {config: "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]\nSystemdCgroup = 'no'\n"}`, `[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options] SystemdCgroup: want true or false, got a string (containerd v2.2.3 decodes runtime runc's options (io.containerd.runc.v2) when it starts a container, and would fail every pod on it)`},
		{"runc options case", `containerd: {config: "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]\nsystemdcgroup = 'no'\n"}`, `options] systemdcgroup: want true or false`},
		{"runc options range", `containerd: {config: "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]\nIoUid = -1\n"}`, `options] IoUid: -1 is out of range for an uint32`},
		{"runc options ok", `containerd: {config: "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]\nSystemdCgroup = false\nBinaryName = '/usr/bin/runc'\nNoSuchOption = 1\n"}`, ""},
		{"runc options v2", `containerd: {config: "version = 2\n[plugins.'io.containerd.grpc.v1.cri'.containerd.runtimes.runc.options]\nBinaryName = 5\n"}`, `[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options] BinaryName: want a string, got an integer (containerd v2.2.3 decodes runtime runc's options`},
		{"runc-typed runtime", `containerd: {config: "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia]\nruntime_type = 'io.containerd.runc.v2'\n[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia.options]\nBinaryName = 5\n"}`, `runtimes.nvidia.options] BinaryName: want a string`},
		{"other runtime's options", `containerd: {config: "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.kata]\nruntime_type = 'io.containerd.kata.v2'\n[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.kata.options]\nSystemdCgroup = 'no'\n"}`, ""},
		{"runc retyped", `containerd: {config: "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]\nruntime_type = 'io.containerd.kata.v2'\n[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]\nSystemdCgroup = 'no'\n"}`, ""},
		{"base spec", `containerd: {baseRuntimeSpec: {process: {rlimits: many}}}`, "spec.containerd.baseRuntimeSpec.process.rlimits: want a list"},
		{"base spec deep", `containerd: {baseRuntimeSpec: {process: {rlimits: [{type: RLIMIT_NOFILE, soft: -1}]}}}`, "rlimits[0].soft: -1 is out of range for an uint64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, ps, err := Parse("test", []byte("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  "+tc.spec+"\n"))
			if err != nil || HasErrors(ps) {
				t.Fatalf("parse: %v %v", err, ps)
			}
			got := ValidateDocumentWith("test", cfg, Options{Accepts: testAccepts()})
			var errs []string
			for _, p := range got {
				if p.Severity == SeverityError {
					errs = append(errs, p.String())
				}
			}
			switch {
			case tc.want == "" && len(errs) > 0:
				t.Errorf("want no error, got %q", errs)
			case tc.want != "" && !strings.Contains(strings.Join(errs, "\n"), tc.want):
				t.Errorf("want an error with %q, got %q", tc.want, errs)
			}
		})
	}
}

func TestNotChecked(t *testing.T) {
	if got := (Options{Accepts: testAccepts()}).NotChecked(); got != "" {
		t.Errorf("with both halves: %q", got)
	}
	half := testAccepts()
	half.Containerd = nil
	if got := (Options{Accepts: half}).NotChecked(); !strings.Contains(got, "containerd config versions") || strings.Contains(got, "kubelet flag") {
		t.Errorf("without containerd's half: %q", got)
	}
	if got := (Options{}).NotChecked(); !strings.Contains(got, "kubelet flag names") {
		t.Errorf("without a manifest: %q", got)
	}
}

// TestKubeletRules: kubelet's own rules hold without the manifest.
func TestKubeletRules(t *testing.T) {
	for cfg, want := range map[string]string{
		`{"kubeReserved":{"cpu":"lots"}}`:                                             "kubeReserved.cpu: quantity \"lots\"",
		`{"systemReserved":{"memory":"-1Gi"}}`:                                        "cannot be negative",
		`{"evictionHard":{"nodefs.available":"150%"}}`:                                "at most 100%",
		`{"evictionHard":{"memory.available":"0"}}`:                                   "must be positive",
		`{"evictionSoft":{"memory.available":"1Gi"}}`:                                 "wants a grace period",
		`{"imageGCHighThresholdPercent":60}`:                                          "must be less than",
		`{"containerLogMaxFiles":1}`:                                                  "greater than 1",
		`{"serializeImagePulls":true,"maxParallelImagePulls":5}`:                      "must be 1 while serializeImagePulls",
		`{"topologyManagerPolicy":"bogus"}`:                                           "unknown policy",
		`{"logging":{"format":"xml"}}`:                                                "unknown log format",
		`{"address":"not-an-ip"}`:                                                     "not an IP address",
		`{"kind":"NodeConfig"}`:                                                       "want KubeletConfiguration",
		`{"kubeReserved":{"cpu":"100m"},"evictionHard":{"memory.available":"100Mi"}}`: "",
	} {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(cfg), &m); err != nil {
			t.Fatal(err)
		}
		ps := &problems{source: "test"}
		kubeletRules(ps, m)
		got := ""
		for _, p := range ps.list {
			got += p.String() + "\n"
		}
		if want == "" && got != "" || want != "" && !strings.Contains(got, want) {
			t.Errorf("%s: want %q, got %q", cfg, want, got)
		}
	}
}
