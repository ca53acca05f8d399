package ctrdv2

import (
	"slices"
	"strings"
	"testing"
)

// TestWhere: each kind of move containerd 2.x makes, by path. (That
// runtime/containerd's conversion moves keys to the same places is its
// TestMigrateV2AgreesWithWhere.)
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
