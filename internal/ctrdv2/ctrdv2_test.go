package ctrdv2

import (
	"slices"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

// TestWhere: each kind of move containerd 2.x makes, by path (Migrate
// moves keys to the same places: TestMigrateAgreesWithWhere).
func TestWhere(t *testing.T) {
	p := func(s string) []string { return strings.Split(s, "|") }
	for _, tc := range []struct {
		in, want string
		elem     bool
	}{
		{"version", "version", false},
		{"debug|level", "debug|level", false},
		{"plugins", "plugins", false},
		{"plugins|io.containerd.grpc.v1.cri", "plugins|io.containerd.cri.v1.runtime", false},
		{"plugins|io.containerd.grpc.v1.cri|max_container_log_line_size", "plugins|io.containerd.cri.v1.runtime|max_container_log_line_size", false},
		{"plugins|io.containerd.grpc.v1.cri|sandbox_image", "plugins|io.containerd.cri.v1.images|pinned_images|sandbox", false},
		{"plugins|io.containerd.grpc.v1.cri|registry|mirrors|docker.io|endpoint", "plugins|io.containerd.cri.v1.images|registry|mirrors|docker.io|endpoint", false},
		{"plugins|io.containerd.grpc.v1.cri|stream_server_port", "plugins|io.containerd.grpc.v1.cri|stream_server_port", false},
		{"plugins|io.containerd.grpc.v1.cri|containerd", "plugins|io.containerd.cri.v1.runtime|containerd", false},
		{"plugins|io.containerd.grpc.v1.cri|containerd|snapshotter", "plugins|io.containerd.cri.v1.images|snapshotter", false},
		{"plugins|io.containerd.grpc.v1.cri|containerd|default_runtime_name", "plugins|io.containerd.cri.v1.runtime|containerd|default_runtime_name", false},
		{"plugins|io.containerd.grpc.v1.cri|containerd|runtimes|runc|sandbox_mode", "plugins|io.containerd.cri.v1.runtime|containerd|runtimes|runc|sandboxer", false},
		{"plugins|io.containerd.grpc.v1.cri|containerd|runtimes|runc|options|SystemdCgroup", "plugins|io.containerd.cri.v1.runtime|containerd|runtimes|runc|options|SystemdCgroup", false},
		{"plugins|io.containerd.grpc.v1.cri|cni|bin_dir", "plugins|io.containerd.cri.v1.runtime|cni|bin_dirs", true},
		{"plugins|io.containerd.grpc.v1.cri|cni|conf_dir", "plugins|io.containerd.cri.v1.runtime|cni|conf_dir", false},
		{"plugins|io.containerd.monitor.v1.cgroups|no_prometheus", "plugins|io.containerd.monitor.task.v1.cgroups|no_prometheus", false},
		{"plugins|io.containerd.runtime.v2.task|platforms", "plugins|io.containerd.runtime.v2.task|platforms", false},
		{"plugins|io.containerd.cri.v1.runtime|enable_cdi", "plugins|io.containerd.cri.v1.runtime|enable_cdi", false},
	} {
		got, elem := Where(p(tc.in))
		if !slices.Equal(got, p(tc.want)) || elem != tc.elem {
			t.Errorf("Where(%s) = %q, %v; want %s, %v", tc.in, got, elem, tc.want, tc.elem)
		}
	}
	if got, _ := Where(p("plugins|io.containerd.runtime.v2.task|sched_core")); got != nil {
		t.Errorf("sched_core: %q; want no place (it becomes the shim manager's env)", got)
	}
	// The lists are fresh each call: a caller cannot change them for another.
	CRIImageKeys()[0] = "changed"
	if CRIImageKeys()[0] != "registry" {
		t.Error("CRIImageKeys shares its slice")
	}
}

// TestMigrateAgreesWithWhere: Migrate puts every leaf of a version 2
// document where Where says, which is where validation
// type-checks it; a key Migrate moved and Where did not (or the other
// way round) would be checked against the wrong type.
func TestMigrateAgreesWithWhere(t *testing.T) {
	const in = `version = 2
oom_score = -500
[debug]
level = "info"
[plugins."io.containerd.grpc.v1.cri"]
sandbox_image = "v-sandbox"
max_container_log_line_size = 1
enable_cdi = true
stream_server_address = "v-stream"
disable_tcp_service = true
max_concurrent_downloads = 2
image_pull_progress_timeout = "v-progress"
stats_collect_period = 3
[plugins."io.containerd.grpc.v1.cri".registry]
config_path = "v-registry"
[plugins."io.containerd.grpc.v1.cri".image_decryption]
key_model = "v-keys"
[plugins."io.containerd.grpc.v1.cri".x509_key_pair_streaming]
tls_cert_file = "v-cert"
[plugins."io.containerd.grpc.v1.cri".containerd]
snapshotter = "v-snapshotter"
disable_snapshot_annotations = false
default_runtime_name = "v-default"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
runtime_type = "v-type"
sandbox_mode = "v-mode"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
BinaryName = "v-binary"
SystemdCgroup = false
[plugins."io.containerd.grpc.v1.cri".cni]
bin_dir = "v-bin"
conf_dir = "v-conf"
[plugins."io.containerd.monitor.v1.cgroups"]
no_prometheus = true
[plugins."io.containerd.internal.v1.opt"]
path = "v-opt"
`
	var doc map[string]any
	if err := toml.Unmarshal([]byte(in), &doc); err != nil {
		t.Fatal(err)
	}
	var leaves [][]string
	var walk func(at []string, v any)
	walk = func(at []string, v any) {
		m, ok := v.(map[string]any)
		if !ok {
			leaves = append(leaves, at)
			return
		}
		for k, e := range m {
			walk(append(slices.Clone(at), k), e)
		}
	}
	walk(nil, doc)
	before := map[string]any{}
	for _, l := range leaves {
		before[strings.Join(l, "\x00")] = valueAt(doc, l)
	}
	if err := Migrate(doc); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, l := range leaves {
		if l[0] == "version" {
			continue // Migrate's own: the document becomes version 3
		}
		want := before[strings.Join(l, "\x00")]
		v3, elem := Where(l)
		if v3 == nil {
			t.Errorf("%q: Where gives it no place in version 3", l)
			continue
		}
		got := valueAt(doc, v3)
		if elem {
			list, _ := got.([]any)
			if len(list) != 1 {
				t.Errorf("%q: Where says an element of %q, which holds %v", l, v3, got)
				continue
			}
			got = list[0]
		}
		if got != want {
			t.Errorf("%q: Where says %q, where Migrate left %v; want %v", l, v3, got, want)
		}
		checked++
	}
	if checked != 24 {
		t.Errorf("checked %d leaves, want the document's 24 (all but version); the walk looks wrong", checked)
	}
}

// valueAt is the value at path in doc's tables, or nil.
func valueAt(doc map[string]any, path []string) any {
	var v any = doc
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}
