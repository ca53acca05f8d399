package ctrdv2

import (
	"fmt"
	"slices"
)

// Migrate converts a containerd config document of schema version 2 to
// version 3 in place, with the key moves containerd 2.x makes when it loads
// a version 2 file (its plugins' ConfigMigration functions, containerd
// v2.2.3: plugins/cri/images/plugin.go, plugins/cri/runtime/plugin.go,
// plugins/cri/cri.go, core/runtime/v2/shim_manager.go,
// core/metrics/cgroups/cgroups.go):
//
//   - io.containerd.grpc.v1.cri splits three ways. sandbox_image becomes
//     the images plugin's pinned_images.sandbox; registry,
//     image_decryption, max_concurrent_downloads,
//     image_pull_progress_timeout, image_pull_with_sync_fs,
//     stats_collect_period and containerd.{snapshotter,
//     disable_snapshot_annotations, discard_unpacked_layers} go to
//     io.containerd.cri.v1.images, replacing what is there. The streaming
//     server keys stay in io.containerd.grpc.v1.cri. Everything else goes
//     to io.containerd.cri.v1.runtime where that plugin does not set it
//     already; cni.bin_dir becomes cni.bin_dirs, and a runtime's
//     sandbox_mode its sandboxer.
//   - io.containerd.runtime.v2.task's sched_core becomes the shim
//     manager's env SCHED_CORE=1.
//   - io.containerd.monitor.v1.cgroups is renamed
//     io.containerd.monitor.task.v1.cgroups.
//
// Two of containerd's moves are not made: the images plugin's
// runtime_platform from a runtime's "snapshot" key (no schema-2 key has
// that name; a runtime's snapshotter stays with the runtime, where schema
// 3 reads it too), and containerd's replacing the whole shim manager table
// when it migrates sched_core (berth merges env into it instead). A table
// of the wrong type is an error naming it, where containerd would panic.
func Migrate(doc map[string]any) error {
	defer func() { doc["version"] = int64(3) }()
	plugins, ok, err := table(doc, "plugins", "the top-level table")
	if err != nil || !ok {
		return err
	}
	if err := migrateCRI(plugins); err != nil {
		return err
	}
	if task, ok, err := table(plugins, PluginTaskV2, "table plugins"); err != nil {
		return err
	} else if ok {
		if sc, ok := task["sched_core"]; ok {
			delete(task, "sched_core")
			if on, _ := sc.(bool); on {
				mgr, _, err := table(plugins, PluginShimManager, "table plugins")
				if err != nil {
					return err
				}
				if mgr == nil {
					mgr = map[string]any{}
					plugins[PluginShimManager] = mgr
				}
				mgr["env"] = []any{"SCHED_CORE=1"}
			}
		}
	}
	if c, ok := plugins[PluginCgroupsV2]; ok {
		plugins[PluginCgroupsV3] = c
		delete(plugins, PluginCgroupsV2)
	}
	return nil
}

func migrateCRI(plugins map[string]any) error {
	criImageKeys, criContainerdImageKeys, criStreamKeys := CRIImageKeys(), CRIContainerdImageKeys(), CRIStreamKeys()
	src, ok, err := table(plugins, PluginCRIv2, "table plugins")
	if err != nil || !ok {
		return err
	}
	where := fmt.Sprintf("table plugins.%q", PluginCRIv2)
	ctrd, _, err := table(src, "containerd", where)
	if err != nil {
		return err
	}
	// Named here, as the user wrote it, rather than in the runtime
	// plugin's table it is merged into below.
	if _, _, err := table(ctrd, "runtimes", where+".containerd"); err != nil {
		return err
	}
	cni, _, err := table(src, "cni", where)
	if err != nil {
		return err
	}

	// The images plugin: the schema-2 values win.
	images, err := tableOrNew(plugins, PluginCRIImages)
	if err != nil {
		return err
	}
	if img, ok := src["sandbox_image"]; ok {
		pinned, err := tableOrNew(images, "pinned_images")
		if err != nil {
			return err
		}
		pinned["sandbox"] = img
	}
	for _, k := range criImageKeys {
		if v, ok := src[k]; ok {
			images[k] = v
		}
	}
	for _, k := range criContainerdImageKeys {
		if v, ok := ctrd[k]; ok {
			images[k] = v
		}
	}

	// The runtime plugin: what it sets already wins.
	runtime, err := tableOrNew(plugins, PluginCRIRuntime)
	if err != nil {
		return err
	}
	for k, v := range src {
		switch {
		case k == "cni" || k == "containerd" || k == "sandbox_image" ||
			slices.Contains(criImageKeys, k) || slices.Contains(criStreamKeys, k):
		default:
			if _, ok := runtime[k]; !ok {
				runtime[k] = v
			}
		}
	}
	if cni != nil {
		dst, err := tableOrNew(runtime, "cni")
		if err != nil {
			return err
		}
		for k, v := range cni {
			if k == "bin_dir" {
				if dirs, ok := dst["bin_dirs"].([]any); !ok || len(dirs) == 0 {
					dst["bin_dirs"] = []any{v}
				}
				continue
			}
			if _, ok := dst[k]; !ok {
				dst[k] = v
			}
		}
	}
	if ctrd != nil {
		dst, err := tableOrNew(runtime, "containerd")
		if err != nil {
			return err
		}
		for k, v := range ctrd {
			if slices.Contains(criContainerdImageKeys, k) {
				continue
			}
			if _, ok := dst[k]; !ok {
				dst[k] = v
			}
		}
		runtimes, _, err := table(dst, "runtimes", fmt.Sprintf("table plugins.%q.containerd", PluginCRIRuntime))
		if err != nil {
			return err
		}
		for name, r := range runtimes {
			rt, ok := r.(map[string]any)
			if !ok {
				return fmt.Errorf("converting version 2 to version 3: plugins.%q.containerd.runtimes.%q is not a table", PluginCRIv2, name)
			}
			if mode, ok := rt["sandbox_mode"]; ok {
				if _, ok := rt["sandboxer"]; !ok {
					rt["sandboxer"] = mode
					delete(rt, "sandbox_mode")
				}
			}
		}
	}

	// The CRI plugin keeps only the streaming server.
	kept := map[string]any{}
	for _, k := range criStreamKeys {
		if v, ok := src[k]; ok {
			kept[k] = v
		}
	}
	if len(kept) == 0 {
		delete(plugins, PluginCRIv2)
	} else {
		plugins[PluginCRIv2] = kept
	}
	return nil
}

// table returns m[key] when it is a table; ok is false when it is absent.
func table(m map[string]any, key, where string) (map[string]any, bool, error) {
	v, ok := m[key]
	if !ok {
		return nil, false, nil
	}
	t, ok := v.(map[string]any)
	if !ok {
		return nil, false, fmt.Errorf("converting version 2 to version 3: %q in %s is not a table", key, where)
	}
	return t, true, nil
}

func tableOrNew(m map[string]any, key string) (map[string]any, error) {
	t, ok, err := table(m, key, "the converted document")
	if err != nil {
		return nil, err
	}
	if !ok {
		t = map[string]any{}
		m[key] = t
	}
	return t, nil
}
