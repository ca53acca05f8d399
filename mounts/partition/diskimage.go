package partition

import (
	"errors"
	"fmt"
	"io"
	"strings"

	ugpt "github.com/u-root/u-root/pkg/mount/gpt"
)

// The disk image's GPT (disk.raw, which image/disk plans and assembles):
//
//  1. an EFI System Partition holding systemd-boot and the unified kernel
//     images;
//  2. root slot a (berth-root-a): the erofs root filesystem followed by
//     its dm-verity hash tree;
//  3. root slot b (berth-root-b), the same size, empty in a new image: an
//     update writes the next version there while a runs;
//  4. a small data partition, last, that berth grows to the end of the
//     disk on first boot (the AMI's volume is usually larger than the
//     image).
//
// Everything is 1 MiB aligned. This file is the part of that contract the
// node needs: the names berth looks partitions up by, reading and
// validating the table, and the first-boot grow, which rewrites it.

// Disk image partition names, which berth looks partitions up by.
const (
	NameESP = "ESP"
	// NameRoot is what "berth's root" is called where there is one: a
	// direct-kernel boot's root disk has it as its serial, and each root
	// slot's partition name starts with it (Slot.PartName).
	NameRoot = "berth-root"
	NameData = "berth-data"
)

// SlotKey is the kernel command line key that names the root slot a disk
// boot mounts. The image build does not seal it: a release has one UKI,
// which boots from slot a on one node and slot b on another, and berth
// finds the slot by the root hash berth.verity= seals. An older image's
// UKI has it, and berth then checks that the slot it names holds that
// root.
const SlotKey = "berth.slot"

// Slot is one of the disk image's two root slots.
type Slot string

// The root slots. A new disk's root is in SlotA; SlotB is where the next
// version goes.
const (
	SlotA Slot = "a"
	SlotB Slot = "b"
)

// ParseSlot reads a berth.slot= value.
func ParseSlot(s string) (Slot, error) {
	switch Slot(s) {
	case SlotA, SlotB:
		return Slot(s), nil
	}
	return "", fmt.Errorf("%s=%q: want %q or %q", SlotKey, s, SlotA, SlotB)
}

// PartName is the slot's GPT partition name: berth-root-a, berth-root-b.
func (s Slot) PartName() string { return NameRoot + "-" + string(s) }

// Other is the slot that is not s: where an update of a node running on s
// writes.
func (s Slot) Other() Slot {
	if s == SlotA {
		return SlotB
	}
	return SlotA
}

// DiskPart is one partition of the disk image; LBAs are inclusive.
type DiskPart struct {
	Name              string
	Type, GUID        UUID
	FirstLBA, LastLBA uint64
}

// Size is the partition's length in bytes.
func (p DiskPart) Size() int64 { return int64(p.LastLBA-p.FirstLBA+1) * SectorSize }

// Offset is where the partition starts on the disk, in bytes.
func (p DiskPart) Offset() int64 { return int64(p.FirstLBA) * SectorSize }

// DiskLayout is a whole disk image's table.
type DiskLayout struct {
	DiskGUID UUID
	// Sectors is the disk's size; the backup GPT sits at its end.
	Sectors uint64
	Parts   []DiskPart
}

// Size is the disk's size in bytes.
func (l DiskLayout) Size() int64 { return int64(l.Sectors) * SectorSize }

// Find returns the partition named name.
func (l DiskLayout) Find(name string) (DiskPart, int, bool) {
	for i, p := range l.Parts {
		if p.Name == name {
			return p, i, true
		}
	}
	return DiskPart{}, -1, false
}

// Validate checks that the partitions are in order, aligned, do not
// overlap, and fit between the two GPTs.
func (l DiskLayout) Validate() error {
	if l.Sectors < minSectors {
		return fmt.Errorf("disk of %d sectors is too small for a GPT", l.Sectors)
	}
	if len(l.Parts) == 0 || len(l.Parts) > nParts {
		return fmt.Errorf("%d partitions", len(l.Parts))
	}
	first, last := uint64(2+arraySectors), l.Sectors-arraySectors-2
	prev := uint64(0)
	for i, p := range l.Parts {
		if p.FirstLBA > p.LastLBA || p.FirstLBA < first || p.LastLBA > last {
			return fmt.Errorf("partition %d (%s) spans LBA %d-%d, outside %d-%d", i+1, p.Name, p.FirstLBA, p.LastLBA, first, last)
		}
		if p.FirstLBA%AlignSectors != 0 {
			return fmt.Errorf("partition %d (%s) starts at LBA %d, not 1 MiB aligned", i+1, p.Name, p.FirstLBA)
		}
		if i > 0 && p.FirstLBA <= prev {
			return fmt.Errorf("partition %d (%s) at LBA %d overlaps or precedes partition %d", i+1, p.Name, p.FirstLBA, i)
		}
		prev = p.LastLBA
	}
	return nil
}

