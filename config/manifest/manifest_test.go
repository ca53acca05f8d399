package manifest

import (
	"reflect"
	"strings"
	"testing"
)

func TestCheckArch(t *testing.T) {
	for name, tc := range map[string]struct {
		manifest string
		goarch   string
		errHas   []string // empty: accepted
		noted    bool
	}{
		"amd64 on amd64":        {`{"arch": "amd64"}`, "amd64", nil, false},
		"arm64 on arm64":        {`{"arch": "arm64"}`, "arm64", nil, false},
		"arm64 on amd64":        {`{"arch": "arm64"}`, "amd64", []string{"for arm64", "runs on amd64", "ARCH=amd64"}, false},
		"amd64 on arm64":        {`{"arch": "amd64"}`, "arm64", []string{"for amd64", "runs on arm64", "ARCH=arm64"}, false},
		"unknown arch":          {`{"arch": "riscv64"}`, "arm64", []string{"for riscv64"}, false},
		"no arch, amd64 berth":  {`{"berthVersion": "v0.1"}`, "amd64", nil, true},
		"no arch, arm64 berth":  {`{"berthVersion": "v0.1"}`, "arm64", []string{"for amd64", "runs on arm64"}, true},
		"empty arch is no arch": {`{"arch": ""}`, "amd64", nil, true},
	} {
		m, err := Parse([]byte(tc.manifest))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		note, err := m.CheckArch(tc.goarch)
		if (note != "") != tc.noted || (tc.noted && !strings.Contains(note, LegacyArch)) {
			t.Errorf("%s: note %q, want one: %v", name, note, tc.noted)
		}
		if len(tc.errHas) == 0 {
			if err != nil {
				t.Errorf("%s: CheckArch = %v, want nil", name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: CheckArch = nil, want an error", name)
			continue
		}
		for _, s := range tc.errHas {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: CheckArch = %q, want it to contain %q", name, err, s)
			}
		}
	}
}

// FuzzParse: the manifest is read from the image at boot and from any path
// `berth render --manifest` is given; no input may panic Parse or
// CheckArch.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"arch": "arm64", "kernelVersion": "6.1.0-56-arm64"}`))
	f.Add([]byte(`{"berthVersion": "v1", "files": [{"path": "/init", "mode": "0755"}]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(data)
		if err != nil {
			return
		}
		if _, err := m.CheckArch("arm64"); err == nil && m.Arch != "arm64" {
			t.Errorf("arch %q accepted on arm64", m.Arch)
		}
	})
}

// ParseDeferred gives the same manifest as Parse, its accepts raw, and
// DecodeAccepts gives Parse's accepts from them.
func TestParseDeferred(t *testing.T) {
	data := []byte(`{"arch": "amd64", "preload": ["loop"], "sandboxImage": "registry.k8s.io/pause:3.10",
		"accepts": {"kubelet": {"version": "v1.35.4", "flags": {"node-ip": {"type": "string"}}, "featureGates": {}}}}`)
	whole, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	m, raw, err := ParseDeferred(data)
	if err != nil {
		t.Fatal(err)
	}
	if m.Accepts != nil || m.Arch != "amd64" || m.SandboxImage != whole.SandboxImage || !reflect.DeepEqual(m.Preload, whole.Preload) {
		t.Errorf("deferred manifest %+v: want Parse's, without accepts", m)
	}
	a, err := DecodeAccepts(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, whole.Accepts) || a.Kubelet == nil || a.Kubelet.Version != "v1.35.4" {
		t.Errorf("DecodeAccepts = %+v, want %+v", a, whole.Accepts)
	}
	// An image from before the accepts were recorded.
	m, raw, err = ParseDeferred([]byte(`{"arch": "amd64"}`))
	if err != nil || m.Arch != "amd64" {
		t.Fatalf("%+v %v", m, err)
	}
	if a, err := DecodeAccepts(raw); a != nil || err != nil {
		t.Errorf("DecodeAccepts of none = %v, %v", a, err)
	}
	if _, err := DecodeAccepts([]byte(`{"kubelet": 3}`)); err == nil || !strings.Contains(err.Error(), "accepts") {
		t.Errorf("DecodeAccepts of a bad value: %v", err)
	}
	if _, _, err := ParseDeferred([]byte(`{`)); err == nil {
		t.Error("ParseDeferred of bad JSON succeeded")
	}
}
