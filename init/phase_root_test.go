package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/berth-node/berth/config/manifest"
	"github.com/berth-node/berth/init/kmod"
)

// Only a manifest naming both the root disk's serial and its verity
// parameters sends the root phase to a disk: a root in the initramfs, a
// disk image's partition, or a manifest without verity parameters (berth
// never mounts an unverified root disk) do not.
func TestRootDisk(t *testing.T) {
	disk := &manifest.Root{Serial: "berth-root", Verity: "sha256:aa:bb:1:1"}
	for _, c := range []struct {
		name string
		m    *manifest.Manifest
		want *manifest.Root
	}{
		{"no manifest", nil, nil},
		{"no root", &manifest.Manifest{}, nil},
		{"in the initramfs", &manifest.Manifest{Root: &manifest.Root{Path: "/root.erofs"}}, nil},
		{"disk image partition", &manifest.Manifest{Root: &manifest.Root{Partition: "berth-root", RootHash: "aa"}}, nil},
		{"serial without verity", &manifest.Manifest{Root: &manifest.Root{Serial: "berth-root"}}, nil},
		{"root disk", &manifest.Manifest{Root: disk}, disk},
	} {
		if got := rootDisk(c.m); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// An image whose manifest records its early modules has all of them on the
// root: the switch releases the initramfs's; an older image's are carried.
// After the switch the module index is the root's, listing every module.
func TestRootModules(t *testing.T) {
	for _, c := range []struct {
		name           string
		m              *manifest.Manifest
		carry, release []string
	}{
		{"no manifest", nil, []string{"/lib/modules", "/etc/berth"}, nil},
		{"older image", &manifest.Manifest{Modules: []string{"loop"}}, []string{"/lib/modules", "/etc/berth"}, nil},
		{"modules on the root", &manifest.Manifest{Modules: []string{"loop", "xt_nat"}, EarlyModules: []string{"loop"}}, []string{"/etc/berth"}, []string{"/lib/modules"}},
	} {
		b := &boot{node: nodeState{manifest: c.m}}
		carry, release := b.rootModules()
		if !slices.Equal(carry, c.carry) || !slices.Equal(release, c.release) {
			t.Errorf("%s: carry %v release %v, want %v %v", c.name, carry, release, c.carry, c.release)
		}
	}

	dir := t.TempDir()
	write := func(dep string) {
		if err := os.WriteFile(filepath.Join(dir, "modules.dep"), []byte(dep), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("kernel/drivers/block/loop.ko:\n")
	early, err := kmod.LoadIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The root's copy of the same directory lists every module.
	write("kernel/drivers/block/loop.ko:\nkernel/net/netfilter/xt_nat.ko:\n")
	log := slog.New(slog.DiscardHandler)
	for _, c := range []struct {
		name   string
		m      *manifest.Manifest
		xtNAT  bool
		sameIx bool
	}{
		{"older image keeps its carried index", &manifest.Manifest{}, false, true},
		{"modules on the root: the root's index", &manifest.Manifest{EarlyModules: []string{"loop"}}, true, false},
	} {
		b := &boot{log: log, node: nodeState{manifest: c.m, kmod: early}}
		b.switchedRoot(log)
		ix := b.moduleIndex()
		if ix.Has("xt_nat") != c.xtNAT || (ix == early) != c.sameIx {
			t.Errorf("%s: index has xt_nat %v (same index %v), want %v (%v)", c.name, ix.Has("xt_nat"), ix == early, c.xtNAT, c.sameIx)
		}
		if b.moduleIndex() != ix {
			t.Errorf("%s: a second call changed the index", c.name)
		}
	}
}
