package spec

import (
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The repository's own spec must parse, and its test variant must add the
// shell and helpers without touching the default image.
func TestRepoSpec(t *testing.T) {
	s, err := Load("../spec.yaml", map[string]string{"NODE_COMPONENTS": "build/components/node"})
	if err != nil {
		t.Fatal(err)
	}
	def, err := s.Resolve("default")
	if err != nil {
		t.Fatal(err)
	}
	if def.Root.Busybox != nil || len(def.Root.GoBuild) != 0 {
		t.Error("the default image must have no shell and no test helpers")
	}
	for _, m := range []string{"virtio_net", "nvme", "loop", "erofs", "evdev", "button"} {
		if !slices.Contains(def.Modules, m) {
			t.Errorf("spec does not ship %s", m)
		}
	}
	for _, m := range []string{"virtio_net", "virtio_pci", "nvme"} {
		if slices.Contains(def.Preload, m) {
			t.Errorf("device driver %s is preloaded; devices are found by modalias", m)
		}
	}
	test, err := s.Resolve("test")
	if err != nil {
		t.Fatal(err)
	}
	if test.Root.Busybox == nil || !slices.Contains(test.Root.Busybox.Applets, "sh") {
		t.Error("test variant lacks busybox sh")
	}
	// A variant adds to the base image; it never drops what the base has.
	testFiles := map[string]bool{}
	for _, f := range test.Root.Files {
		testFiles[f.Dst] = true
	}
	for _, f := range def.Root.Files {
		if !testFiles[f.Dst] {
			t.Errorf("test variant lost base file %s", f.Dst)
		}
	}
	if len(test.Root.Dirs) < len(def.Root.Dirs) {
		t.Error("test variant lost base directories")
	}
	if _, err := s.Resolve("nope"); err == nil {
		t.Error("unknown variant accepted")
	}
	// Every boot of the image skips the kernel's crypto self-tests, and
	// a hang before berth runs panics and reboots.
	for _, a := range []string{"cryptomgr.notests", "initcall_blacklist=crypto_kdf108_init", "panic=10", "hung_task_panic=1", "softlockup_panic=1"} {
		if !slices.Contains(def.KernelArgs, a) || !slices.Contains(test.KernelArgs, a) {
			t.Errorf("kernelArgs lack %s: default %q, test %q", a, def.KernelArgs, test.KernelArgs)
		}
	}
}

// A variant's kernel arguments come after the base's, and resolving does
// not change the spec it was resolved from.
func TestResolveKernelArgs(t *testing.T) {
	s, err := Parse([]byte("kernelArgs: [a, b=1]\nvariants: {v: {kernelArgs: [c]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.Resolve("v")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(v.KernelArgs, []string{"a", "b=1", "c"}) {
		t.Errorf("variant v: kernelArgs %q", v.KernelArgs)
	}
	if !slices.Equal(s.KernelArgs, []string{"a", "b=1"}) {
		t.Errorf("base changed by Resolve: %q", s.KernelArgs)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"modules: [a]\nroot: {filez: []}\n", "filez"},
		{"root: {dirs: [{path: /x, mode: \"0999\"}]}\n", "octal"},
		{"root: {dirs: [{path: x, mode: \"0755\"}]}\n", "root.dirs[0].path"},
		{"root: {files: [{dst: /x, mode: \"0644\"}]}\n", "exactly one of src and content"},
		{"variants: {test: {root: {files: [{dst: y, content: a, mode: \"0644\"}]}}}\n", "variants.test.root.files[0].dst"},
		{"root: {plugins: [{dir: lib/xtables}]}\n", "root.plugins[0].dir"},
		{"root: {plugins: [{dir: /x, glob: \"[\"}]}\n", "root.plugins[0].glob"},
		{"root: {binaries: [{name: x, links: [a/b]}]}\n", "root.binaries[0] (x).links"},
		{"kernelArgs: [quiet, \"a b\"]\n", `kernelArgs[1] "a b": must be one word`},
		{"kernelArgs: [\"\"]\n", `kernelArgs[0] "": must be one word`},
		{"kernelArgs: [console=ttyS1]\n", `kernelArgs[0] "console=ttyS1": console is set by whatever boots the image`},
		{"variants: {test: {kernelArgs: [berth.verity=x]}}\n", `variants.test.kernelArgs[0] "berth.verity=x": berth.verity is set`},
	} {
		_, err := Parse([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", tc.doc, err, tc.want)
		}
	}
}

func TestMode(t *testing.T) {
	s, err := Parse([]byte("root: {dirs: [{path: /tmp, mode: \"1777\"}, {path: /r, mode: \"0700\"}]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Root.Dirs[0].Mode != 0o1777 || s.Root.Dirs[1].Mode != 0o700 {
		t.Errorf("modes %o %o", s.Root.Dirs[0].Mode, s.Root.Dirs[1].Mode)
	}
}

// ${NAME} takes its value from vars, ${MULTIARCH} is left for the builder,
// and a name with no value is an error naming it.
func TestExpand(t *testing.T) {
	in := "src: ${NODE_COMPONENTS}/kubelet\ndir: /usr/lib/${MULTIARCH}/xtables\n"
	got, err := Expand([]byte(in), map[string]string{"NODE_COMPONENTS": "build/arm64/components/node"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "src: build/arm64/components/node/kubelet\ndir: /usr/lib/${MULTIARCH}/xtables\n"; string(got) != want {
		t.Errorf("Expand = %q, want %q", got, want)
	}
	if _, err := Expand([]byte(in+"x: ${NODE_COMPONENT}\n"), map[string]string{"NODE_COMPONENTS": "x"}); err == nil || !strings.Contains(err.Error(), "NODE_COMPONENT") {
		t.Errorf("unknown variable: %v, want an error naming it", err)
	}
	if _, err := Load("../spec.yaml", nil); err == nil || !strings.Contains(err.Error(), "NODE_COMPONENTS") {
		t.Errorf("the repository's spec without NODE_COMPONENTS: %v, want an error naming it", err)
	}
}

// TestBusyboxAppletRepeated: an unquoted yes in the applet list is YAML
// 1.1's true, a repeat of the true applet; the spec is refused, naming
// both entries, instead of losing the yes applet.
func TestBusyboxAppletRepeated(t *testing.T) {
	l := Layer{Busybox: &Busybox{Src: "/bin/busybox", Dst: "/bin/busybox"}}
	if err := yaml.Unmarshal([]byte("[ls, true, yes]"), &l.Busybox.Applets); err != nil {
		t.Fatal(err)
	}
	err := l.Validate()
	if err == nil || !strings.Contains(err.Error(), `root.busybox.applets[1] and [2] are both "true"`) {
		t.Fatalf("error %v, want the repeat named", err)
	}
	l.Busybox.Applets = []string{"ls", "true", "yes"}
	if err := l.Validate(); err != nil {
		t.Errorf("quoted: %v", err)
	}
}
