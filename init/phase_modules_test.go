package main

import (
	"slices"
	"testing"
)

func TestSplitPreload(t *testing.T) {
	preload := []string{"loop", "erofs", "evdev", "overlay", "br_netfilter"}
	tests := []struct {
		name                string
		diskBoot, rootImage bool
		now, later          []string
	}{
		{"initramfs root image", false, true, []string{"loop", "erofs"}, []string{"evdev", "overlay", "br_netfilter"}},
		{"disk boot: the root's disk driver comes from the coldplug", true, false, preload, nil},
		{"berth.root=none", false, false, nil, preload},
	}
	for _, tt := range tests {
		now, later := splitPreload(preload, tt.diskBoot, tt.rootImage)
		if !slices.Equal(now, tt.now) || !slices.Equal(later, tt.later) {
			t.Errorf("%s: now %q later %q, want %q and %q", tt.name, now, later, tt.now, tt.later)
		}
	}
	// Names as modules.dep spells them count too.
	if now, _ := splitPreload([]string{"kernel/drivers/block/loop.ko"}, false, true); len(now) != 1 {
		t.Errorf("a module path did not count as loop: now %q", now)
	}
}
