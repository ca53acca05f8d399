package containerd

import (
	"bytes"
	"encoding/json"
	"github.com/berth-node/berth/config/nodeconfig"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"
)

func TestSchemaVersion(t *testing.T) {
	for v, want := range map[string]int{"v2.2.3": 3, "2.0.0": 3, "1.7.27": 2, "v1.6.36": 2, " v2.1.0-rc.1 ": 3} {
		if got, err := SchemaVersion(v); err != nil || got != want {
			t.Errorf("SchemaVersion(%q) = %d, %v; want %d", v, got, err, want)
		}
	}
	for _, v := range []string{"", "latest", "v3.0.0", "0.9"} {
		if _, err := SchemaVersion(v); err == nil || !strings.Contains(err.Error(), "image manifest") {
			t.Errorf("SchemaVersion(%q) = %v, want an error naming the manifest", v, err)
		}
	}
}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := toml.Unmarshal(b, &m); err != nil {
		t.Fatalf("output is not TOML: %v\n%s", err, b)
	}
	return m
}

func get(m map[string]any, path ...string) any {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[p]
	}
	return cur
}

func TestConfigSchemas(t *testing.T) {
	for _, tc := range []struct {
		schema  int
		sandbox []string
		runc    []string
		cni     []string
	}{
		{2, []string{"plugins", "io.containerd.grpc.v1.cri", "sandbox_image"},
			[]string{"plugins", "io.containerd.grpc.v1.cri", "containerd", "runtimes", "runc"},
			[]string{"plugins", "io.containerd.grpc.v1.cri", "cni"}},
		{3, []string{"plugins", "io.containerd.cri.v1.images", "pinned_images", "sandbox"},
			[]string{"plugins", "io.containerd.cri.v1.runtime", "containerd", "runtimes", "runc"},
			[]string{"plugins", "io.containerd.cri.v1.runtime", "cni"}},
	} {
		out, err := Config(ConfigInputs{Schema: tc.schema, SandboxImage: "localhost/pause:3.10"})
		if err != nil {
			t.Fatal(err)
		}
		m := decode(t, out)
		if get(m, "version") != int64(tc.schema) {
			t.Errorf("schema %d: version = %v", tc.schema, get(m, "version"))
		}
		if get(m, tc.sandbox...) != "localhost/pause:3.10" {
			t.Errorf("schema %d: sandbox image missing", tc.schema)
		}
		runc := append(tc.runc, "options", "SystemdCgroup")
		if get(m, runc...) != false {
			t.Errorf("schema %d: SystemdCgroup = %v, want false", tc.schema, get(m, runc...))
		}
		if get(m, append(tc.runc, "base_runtime_spec")...) != BaseRuntimeSpecPath {
			t.Errorf("schema %d: base runtime spec not referenced", tc.schema)
		}
		binDir := get(m, append(tc.cni, "bin_dir")...)
		if tc.schema == 3 {
			if dirs, _ := get(m, append(tc.cni, "bin_dirs")...).([]any); len(dirs) == 1 && binDir == nil {
				binDir = dirs[0]
			}
		}
		if binDir != CNIBinDir || get(m, append(tc.cni, "conf_dir")...) != CNIConfDir {
			t.Errorf("schema %d: CNI dirs wrong", tc.schema)
		}
		if get(m, "grpc", "address") != Socket {
			t.Errorf("schema %d: socket wrong", tc.schema)
		}
	}
	if _, err := Config(ConfigInputs{Schema: 4}); err == nil {
		t.Error("schema 4 accepted")
	}
	// No sandbox image: no pin. The base spec is referenced on every node.
	out, _ := Config(ConfigInputs{Schema: 3})
	if bytes.Contains(out, []byte("pinned_images")) || !bytes.Contains(out, []byte("base_runtime_spec")) {
		t.Errorf("without a sandbox image:\n%s", out)
	}
}

