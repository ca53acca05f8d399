// Package disk plans berth's bootable disk image (disk.raw) and assembles
// it: a GPT with
//
//  1. an EFI System Partition holding the unified kernel image;
//  2. the root partition: the erofs root filesystem followed by its
//     dm-verity hash tree (one partition, so one device for the verity
//     table, with the hash offset on the command line);
//  3. a small data partition, last, that berth grows to the end of the
//     disk on first boot (the AMI's volume is usually larger than the
//     image).
//
// Everything is 1 MiB aligned. Type GUIDs follow the Discoverable
// Partitions Specification; the other GUIDs are derived from the root
// hash, so the same root filesystem gives the same table, byte for byte,
// and the root partition's GUID is the first 128 bits of the root hash as
// systemd-repart does it (a tool that knows the spec can find the root by
// its hash).
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
	Root int64 // erofs image plus verity hash area
	Data int64
}

// Plan lays out disk.raw for sizes. rootHash (the dm-verity root hash, at
// least 16 bytes) seeds every GUID.
func Plan(s Sizes, rootHash []byte) (partition.DiskLayout, error) {
	if len(rootHash) < 16 {
		return partition.DiskLayout{}, fmt.Errorf("root hash of %d bytes: need at least 16 to derive partition GUIDs", len(rootHash))
	}
	for _, v := range []struct {
		name string
		n    int64
	}{{partition.NameESP, s.ESP}, {partition.NameRoot, s.Root}, {partition.NameData, s.Data}} {
		if v.n <= 0 || v.n > math.MaxInt64/4 {
			return partition.DiskLayout{}, fmt.Errorf("partition %s: size %d bytes", v.name, v.n)
		}
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
		{partition.NameRoot, rootT, root, s.Root},
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
