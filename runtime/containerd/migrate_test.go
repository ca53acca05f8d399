package containerd

import (
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"

	"github.com/berth-node/berth/internal/ctrdv2"
)

// Each case is containerd 2.x's own migration of a version 2 document
// (what `containerd config migrate` prints for it, defaults aside).
func TestMigrateV2(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"no plugins", "version = 2\n[debug]\nlevel = 'debug'\n", "version = 3\n[debug]\nlevel = 'debug'\n"},
		{"cri split", `version = 2
[plugins."io.containerd.grpc.v1.cri"]
sandbox_image = "registry.k8s.io/pause:3.10"
max_container_log_line_size = 16384
enable_cdi = true
stream_server_address = "127.0.0.1"
max_concurrent_downloads = 5
[plugins."io.containerd.grpc.v1.cri".registry]
config_path = "/etc/containerd/certs.d"
[plugins."io.containerd.grpc.v1.cri".containerd]
discard_unpacked_layers = false
snapshotter = "overlayfs"
default_runtime_name = "nvidia"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
runtime_type = "io.containerd.runc.v2"
sandbox_mode = "podsandbox"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
BinaryName = "/usr/bin/nvidia-container-runtime"
[plugins."io.containerd.grpc.v1.cri".cni]
bin_dir = "/opt/cni/bin"
conf_dir = "/etc/cni/net.d"
`, `version = 3
[plugins."io.containerd.grpc.v1.cri"]
stream_server_address = "127.0.0.1"
[plugins."io.containerd.cri.v1.images"]
discard_unpacked_layers = false
snapshotter = "overlayfs"
max_concurrent_downloads = 5
[plugins."io.containerd.cri.v1.images".pinned_images]
sandbox = "registry.k8s.io/pause:3.10"
[plugins."io.containerd.cri.v1.images".registry]
config_path = "/etc/containerd/certs.d"
[plugins."io.containerd.cri.v1.runtime"]
max_container_log_line_size = 16384
enable_cdi = true
[plugins."io.containerd.cri.v1.runtime".containerd]
default_runtime_name = "nvidia"
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia]
runtime_type = "io.containerd.runc.v2"
sandboxer = "podsandbox"
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia.options]
BinaryName = "/usr/bin/nvidia-container-runtime"
[plugins."io.containerd.cri.v1.runtime".cni]
bin_dirs = ["/opt/cni/bin"]
conf_dir = "/etc/cni/net.d"
`},
		// Values already under the schema-3 names: the images plugin takes
		// the schema-2 value, the runtime plugin keeps its own.
		{"both layouts", `version = 2
[plugins."io.containerd.grpc.v1.cri"]
enable_cdi = true
[plugins."io.containerd.grpc.v1.cri".containerd]
discard_unpacked_layers = false
default_runtime_name = "old"
[plugins."io.containerd.cri.v1.images"]
discard_unpacked_layers = true
[plugins."io.containerd.cri.v1.runtime"]
enable_cdi = false
[plugins."io.containerd.cri.v1.runtime".containerd]
default_runtime_name = "new"
[plugins."io.containerd.cri.v1.runtime".cni]
bin_dirs = ["/a"]
[plugins."io.containerd.grpc.v1.cri".cni]
bin_dir = "/b"
`, `version = 3
[plugins."io.containerd.cri.v1.images"]
discard_unpacked_layers = false
[plugins."io.containerd.cri.v1.runtime"]
enable_cdi = false
[plugins."io.containerd.cri.v1.runtime".containerd]
default_runtime_name = "new"
[plugins."io.containerd.cri.v1.runtime".cni]
bin_dirs = ["/a"]
`},
		{"task and cgroups", `version = 2
[plugins."io.containerd.runtime.v2.task"]
sched_core = true
platforms = ["linux/amd64"]
[plugins."io.containerd.monitor.v1.cgroups"]
no_prometheus = true
`, `version = 3
[plugins."io.containerd.runtime.v2.task"]
platforms = ["linux/amd64"]
[plugins."io.containerd.shim.v1.manager"]
env = ["SCHED_CORE=1"]
[plugins."io.containerd.monitor.task.v1.cgroups"]
no_prometheus = true
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var in, want map[string]any
			if err := toml.Unmarshal([]byte(tc.in), &in); err != nil {
				t.Fatal(err)
			}
			if err := toml.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			if err := MigrateV2(in); err != nil {
				t.Fatal(err)
			}
			if !sameTOML(in, want) {
				got, _ := toml.Marshal(in)
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestMigrateV2WrongTypes(t *testing.T) {
	for _, in := range []string{
		"version = 2\nplugins = 1\n",
		"version = 2\n[plugins]\n'io.containerd.grpc.v1.cri' = 'x'\n",
		"version = 2\n[plugins.'io.containerd.grpc.v1.cri']\ncontainerd = 1\n",
		"version = 2\n[plugins.'io.containerd.grpc.v1.cri'.containerd.runtimes]\nrunc = 1\n",
		"version = 2\n[plugins.'io.containerd.grpc.v1.cri']\nsandbox_image = 'p'\n[plugins.'io.containerd.cri.v1.images']\npinned_images = 1\n",
	} {
		var doc map[string]any
		if err := toml.Unmarshal([]byte(in), &doc); err != nil {
			t.Fatal(err)
		}
		if err := MigrateV2(doc); err == nil || !strings.Contains(err.Error(), "converting version 2 to version 3") {
			t.Errorf("%q: err %v, want one naming the conversion", in, err)
		}
	}
}

// nodeadm's containerdv2-config e2e input (awslabs/amazon-eks-ami
// nodeadm/test/e2e/cases/containerdv2-*/configv2.yaml's containerd.config):
// over berth's version 3 defaults the user's values win, and the file says
// version 3 only. nodeadm's expected result
// (containerdv2-config/expected-containerd-configv2.toml) has
// discard_unpacked_layers = false, pinned sandbox registry.k8s.io/pause:3.10
// and the user's socket.
const nodeadmV2UserConfig = `version = 2

[grpc]
address = "/run/foo/foo.sock"

[plugins."io.containerd.grpc.v1.cri".containerd]
discard_unpacked_layers = false

[plugins.'io.containerd.grpc.v1.cri']
sandbox_image = "registry.k8s.io/pause:3.10"
`

func TestConfigUserV2(t *testing.T) {
	out, err := Config(ConfigInputs{Schema: 3, SandboxImage: "localhost/berth/pause:3.10", User: nodeadmV2UserConfig})
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, out)
	for _, c := range []struct {
		path []string
		want any
	}{
		{[]string{"version"}, int64(3)},
		{[]string{"grpc", "address"}, "/run/foo/foo.sock"},
		{[]string{"plugins", ctrdv2.PluginCRIImages, "discard_unpacked_layers"}, false},
		{[]string{"plugins", ctrdv2.PluginCRIImages, "pinned_images", "sandbox"}, "registry.k8s.io/pause:3.10"},
		{[]string{"plugins", ctrdv2.PluginCRIRuntime, "containerd", "runtimes", "runc", "options", "SystemdCgroup"}, false},
	} {
		if got := get(m, c.path...); got != c.want {
			t.Errorf("%v = %v, want %v\n%s", c.path, got, c.want, out)
		}
	}
	if get(m, "plugins", ctrdv2.PluginCRIv2) != nil {
		t.Errorf("the version 2 CRI plugin table is still there:\n%s", out)
	}
	// A containerd 1.x image reads version 2: nothing is converted.
	out, err = Config(ConfigInputs{Schema: 2, SandboxImage: "p", User: nodeadmV2UserConfig})
	if err != nil {
		t.Fatal(err)
	}
	m = decode(t, out)
	if get(m, "version") != int64(2) || get(m, "plugins", ctrdv2.PluginCRIv2, "containerd", "discard_unpacked_layers") != false ||
		get(m, "plugins", ctrdv2.PluginCRIv2, "sandbox_image") != "registry.k8s.io/pause:3.10" {
		t.Errorf("schema 2 output:\n%s", out)
	}
}