func TestConfigUserMerge(t *testing.T) {
	user := `
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
SystemdCgroup = true
BinaryName = "/usr/sbin/runc"
[plugins.'io.containerd.cri.v1.images']
discard_unpacked_layers = false
[debug]
level = "debug"
`
	out, err := Config(ConfigInputs{Schema: 3, SandboxImage: "p", User: user})
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, out)
	opts := []string{"plugins", "io.containerd.cri.v1.runtime", "containerd", "runtimes", "runc", "options"}
	if get(m, append(opts, "BinaryName")...) != "/usr/sbin/runc" || get(m, append(opts, "SystemdCgroup")...) != true {
		t.Errorf("user values not merged over berth's: %v", get(m, opts...))
	}
	if get(m, "plugins", "io.containerd.cri.v1.images", "pinned_images", "sandbox") != "p" {
		t.Error("berth's sibling keys lost in merge")
	}
	if get(m, "plugins", "io.containerd.cri.v1.images", "discard_unpacked_layers") != false || get(m, "debug", "level") != "debug" {
		t.Error("user keys missing")
	}
	if _, err := Config(ConfigInputs{Schema: 3, User: "[broken"}); err == nil || !strings.Contains(err.Error(), "containerd.config") {
		t.Errorf("bad TOML: %v", err)
	}
	// Deterministic.
	again, _ := Config(ConfigInputs{Schema: 3, SandboxImage: "p", User: user})
	if !bytes.Equal(out, again) {
		t.Error("same inputs gave different bytes")
	}
}

