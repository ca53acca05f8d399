// Package containerd decides containerd's configuration: config.toml in the
// schema the image's containerd speaks (chosen from the image manifest,
// never by running containerd), the CRI plugin set up for kubelet with
// cgroupfs, and the base OCI runtime spec. It is pure: it returns bytes for
// the plan to write.
package containerd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/berth-node/berth/internal/syntax"
	"github.com/berth-node/berth/runtime/rlimit"
)

// Paths containerd's files live at: nodeadm's.
const (
	ConfigPath          = "/etc/containerd/config.toml"
	BaseRuntimeSpecPath = "/etc/containerd/base-runtime-spec.json"
	Socket              = "/run/containerd/containerd.sock"
	Root                = "/var/lib/containerd"
	State               = "/run/containerd"
	CNIBinDir           = "/opt/cni/bin"
	CNIConfDir          = "/etc/cni/net.d"
	registryConfigPath  = "/etc/containerd/certs.d:/etc/docker/certs.d"
)

// SchemaVersion is the config.toml schema for a containerd release:
// version 2 for 1.x, version 3 for 2.x. version is the manifest's
// components["containerd"], e.g. "v2.2.3" or "1.7.27".
func SchemaVersion(version string) (int, error) {
	v := strings.TrimPrefix(strings.TrimSpace(version), "v")
	major, _, _ := strings.Cut(v, ".")
	n, err := strconv.Atoi(major)
	if err != nil {
		return 0, fmt.Errorf("containerd version %q from the image manifest: no major version number", version)
	}
	switch n {
	case 1:
		return 2, nil
	case 2:
		return 3, nil
	default:
		return 0, fmt.Errorf("containerd version %q from the image manifest: berth knows config schemas for containerd 1.x and 2.x only", version)
	}
}

// ConfigInputs are what config.toml depends on.
type ConfigInputs struct {
	// Schema is 2 (containerd 1.x) or 3 (containerd 2.x); see SchemaVersion.
	Schema int
	// SandboxImage is the pause image, from the image manifest; empty
	// leaves containerd's built-in default.
	SandboxImage string
	// User is the user's containerd.config TOML, deep-merged last.
	User string
}

// Config renders config.toml: berth's defaults, then the user's TOML merged
// over them table by table (a user value replaces berth's; tables merge).
// A user document of version 2 is converted to version 3 first when the
// image's containerd reads version 3 (MigrateV2), so the file says one
// schema only.
// Keys come out sorted, so the same inputs give the same bytes.
func Config(in ConfigInputs) ([]byte, error) {
	var doc map[string]any
	switch in.Schema {
	case 2:
		doc = configV2(in)
	case 3:
		doc = configV3(in)
	default:
		return nil, fmt.Errorf("rendering %s: unknown config schema version %d", ConfigPath, in.Schema)
	}
	if strings.TrimSpace(in.User) != "" {
		var user map[string]any
		if err := toml.Unmarshal([]byte(in.User), &user); err != nil {
			return nil, fmt.Errorf("containerd.config: %w", err)
		}
		if err := checkKeys(user, nil); err != nil {
			return nil, fmt.Errorf("containerd.config: %w", err)
		}
		// A version 2 document over berth's version 3 one would leave a
		// file that says version 2 and holds both layouts; containerd's
		// load-time migration then moves the user's keys over berth's
		// only where it chooses to (discard_unpacked_layers = false was
		// lost that way). Converting first puts each user value at the
		// key berth's own value has, so the merge lets the user win.
		if v, ok := user["version"].(int64); ok && v == 2 && in.Schema == 3 {
			if err := MigrateV2(user); err != nil {
				return nil, fmt.Errorf("containerd.config: %w", err)
			}
		}
		MergeTables(doc, user)
	}
	var b bytes.Buffer
	b.WriteString("# Written by berth from the node's configuration and image manifest; changes are lost at boot.\n")
	enc := toml.NewEncoder(&b)
	enc.SetIndentTables(false)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("encoding %s: %w", ConfigPath, err)
	}
	return b.Bytes(), nil
}

// checkKeys refuses user keys and table names with control characters at
// any depth. The encoder quotes and escapes every key it writes, so such a
// key cannot add a table to config.toml; but no containerd setting is named
// that way, and a key that only shows as an escape sequence is a mistake
// (or an attempt) the user should hear about. path is where m sits.
func checkKeys(m map[string]any, path []string) error {
	// Sorted, so the same document always names the same key.
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if err := syntax.NoControl(k); err != nil {
			return fmt.Errorf("key in %s: %w", tablePath(path), err)
		}
		if err := checkValueKeys(m[k], append(slices.Clone(path), k)); err != nil {
			return err
		}
	}
	return nil
}

