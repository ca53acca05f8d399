//go:build components

// This test runs the real containerd (built by `make containerd`,
// BERTH_COMPONENTS_DIR=build/components) on the config.toml berth renders;
// select it with `go test -tags components`.

package containerd

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pelletier/go-toml/v2"

	"github.com/berth-node/berth/internal/ctrdv2"
)

func containerdBinary(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("BERTH_COMPONENTS_DIR")
	if dir == "" {
		t.Fatal("BERTH_COMPONENTS_DIR is not set: run `make containerd` and set it to build/components")
	}
	bins, err := filepath.Glob(filepath.Join(dir, "containerd-v*", "containerd"))
	if err != nil || len(bins) == 0 {
		t.Fatalf("no containerd under %s/containerd-v*/ (%v): run `make containerd`", dir, err)
	}
	slices.Sort(bins)
	return bins[len(bins)-1]
}

// dump is what containerd itself makes of a config file: `containerd
// --config F config dump` loads it, runs its own version migration and
// prints the result with its defaults.
func dump(t *testing.T, bin string, cfg []byte) map[string]any {
	t.Helper()
	f := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(f, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--config", f, "config", "dump").Output()
	if err != nil {
		t.Fatalf("containerd config dump: %v\n%s", err, cfg)
	}
	var m map[string]any
	if err := toml.Unmarshal(out, &m); err != nil {
		t.Fatalf("config dump is not TOML: %v\n%s", err, out)
	}
	return m
}

// TestContainerdDumpUserV2 replays nodeadm's containerdv2-config case with
// the real containerd: berth's file, with the user's version 2 document
// converted and merged, keeps the user's discard_unpacked_layers = false,
// pins the user's sandbox image in place of the image's, and is version 3.
// The same user document merged unconverted (berth's old behaviour) loses
// the user's false to berth's true, which is what makes this test check
// something.
func TestContainerdDumpUserV2(t *testing.T) {
	bin := containerdBinary(t)
	const imageSandbox = "localhost/berth/pause:3.10"
	cfg, err := Config(ConfigInputs{Schema: 3, SandboxImage: imageSandbox, User: nodeadmV2UserConfig})
	if err != nil {
		t.Fatal(err)
	}
	m := dump(t, bin, cfg)
	images := []string{"plugins", ctrdv2.PluginCRIImages}
	for _, c := range []struct {
		path []string
		want any
	}{
		{[]string{"version"}, int64(3)},
		{[]string{"grpc", "address"}, "/run/foo/foo.sock"},
		{append(images, "discard_unpacked_layers"), false},
		{append(images, "pinned_images", "sandbox"), "registry.k8s.io/pause:3.10"},
		{append(images, "registry", "config_path"), registryConfigPath},
		{[]string{"plugins", ctrdv2.PluginCRIRuntime, "containerd", "runtimes", "runc", "options", "SystemdCgroup"}, false},
		{[]string{"plugins", ctrdv2.PluginCRIRuntime, "containerd", "runtimes", "runc", "base_runtime_spec"}, BaseRuntimeSpecPath},
	} {
		if got := get(m, c.path...); got != c.want {
			t.Errorf("dumped %v = %v, want %v\nberth's file:\n%s", c.path, got, c.want, cfg)
		}
	}
	if dirs, _ := get(m, "plugins", ctrdv2.PluginCRIRuntime, "cni", "bin_dirs").([]any); !slices.Equal(dirs, []any{CNIBinDir}) {
		t.Errorf("dumped cni.bin_dirs = %v, want [%s]", dirs, CNIBinDir)
	}

	// Berth's old file: the user's version 2 tables over berth's version 3.
	var base, user map[string]any
	if err := toml.Unmarshal(mustConfig(t, ConfigInputs{Schema: 3, SandboxImage: imageSandbox}), &base); err != nil {
		t.Fatal(err)
	}
	if err := toml.Unmarshal([]byte(nodeadmV2UserConfig), &user); err != nil {
		t.Fatal(err)
	}
	MergeTables(base, user)
	old, err := toml.Marshal(base)
	if err != nil {
		t.Fatal(err)
	}
	if got := get(dump(t, bin, old), append(images, "discard_unpacked_layers")...); got != true {
		t.Errorf("unconverted merge: containerd dumps discard_unpacked_layers = %v; the case no longer shows the loss it was written for", got)
	}
}

func mustConfig(t *testing.T, in ConfigInputs) []byte {
	t.Helper()
	b, err := Config(in)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
