package main

import (
	"testing"

	"github.com/berth-node/berth/manifest"
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