func checkValueKeys(v any, path []string) error {
	switch v := v.(type) {
	case map[string]any:
		return checkKeys(v, path)
	case []any:
		for i, e := range v {
			if err := checkValueKeys(e, append(slices.Clone(path), fmt.Sprintf("[%d]", i))); err != nil {
				return err
			}
		}
	}
	return nil
}

// tablePath names a table the way TOML writes it, keys quoted.
func tablePath(path []string) string {
	if len(path) == 0 {
		return "the top-level table"
	}
	var b strings.Builder
	for i, k := range path {
		if strings.HasPrefix(k, "[") {
			b.WriteString(k)
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(strconv.Quote(k))
	}
	return "table " + b.String()
}

func runcRuntime() map[string]any {
	r := map[string]any{
		"runtime_type": "io.containerd.runc.v2",
		// berth has no systemd: runc manages cgroups through cgroupfs, as
		// kubelet's cgroupDriver does; the two must agree.
		"options": map[string]any{"SystemdCgroup": false},
	}
	// Always: the default spec carries EKS's file-descriptor limits, which
	// containerd's built-in one does not.
	r["base_runtime_spec"] = BaseRuntimeSpecPath
	return r
}

func common(schema int) map[string]any {
	return map[string]any{
		"version": schema,
		"root":    Root,
		"state":   State,
		"grpc":    map[string]any{"address": Socket},
	}
}

// configV2 is containerd 1.x's layout: one CRI plugin.
func configV2(in ConfigInputs) map[string]any {
	cri := map[string]any{
		"containerd": map[string]any{
			"default_runtime_name":    "runc",
			"discard_unpacked_layers": true,
			"runtimes":                map[string]any{"runc": runcRuntime()},
		},
		"registry": map[string]any{"config_path": registryConfigPath},
		"cni":      map[string]any{"bin_dir": CNIBinDir, "conf_dir": CNIConfDir},
	}
	if in.SandboxImage != "" {
		cri["sandbox_image"] = in.SandboxImage
	}
	doc := common(2)
	doc["plugins"] = map[string]any{"io.containerd.grpc.v1.cri": cri}
	return doc
}

// configV3 is containerd 2.x's layout: CRI split into images and runtime.
func configV3(in ConfigInputs) map[string]any {
	images := map[string]any{
		"discard_unpacked_layers": true,
		"registry":                map[string]any{"config_path": registryConfigPath},
	}
	if in.SandboxImage != "" {
		images["pinned_images"] = map[string]any{"sandbox": in.SandboxImage}
	}
	runtime := map[string]any{
		"containerd": map[string]any{
			"default_runtime_name": "runc",
			"runtimes":             map[string]any{"runc": runcRuntime()},
		},
		// bin_dirs, not 2.x's deprecated bin_dir: containerd refuses a
		// config with both, and a user's version 2 bin_dir converts to
		// bin_dirs (MigrateV2), so berth's must be the same key.
		"cni": map[string]any{"bin_dirs": []any{CNIBinDir}, "conf_dir": CNIConfDir},
	}
	doc := common(3)
	doc["plugins"] = map[string]any{
		"io.containerd.cri.v1.images":  images,
		"io.containerd.cri.v1.runtime": runtime,
	}
	return doc
}

// MergeTables merges src into dst: tables merge key by key, recursively;
// every other value in src (arrays included) replaces dst's. This is
// nodeadm's rule for containerd.config.
func MergeTables(dst, src map[string]any) {
	for k, sv := range src {
		if sm, ok := sv.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				MergeTables(dm, sm)
				continue
			}
		}
		dst[k] = sv
	}
}

