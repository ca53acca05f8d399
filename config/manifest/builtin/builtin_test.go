package builtin

import (
	"os"
	"regexp"
	"slices"
	"testing"

	imagespec "github.com/berth-node/berth/image/spec"
)

// TestManifestIsTheDefaultImage holds manifest.json to its sources: the
// component versions components.mk pins and the default image's sandbox
// image and preload list (image/spec.yaml, no variant); and the embedded
// accepts data to those versions. That the data are what `make accepts`
// generates for them is builtin_components_test.go's (components tier).
func TestManifestIsTheDefaultImage(t *testing.T) {
	m, err := Manifest()
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile("../../../components.mk")
	if err != nil {
		t.Fatal(err)
	}
	for comp, v := range map[string]string{"kubelet": "KUBE_VERSION", "containerd": "CONTAINERD_VERSION"} {
		pin := regexp.MustCompile(`(?m)^` + v + `\s*:=\s*(\S+)$`).FindSubmatch(mk)
		if pin == nil {
			t.Fatalf("components.mk has no %s", v)
		}
		if got := m.Components[comp]; got != string(pin[1]) {
			t.Errorf("manifest.json: %s %q, components.mk's %s is %s: run make builtin-manifest", comp, got, v, pin[1])
		}
	}
	if m.Accepts.Kubelet == nil || m.Accepts.Kubelet.Version != m.Components["kubelet"] {
		t.Errorf("kubelet.json.gz is not kubelet %s's: run make builtin-manifest", m.Components["kubelet"])
	}
	if m.Accepts.Containerd == nil || m.Accepts.Containerd.Version != m.Components["containerd"] {
		t.Errorf("containerd.json.gz is not containerd %s's: run make builtin-manifest", m.Components["containerd"])
	}

	data, err := os.ReadFile("../../../image/spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The variables name build outputs, none of which is read here.
	data = []byte(os.Expand(string(data), func(string) string { return "/nonexistent" }))
	sp, err := imagespec.Parse(data)
	if err != nil {
		t.Fatalf("image/spec.yaml: %v", err)
	}
	if !slices.Equal(m.Preload, sp.Preload) || len(m.Preload) == 0 {
		t.Errorf("manifest.json's preload %v, image/spec.yaml's %v", m.Preload, sp.Preload)
	}
	if m.SandboxImage != sp.SandboxImage || m.SandboxImage == "" {
		t.Errorf("manifest.json's sandbox image %q, image/spec.yaml's %q", m.SandboxImage, sp.SandboxImage)
	}
}

// TestManifestIsFresh: each call decodes anew, so one caller's change is
// not the next one's manifest.
func TestManifestIsFresh(t *testing.T) {
	a, err := Manifest()
	if err != nil {
		t.Fatal(err)
	}
	a.Preload[0] = "changed"
	a.Accepts.Kubelet.Flags = nil
	b, err := Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if b.Preload[0] == "changed" || b.Accepts.Kubelet.Flags["max-pods"].Type != "int32" {
		t.Errorf("the second manifest saw the first one's changes: preload %v, max-pods %+v", b.Preload, b.Accepts.Kubelet.Flags["max-pods"])
	}
	if got := Versions(b); got != "kubelet "+b.Components["kubelet"]+" and containerd "+b.Components["containerd"] {
		t.Errorf("Versions: %q", got)
	}
}