func TestBaseRuntimeSpec(t *testing.T) {
	out, err := BaseRuntimeSpec(map[string]json.RawMessage{
		"process": json.RawMessage(`{"rlimits":[{"type":"RLIMIT_NOFILE","soft":1024,"hard":4096}]}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		OCIVersion string `json:"ociVersion"`
		Process    struct {
			Cwd     string `json:"cwd"`
			Rlimits []struct {
				Soft int `json:"soft"`
			} `json:"rlimits"`
			Capabilities map[string][]string `json:"capabilities"`
		} `json:"process"`
		Mounts []struct {
			Destination string `json:"destination"`
		} `json:"mounts"`
	}
	if err := json.Unmarshal(out, &spec); err != nil {
		t.Fatal(err)
	}
	if spec.OCIVersion == "" || spec.Process.Cwd != "/" || len(spec.Mounts) < 5 || len(spec.Process.Capabilities["bounding"]) != 14 {
		t.Errorf("default spec lost in merge: %+v", spec)
	}
	if len(spec.Process.Rlimits) != 1 || spec.Process.Rlimits[0].Soft != 1024 {
		t.Errorf("user rlimits not applied: %+v", spec.Process.Rlimits)
	}
	// nodeadm's merge (mergo WithOverride): objects merge, arrays and
	// scalars replace, false and null included.
	out, err = BaseRuntimeSpec(map[string]json.RawMessage{
		"process": json.RawMessage(`{"noNewPrivileges":false,"cwd":null}`),
		"linux":   json.RawMessage(`{"maskedPaths":[]}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	proc := m["process"].(map[string]any)
	if proc["noNewPrivileges"] != false || proc["cwd"] != nil || proc["rlimits"] == nil {
		t.Errorf("process after merge: %v", proc)
	}
	if mp := m["linux"].(map[string]any)["maskedPaths"].([]any); len(mp) != 0 {
		t.Errorf("maskedPaths after merge: %v", mp)
	}
	def, err := BaseRuntimeSpec(nil)
	if err != nil || !bytes.Contains(def, []byte(`"soft": 65536`)) {
		t.Errorf("default spec: %v\n%s", err, def)
	}
}

// TestConfigUserKeysCannotAddTables: a user key or table name from
// containerd.config reaches config.toml only quoted, so it cannot close its
// table and open another; a key with a control character is refused.
func TestConfigUserKeysCannotAddTables(t *testing.T) {
	for _, user := range []string{
		"[\"a\\nb\"]\nx = 1\n",
		"[plugins.\"x]\\n[evil]\"]\nk = 1\n",
		"\"k\\r\" = 1\n",
		"[[a]]\n\"b\\u0000\" = 1\n",
		"[plugins]\n\"x\\u2028\" = 1\n",
	} {
		_, err := Config(ConfigInputs{Schema: 3, User: user})
		if err == nil || !strings.Contains(err.Error(), "containerd.config: key in") || !strings.Contains(err.Error(), "control character") {
			t.Errorf("user config %q: err %v, want the control-character key refused", user, err)
		}
	}
	if _, err := Config(ConfigInputs{Schema: 3, User: "[plugins.\"a\".b]\n\"c\\nd\" = 1\n"}); err == nil ||
		!strings.Contains(err.Error(), `table "plugins"."a"."b"`) {
		t.Errorf("error does not name the table: %v", err)
	}

	// Keys with ']', quotes and dots, and string values that look like
	// tables, are legal TOML: they must come back as exactly what they were.
	user := "[plugins.\"x]y\"]\nk = \"v\"\n[plugins.'q\"]\\n[evil2']\nk = 2\n[debug]\nlevel = \"a\\n[evil]\\nx = 1\"\n"
	out, err := Config(ConfigInputs{Schema: 3, User: user})
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, out)
	top := slices.Sorted(maps.Keys(m))
	if !slices.Equal(top, []string{"debug", "grpc", "plugins", "root", "state", "version"}) {
		t.Errorf("top-level keys %q:\n%s", top, out)
	}
	if get(m, "plugins", "x]y", "k") != "v" || get(m, "plugins", `q"]\n[evil2`, "k") != int64(2) || get(m, "debug", "level") != "a\n[evil]\nx = 1" {
		t.Errorf("user values changed on the way through:\n%s", out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "[evil") {
			t.Errorf("a user value opened a table: %q\n%s", line, out)
		}
	}
}

func FuzzConfigUserTOML(f *testing.F) {
	for _, s := range []string{"", "[debug]\nlevel = 'debug'", "[plugins]\nx = 1", "version = 2", "[a.b.c]\nd = [1, 2]", "x = 1979-05-27T07:32:00Z", "[broken",
		"[plugins.\"x]y\"]\nk = \"v\\n[evil]\"", "[\"a\\nb\"]\nx = 1", "[[t]]\n'a.b' = nan", nodeadmV2UserConfig,
		"version = 2\n[plugins.'io.containerd.grpc.v1.cri'.cni]\nbin_dir = '/x'\n[plugins.'io.containerd.runtime.v2.task']\nsched_core = true"} {
		f.Add(s)
	}
	base, err := Config(ConfigInputs{Schema: 3, SandboxImage: "p"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, user string) {
		out, err := Config(ConfigInputs{Schema: 3, SandboxImage: "p", User: user})
		if err != nil {
			return
		}
		// Whatever the user wrote, the output must be TOML again, and say
		// exactly berth's defaults with the user's document merged over
		// them: nothing more (no table a value or key smuggled in).
		var got, want, u map[string]any
		if err := toml.Unmarshal(out, &got); err != nil {
			t.Fatalf("output does not parse: %v\n%s", err, out)
		}
		if err := toml.Unmarshal(base, &want); err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(user) != "" {
			if err := toml.Unmarshal([]byte(user), &u); err != nil {
				t.Fatalf("Config accepted TOML that does not parse: %v", err)
			}
			if v, ok := u["version"].(int64); ok && v == 2 {
				if err := MigrateV2(u); err != nil {
					t.Fatalf("Config accepted a version 2 document MigrateV2 refuses: %v", err)
				}
			}
			MergeTables(want, u)
		}
		if !sameTOML(got, want) {
			t.Fatalf("output says\n%v\nwant\n%v\n%s", got, want, out)
		}
		if err := checkKeys(got, nil); err != nil {
			t.Fatalf("output has a bad key: %v", err)
		}
	})
}

// sameTOML compares decoded TOML: times by instant (decoding makes a new
// *time.Location each time) and NaN equal to NaN.
func sameTOML(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return false
		}
		for k, v := range a {
			if w, ok := bm[k]; !ok || !sameTOML(v, w) {
				return false
			}
		}
		return true
	case []any:
		bs, ok := b.([]any)
		if !ok || len(a) != len(bs) {
			return false
		}
		for i := range a {
			if !sameTOML(a[i], bs[i]) {
				return false
			}
		}
		return true
	case time.Time:
		bt, ok := b.(time.Time)
		return ok && a.Equal(bt)
	case float64:
		bf, ok := b.(float64)
		return ok && (a == bf || math.IsNaN(a) && math.IsNaN(bf))
	}
	return reflect.DeepEqual(a, b)
}

// nodeconfig refuses a user [grpc] address other than berth's socket,
// and names it; the two must be the same path.
func TestSocketIsTheOneNodeConfigGuards(t *testing.T) {
	if Socket != nodeconfig.ContainerdSocket {
		t.Errorf("containerd.Socket %q, nodeconfig.ContainerdSocket %q", Socket, nodeconfig.ContainerdSocket)
	}
}