// BaseRuntimeSpec renders the base OCI runtime spec, written on every
// node as nodeadm writes its base-runtime-spec.json: containerd's default
// Linux spec with RLIMIT_NOFILE 65536/1048576, and the user's
// containerd.baseRuntimeSpec merged over it object by object. containerd
// uses this file as the whole starting spec for every container, so the
// user's partial document must never be written on its own.
//
// nodeadm merges with mergo.Merge(WithOverride) on the decoded maps:
// objects merge key by key, arrays and scalars (false, 0 and null
// included) replace. MergeTables is that rule; the one difference is an
// object over a scalar, which mergo leaves as the scalar and berth
// replaces, as the user wrote.
func BaseRuntimeSpec(user map[string]json.RawMessage) ([]byte, error) {
	spec := defaultSpec()
	if len(user) > 0 {
		raw, err := json.Marshal(user)
		if err != nil {
			return nil, fmt.Errorf("encoding containerd.baseRuntimeSpec: %w", err)
		}
		var u map[string]any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&u); err != nil {
			return nil, fmt.Errorf("decoding containerd.baseRuntimeSpec: %w", err)
		}
		MergeTables(spec, u)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "    ")
	if err := enc.Encode(spec); err != nil {
		return nil, fmt.Errorf("encoding %s: %w", BaseRuntimeSpecPath, err)
	}
	return b.Bytes(), nil
}

// defaultSpec is containerd's default Linux container spec (the one
// `ctr oci spec` prints), with RLIMIT_NOFILE raised to 65536/1048576 as on
// EKS nodes.
func defaultSpec() map[string]any {
	caps := []any{
		"CAP_AUDIT_WRITE", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID",
		"CAP_KILL", "CAP_MKNOD", "CAP_NET_BIND_SERVICE", "CAP_NET_RAW", "CAP_SETFCAP",
		"CAP_SETGID", "CAP_SETPCAP", "CAP_SETUID", "CAP_SYS_CHROOT",
	}
	strs := func(s ...string) []any {
		out := make([]any, len(s))
		for i, v := range s {
			out[i] = v
		}
		return out
	}
	mount := func(dst, typ, src string, opts ...string) map[string]any {
		return map[string]any{"destination": dst, "type": typ, "source": src, "options": strs(opts...)}
	}
	ns := func(t string) map[string]any { return map[string]any{"type": t} }
	return map[string]any{
		"ociVersion": "1.1.0",
		"root":       map[string]any{"path": "rootfs"},
		"process": map[string]any{
			"cwd":             "/",
			"noNewPrivileges": true,
			"user":            map[string]any{"uid": 0, "gid": 0},
			"capabilities": map[string]any{
				"bounding":  caps,
				"effective": caps,
				"permitted": caps,
			},
			"rlimits": []any{map[string]any{"type": "RLIMIT_NOFILE", "soft": 65536, "hard": 1048576}},
		},
		"mounts": []any{
			mount("/proc", "proc", "proc", "nosuid", "noexec", "nodev"),
			mount("/dev", "tmpfs", "tmpfs", "nosuid", "strictatime", "mode=755", "size=65536k"),
			mount("/dev/pts", "devpts", "devpts", "nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"),
			mount("/dev/shm", "tmpfs", "shm", "nosuid", "noexec", "nodev", "mode=1777", "size=65536k"),
			mount("/dev/mqueue", "mqueue", "mqueue", "nosuid", "noexec", "nodev"),
			mount("/sys", "sysfs", "sysfs", "nosuid", "noexec", "nodev", "ro"),
			mount("/run", "tmpfs", "tmpfs", "nosuid", "strictatime", "mode=755", "size=65536k"),
		},
		"linux": map[string]any{
			"maskedPaths": strs("/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys",
				"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
				"/sys/firmware", "/sys/devices/virtual/powercap", "/proc/scsi"),
			"readonlyPaths": strs("/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"),
			"namespaces":    []any{ns("pid"), ns("ipc"), ns("uts"), ns("mount"), ns("network")},
			"resources": map[string]any{
				"devices": []any{map[string]any{"allow": false, "access": "rwm"}},
			},
		},
	}
}

// Rlimits are containerd's own limits, as containerd.service gives them
// (LimitNOFILE=infinity, LimitNPROC=infinity, LimitCORE=infinity; AL2023
// and Bottlerocket ship that unit). containerd-shim and runc inherit them,
// and pods start from the base runtime spec's, not these. systemd turns
// NOFILE infinity into fs.nr_open, which is 1048576 unless changed; the
// kernel refuses more, so that is the value.
func Rlimits() []rlimit.Limit {
	return []rlimit.Limit{
		{Resource: "core", Soft: rlimit.Infinity, Hard: rlimit.Infinity},
		{Resource: "nofile", Soft: 1048576, Hard: 1048576},
		{Resource: "nproc", Soft: rlimit.Infinity, Hard: rlimit.Infinity},
	}
}
