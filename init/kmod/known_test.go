package kmod

import "testing"

func TestKnown(t *testing.T) {
	ix := fixture(t)
	for name, want := range map[string]bool{
		"loop":                  true, // a module
		"nvme-core":             true, // '-' for '_'
		"evdev":                 true, // builtin
		"fs-erofs":              true, // an alias
		"devname:loop-control":  true,
		"no-such-module":        false,
		"rtnl-link-no-such-one": false,
		"":                      false,
	} {
		if got := ix.Known(name); got != want {
			t.Errorf("Known(%q) = %v, want %v", name, got, want)
		}
	}
}
