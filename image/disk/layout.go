// Package disk plans berth's bootable disk image (disk.raw) and assembles
// it: a GPT with
//
//  1. an EFI System Partition holding systemd-boot and the unified kernel
//     image (ESPFiles);
//  2. root slot a: the erofs root filesystem followed by its dm-verity
//     hash tree (one partition, so one device for the verity table, with
//     the hash offset on the command line);
//  3. root slot b, as large as a and empty: an in-place update writes the
//     next version there while a runs, so each slot has room for a root
//     larger than today's (SlotSize);
//  4. a small data partition, last, that berth grows to the end of the
//     disk on first boot (the AMI's volume is usually larger than the
//     image).
//
// Everything is 1 MiB aligned. Type GUIDs follow the Discoverable
// Partitions Specification; the other GUIDs are derived from the root
// hash, so the same root filesystem gives the same table, byte for byte,
// and slot a's GUID is the first 128 bits of the root hash as
// systemd-repart does it (a tool that knows the spec can find the root by
// its hash). Slot b's GUID is derived from the disk's, as it holds nothing
// yet.
//
// Planning is pure. The table itself (partition.DiskLayout: its names,
// validation, writing, reading and the first-boot grow) is the node's side
// of the contract and lives in mounts/partition, which PID 1 links without
// this package; it assumes 512-byte logical blocks (EBS and QEMU's NVMe).
package disk

import (
	"fmt"
	"math"

	"github.com/berth-node/berth/mounts/partition"
)

// Align is the partition boundary, in bytes (partition.AlignSectors in
// sectors).
const Align = 1 << 20

// Partition type GUIDs (canonical text) of the ESP and the root; the data
// partition is a plain partition.TypeLinuxFS.
const (
	TypeESP        = "c12a7328-f81f-11d2-ba4b-00a0c93ec93b"
	TypeRootX86_64 = "4f68bce3-e8cd-4db1-96e7-fbcaf984b709"
)

// Namespace is the UUIDv5 namespace of disk image GUIDs. Changing it
// changes every image's GUIDs.
var Namespace = partition.UUID{0x2f, 0x8b, 0x61, 0x0e, 0x94, 0x5a, 0x4c, 0x17, 0xa3, 0x02, 0x5d, 0x7e, 0x41, 0xc9, 0x88, 0x0b}

// Sizes are what the partitions must hold, in bytes; each is rounded up
// to Align.
type Sizes struct {
	ESP  int64
	Root int64 // erofs image plus verity hash area, in slot a
	// Slot is each root slot's size; SlotSize(Root) when zero. It must
	// hold Root.
	Slot int64
	Data int64
}

// SlotSize is a root slot's size for a root of root bytes: half as much
// again and at least 128 MiB more, in whole 64 MiB, so that the versions
// an update brings (a newer kubelet, another image preloaded) still fit
// the slots this disk was made with. A slot is never resized: the data
// partition after it has grown to the disk's end.
func SlotSize(root int64) int64 {
	const unit = 64 << 20
	n := max(root+root/2, root+128<<20)
	return (n + unit - 1) / unit * unit
}

// Plan lays out disk.raw for sizes. rootHash (the dm-verity root hash, at
// least 16 bytes) seeds every GUID.
func Plan(s Sizes, rootHash []byte) (partition.DiskLayout, error) {
	if len(rootHash) < 16 {
		return partition.DiskLayout{}, fmt.Errorf("root hash of %d bytes: need at least 16 to derive partition GUIDs", len(rootHash))
	}
	if s.Slot == 0 && s.Root > 0 && s.Root <= math.MaxInt64/4 {
		s.Slot = SlotSize(s.Root)
	}
	for _, v := range []struct {
		name string
		n    int64
	}{{partition.NameESP, s.ESP}, {partition.NameRoot, s.Root}, {"root slot", s.Slot}, {partition.NameData, s.Data}} {
		if v.n <= 0 || v.n > math.MaxInt64/4 {
			return partition.DiskLayout{}, fmt.Errorf("partition %s: size %d bytes", v.name, v.n)
		}
	}
	if s.Slot < s.Root {
		return partition.DiskLayout{}, fmt.Errorf("root slot of %d bytes cannot hold the %d-byte root", s.Slot, s.Root)
	}
	disk := partition.UUIDv5(Namespace, fmt.Sprintf("disk\x00%x", rootHash))
	var root partition.UUID
	copy(root[:], rootHash[:16])
	esp, _ := partition.ParseUUID(TypeESP)
	rootT, _ := partition.ParseUUID(TypeRootX86_64)
	fs, _ := partition.ParseUUID(partition.TypeLinuxFS)
	l := partition.DiskLayout{DiskGUID: disk}
	next := uint64(partition.AlignSectors)
	for _, p := range []struct {
		name     string
		typ, id  partition.UUID
		sizeByte int64
	}{
		{partition.NameESP, esp, partition.UUIDv5(disk, "esp"), s.ESP},
		{partition.SlotA.PartName(), rootT, root, s.Slot},
		{partition.SlotB.PartName(), rootT, partition.UUIDv5(disk, "root-b"), s.Slot},
		{partition.NameData, fs, partition.UUIDv5(disk, "data"), s.Data},
	} {
		n := uint64((p.sizeByte+Align-1)/Align) * partition.AlignSectors
		l.Parts = append(l.Parts, partition.DiskPart{Name: p.name, Type: p.typ, GUID: p.id, FirstLBA: next, LastLBA: next + n - 1})
		next += n
	}
	// A whole MiB after the last partition keeps the backup GPT (33
	// sectors) off it and the disk a whole number of MiB.
	l.Sectors = next + partition.AlignSectors
	return l, l.Validate()
}
