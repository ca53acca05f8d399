// Package ctrdv2 is containerd 2.x's conversion of a version 2
// config.toml to version 3 (its plugins' ConfigMigration functions,
// containerd v2.2.3: plugins/cri/images, plugins/cri/runtime, plugins/cri,
// core/runtime/v2/shim_manager.go, core/metrics/cgroups), as Migrate
// makes it on a decoded document and as Where says it key by key. Both
// sides that must agree on it import it: runtime/containerd, which
// converts a user's version 2 document before merging it, and
// config/nodeconfig, which refuses what the conversion cannot make and
// type-checks each version 2 key against containerd's type for the key
// it becomes (config/ may not import runtime/).
package ctrdv2

import "slices"

// Plugin names in containerd's config, version 2 and 3.
const (
	PluginCRIv2       = "io.containerd.grpc.v1.cri"
	PluginCRIImages   = "io.containerd.cri.v1.images"
	PluginCRIRuntime  = "io.containerd.cri.v1.runtime"
	PluginTaskV2      = "io.containerd.runtime.v2.task"
	PluginShimManager = "io.containerd.shim.v1.manager"
	PluginCgroupsV2   = "io.containerd.monitor.v1.cgroups"
	PluginCgroupsV3   = "io.containerd.monitor.task.v1.cgroups"
)

// CRIImageKeys are the version 2 CRI plugin's keys that go to the images
// plugin. Functions, not variables, so that no caller can change them for
// the other.
func CRIImageKeys() []string {
	return []string{"registry", "image_decryption", "max_concurrent_downloads", "image_pull_progress_timeout", "image_pull_with_sync_fs", "stats_collect_period"}
}

// CRIContainerdImageKeys are the keys of the version 2 CRI plugin's
// containerd table that go to the images plugin.
func CRIContainerdImageKeys() []string {
	return []string{"snapshotter", "disable_snapshot_annotations", "discard_unpacked_layers"}
}

// CRIStreamKeys are the version 2 CRI plugin's keys that stay in it: the
// streaming server's.
func CRIStreamKeys() []string {
	return []string{"disable_tcp_service", "stream_server_address", "stream_server_port", "stream_idle_timeout", "enable_tls_streaming", "x509_key_pair_streaming"}
}

// Where is the place in the version 3 layout of the value at path (its
// keys from the document's root) in a version 2 document. elem says that
// the value becomes one element of the list at v3 (cni.bin_dir becomes
// cni.bin_dirs); a nil v3 says the key has no place of its own in version
// 3 (the task plugin's sched_core becomes the shim manager's env). A table
// that containerd splits (the CRI plugin, its containerd and cni tables)
// is placed where its keys go unless they are named: the runtime plugin's.
func Where(path []string) (v3 []string, elem bool) {
	if len(path) < 2 || path[0] != "plugins" {
		return path, false
	}
	at := func(p ...string) []string { return append([]string{"plugins"}, p...) }
	switch path[1] {
	case PluginCgroupsV2:
		return append(at(PluginCgroupsV3), path[2:]...), false
	case PluginTaskV2:
		if len(path) > 2 && path[2] == "sched_core" {
			return nil, false
		}
		return path, false
	case PluginCRIv2:
	default:
		return path, false
	}
	if len(path) == 2 {
		return at(PluginCRIRuntime), false
	}
	key, rest := path[2], path[3:]
	switch {
	case key == "sandbox_image":
		return append(at(PluginCRIImages, "pinned_images", "sandbox"), rest...), false
	case slices.Contains(CRIImageKeys(), key):
		return append(at(PluginCRIImages, key), rest...), false
	case slices.Contains(CRIStreamKeys(), key):
		return path, false
	case key == "containerd" && len(rest) > 0 && slices.Contains(CRIContainerdImageKeys(), rest[0]):
		return append(at(PluginCRIImages, rest[0]), rest[1:]...), false
	case key == "containerd" && len(rest) >= 3 && rest[0] == "runtimes" && rest[2] == "sandbox_mode":
		return append(at(PluginCRIRuntime, "containerd", "runtimes", rest[1], "sandboxer"), rest[3:]...), false
	case key == "cni" && len(rest) > 0 && rest[0] == "bin_dir":
		return append(at(PluginCRIRuntime, "cni", "bin_dirs"), rest[1:]...), true
	}
	return append(at(PluginCRIRuntime), path[2:]...), false
}
