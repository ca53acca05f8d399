package accepts

import (
	"os"
	"path/filepath"
	"testing"
)

func TestIntBits(t *testing.T) {
	for kind, want := range map[string][3]any{
		"int32": {32, true, true}, "uint8": {8, false, true}, "int64": {64, true, true},
		"string": {0, false, false}, "int": {0, false, false}, "uint32x": {0, false, false},
	} {
		bits, signed, ok := (&Type{Kind: kind}).IntBits()
		if [3]any{bits, signed, ok} != want {
			t.Errorf("%s: got %d %v %v, want %v", kind, bits, signed, ok, want)
		}
	}
}

func TestLoadAndMerge(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	k, err := Load(write("k.json", `{"kubelet":{"version":"v1.35.4","flags":{"v":{"type":"Level","value":"x","shorthand":"v"}},"config":{"kind":"object","fields":{"maxPods":{"kind":"int32"}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Load(write("c.json", `{"containerd":{"version":"v2.2.3","configVersions":[1,2,3]}}`))
	if err != nil {
		t.Fatal(err)
	}
	a := &Accepts{}
	if err := a.Merge(k); err != nil {
		t.Fatal(err)
	}
	if err := a.Merge(c); err != nil {
		t.Fatal(err)
	}
	if a.Kubelet.Flags["v"].Shorthand != "v" || a.Kubelet.Config.Field("maxPods").Kind != "int32" || a.Containerd.ConfigVersions[2] != 3 {
		t.Errorf("merged: %+v %+v", a.Kubelet, a.Containerd)
	}
	if err := a.Merge(k); err == nil {
		t.Error("a second kubelet merged")
	}
	if _, err := Load(write("bad.json", `{"kubelet":{"flags":{"v":{"typo":1}}}}`)); err == nil {
		t.Error("an unknown field was read: the generators' output must match these types")
	}
}