// Table is the protective MBR and both GPT copies for l.
func (l DiskLayout) Table() (*ugpt.PartitionTable, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	parts := make([]ugpt.Part, nParts)
	for i, p := range l.Parts {
		parts[i] = ugpt.Part{
			PartGUID:   ToGUID(p.Type),
			UniqueGUID: ToGUID(p.GUID),
			FirstLBA:   p.FirstLBA,
			LastLBA:    p.LastLBA,
			Name:       EncodeName(p.Name),
		}
	}
	return newTable(l.DiskGUID, l.Sectors, parts), nil
}

// WriteDisk puts l's table on w (a disk of l.Size() bytes).
func WriteDisk(w io.WriterAt, l DiskLayout) error {
	pt, err := l.Table()
	if err != nil {
		return err
	}
	if err := ugpt.Write(w, pt); err != nil {
		return fmt.Errorf("writing GPT: %w", err)
	}
	return nil
}

// ReadDisk takes the disk image's table off r, a disk (or image) of size
// bytes. The disk may be larger than the table says (a grown EBS volume):
// DiskLayout.Sectors is then the table's idea of the size, where its
// backup GPT sits.
func ReadDisk(r io.ReaderAt, size int64) (DiskLayout, error) {
	if err := checkHeaders(r, size); err != nil {
		return DiskLayout{}, fmt.Errorf("reading GPT: %w", err)
	}
	pt, err := ugpt.New(r)
	if err != nil || pt.Primary == nil {
		return DiskLayout{}, fmt.Errorf("reading GPT: no valid table (%v)", err)
	}
	g := pt.Primary
	l := DiskLayout{DiskGUID: FromGUID(g.DiskGUID), Sectors: g.BackupLBA + 1}
	for _, p := range g.Parts {
		if p.PartGUID == (ugpt.GUID{}) {
			continue
		}
		l.Parts = append(l.Parts, DiskPart{Name: DecodeName(p.Name), Type: FromGUID(p.PartGUID), GUID: FromGUID(p.UniqueGUID), FirstLBA: p.FirstLBA, LastLBA: p.LastLBA})
	}
	if err := l.Validate(); err != nil {
		return DiskLayout{}, fmt.Errorf("reading GPT: %w", err)
	}
	return l, nil
}

// ErrGrown says the data partition already ends at the end of the disk:
// the first-boot grow happened (or the disk is exactly the image's size).
var ErrGrown = errors.New("data partition already fills the disk")

// Grow plans the first-boot grow: l with the disk resized to diskBytes
// and the data partition (which must be last) ending at the last whole MiB
// before the backup GPT. Writing the result with WriteDisk moves the
// backup GPT to the new end. It returns ErrGrown (wrapped) when there is
// nothing to grow, and refuses to shrink.
func Grow(l DiskLayout, diskBytes int64) (DiskLayout, error) {
	p, i, ok := l.Find(NameData)
	if !ok {
		return DiskLayout{}, fmt.Errorf("growing: no partition named %q", NameData)
	}
	for _, q := range l.Parts {
		if q.FirstLBA > p.FirstLBA {
			return DiskLayout{}, fmt.Errorf("growing: partition %q (LBA %d) lies after %q; only a last partition can grow", q.Name, q.FirstLBA, NameData)
		}
	}
	total := uint64(diskBytes) / SectorSize
	if diskBytes <= 0 || total < l.Sectors {
		return DiskLayout{}, fmt.Errorf("growing: disk of %d bytes is smaller than the table's %d sectors", diskBytes, l.Sectors)
	}
	lastUsable := total - arraySectors - 2
	end := (lastUsable+1)/AlignSectors*AlignSectors - 1
	if end < p.LastLBA {
		return DiskLayout{}, fmt.Errorf("growing: %s would shrink from LBA %d to %d", NameData, p.LastLBA, end)
	}
	if end == p.LastLBA {
		if total != l.Sectors {
			// The partition is as large as it gets, but the backup GPT is
			// not at the end: still rewrite the table.
			out := l.clone()
			out.Sectors = total
			return out, nil
		}
		return DiskLayout{}, fmt.Errorf("growing %s (LBA %d-%d on %d sectors): %w", NameData, p.FirstLBA, p.LastLBA, total, ErrGrown)
	}
	out := l.clone()
	out.Sectors = total
	out.Parts[i].LastLBA = end
	return out, out.Validate()
}

func (l DiskLayout) clone() DiskLayout {
	l.Parts = append([]DiskPart(nil), l.Parts...)
	return l
}

// String is a short human form for logs and errors.
func (l DiskLayout) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "disk %s, %d sectors:", l.DiskGUID, l.Sectors)
	for i, p := range l.Parts {
		fmt.Fprintf(&b, " %d=%s[%d-%d]", i+1, p.Name, p.FirstLBA, p.LastLBA)
	}
	return b.String()
}
