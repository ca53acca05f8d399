package manifest

import (
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
