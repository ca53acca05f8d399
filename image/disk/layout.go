// Package disk plans berth's bootable disk image (disk.raw) and the one
// change berth makes to it at first boot: a GPT with
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
// Planning is pure; Write and Read put a table on and take it off an
// io.WriterAt/ReaderAt (an image file or a block device) through u-root's
// pkg/mount/gpt, assuming 512-byte logical blocks (EBS and QEMU's NVMe).
package disk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/berth-node/berth/mounts/partition"
	ugpt "github.com/u-root/u-root/pkg/mount/gpt"
)

const (
	// SectorSize is the logical block size the table assumes.
	SectorSize = ugpt.BlockSize
	// Align is the partition boundary, in bytes.
	Align = 1 << 20
	// AlignSectors is Align in sectors.
	AlignSectors = Align / SectorSize

	nParts        = 128
	partEntrySize = 128
	arraySectors  = nParts * partEntrySize / SectorSize
)

// Partition type GUIDs (canonical text).
const (
	TypeESP        = "c12a7328-f81f-11d2-ba4b-00a0c93ec93b"
	TypeRootX86_64 = "4f68bce3-e8cd-4db1-96e7-fbcaf984b709"
	TypeLinuxFS    = "0fc63daf-8483-4772-8e79-3d69d8477de4"
)

// Partition names, which berth looks partitions up by.
const (
	NameESP  = "ESP"
	NameRoot = "berth-root"
	NameData = "berth-data"
)

// Namespace is the UUIDv5 namespace of disk image GUIDs. Changing it
// changes every image's GUIDs.
var Namespace = partition.UUID{0x2f, 0x8b, 0x61, 0x0e, 0x94, 0x5a, 0x4c, 0x17, 0xa3, 0x02, 0x5d, 0x7e, 0x41, 0xc9, 0x88, 0x0b}

// Part is one partition; LBAs are inclusive.
type Part struct {
	Name              string
	Type, GUID        partition.UUID
	FirstLBA, LastLBA uint64
}

// Size is the partition's length in bytes.
func (p Part) Size() int64 { return int64(p.LastLBA-p.FirstLBA+1) * SectorSize }

// Offset is where the partition starts on the disk, in bytes.
func (p Part) Offset() int64 { return int64(p.FirstLBA) * SectorSize }

// Layout is a whole disk's table.
type Layout struct {
	DiskGUID partition.UUID
	// Sectors is the disk's size; the backup GPT sits at its end.
	Sectors uint64
	Parts   []Part
}

// Size is the disk's size in bytes.
func (l Layout) Size() int64 { return int64(l.Sectors) * SectorSize }

// Find returns the partition named name.
func (l Layout) Find(name string) (Part, int, bool) {
	for i, p := range l.Parts {
		if p.Name == name {
			return p, i, true
		}
	}
	return Part{}, -1, false
}

// Sizes are what the partitions must hold, in bytes; each is rounded up
// to Align.
type Sizes struct {
	ESP  int64
	Root int64 // erofs image plus verity hash area
	Data int64
}

// Plan lays out disk.raw for sizes. rootHash (the dm-verity root hash, at
// least 16 bytes) seeds every GUID.
func Plan(s Sizes, rootHash []byte) (Layout, error) {
	if len(rootHash) < 16 {
		return Layout{}, fmt.Errorf("root hash of %d bytes: need at least 16 to derive partition GUIDs", len(rootHash))
	}
	for _, v := range []struct {
		name string
		n    int64
	}{{NameESP, s.ESP}, {NameRoot, s.Root}, {NameData, s.Data}} {
		if v.n <= 0 || v.n > math.MaxInt64/4 {
			return Layout{}, fmt.Errorf("partition %s: size %d bytes", v.name, v.n)
		}
	}
	disk := partition.UUIDv5(Namespace, fmt.Sprintf("disk\x00%x", rootHash))
	var root partition.UUID
	copy(root[:], rootHash[:16])
	esp, _ := partition.ParseUUID(TypeESP)
	rootT, _ := partition.ParseUUID(TypeRootX86_64)
	fs, _ := partition.ParseUUID(TypeLinuxFS)
	l := Layout{DiskGUID: disk}
	next := uint64(AlignSectors)
	for _, p := range []struct {
		name     string
		typ, id  partition.UUID
		sizeByte int64
	}{
		{NameESP, esp, partition.UUIDv5(disk, "esp"), s.ESP},
		{NameRoot, rootT, root, s.Root},
		{NameData, fs, partition.UUIDv5(disk, "data"), s.Data},
	} {
		n := uint64((p.sizeByte+Align-1)/Align) * AlignSectors
		l.Parts = append(l.Parts, Part{Name: p.name, Type: p.typ, GUID: p.id, FirstLBA: next, LastLBA: next + n - 1})
		next += n
	}
	// A whole MiB after the last partition keeps the backup GPT (33
	// sectors) off it and the disk a whole number of MiB.
	l.Sectors = next + AlignSectors
	return l, l.Validate()
}

// Validate checks that the partitions are in order, aligned, do not
// overlap, and fit between the two GPTs.
func (l Layout) Validate() error {
	if l.Sectors < 2*(2+arraySectors) {
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
func (l Layout) Table() (*ugpt.PartitionTable, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	last := l.Sectors - 1
	parts := make([]ugpt.Part, nParts)
	for i, p := range l.Parts {
		parts[i] = ugpt.Part{
			PartGUID:   partition.ToGUID(p.Type),
			UniqueGUID: partition.ToGUID(p.GUID),
			FirstLBA:   p.FirstLBA,
			LastLBA:    p.LastLBA,
			Name:       partition.EncodeName(p.Name),
		}
	}
	hdr := ugpt.Header{
		Signature:  ugpt.Signature,
		Revision:   ugpt.Revision,
		HeaderSize: ugpt.HeaderSize,
		CurrentLBA: 1,
		BackupLBA:  last,
		FirstLBA:   2 + arraySectors,
		LastLBA:    last - arraySectors - 1,
		DiskGUID:   partition.ToGUID(l.DiskGUID),
		PartStart:  2,
		NPart:      nParts,
		PartSize:   partEntrySize,
	}
	backup := hdr
	backup.CurrentLBA, backup.BackupLBA = last, 1
	backup.PartStart = last - arraySectors
	var mbr ugpt.MBR
	e := mbr[446:462]
	e[1], e[2], e[3] = 0x00, 0x02, 0x00 // CHS of LBA 1
	e[4] = 0xee                         // GPT protective
	e[5], e[6], e[7] = 0xff, 0xff, 0xff
	binary.LittleEndian.PutUint32(e[8:], 1)
	binary.LittleEndian.PutUint32(e[12:], uint32(min(last, 0xffffffff)))
	mbr[510], mbr[511] = 0x55, 0xaa
	return &ugpt.PartitionTable{
		MasterBootRecord: &mbr,
		Primary:          &ugpt.GPT{Header: hdr, Parts: parts},
		Backup:           &ugpt.GPT{Header: backup, Parts: append([]ugpt.Part(nil), parts...)},
	}, nil
}

// Write puts l's table on w (a disk of l.Size() bytes).
func Write(w io.WriterAt, l Layout) error {
	pt, err := l.Table()
	if err != nil {
		return err
	}
	if err := ugpt.Write(w, pt); err != nil {
		return fmt.Errorf("writing GPT: %w", err)
	}
	return nil
}

// Read takes the table off r, a disk (or image) of size bytes. The disk
// may be larger than the table says (a grown EBS volume): Layout.Sectors is
// then the table's idea of the size, where its backup GPT sits.
func Read(r io.ReaderAt, size int64) (Layout, error) {
	if err := checkHeader(r, size); err != nil {
		return Layout{}, err
	}
	pt, err := ugpt.New(r)
	if err != nil || pt.Primary == nil {
		return Layout{}, fmt.Errorf("reading GPT: no valid table (%v)", err)
	}
	g := pt.Primary
	l := Layout{DiskGUID: partition.FromGUID(g.DiskGUID), Sectors: g.BackupLBA + 1}
	for _, p := range g.Parts {
		if p.PartGUID == (ugpt.GUID{}) {
			continue
		}
		l.Parts = append(l.Parts, Part{Name: partition.DecodeName(p.Name), Type: partition.FromGUID(p.PartGUID), GUID: partition.FromGUID(p.UniqueGUID), FirstLBA: p.FirstLBA, LastLBA: p.LastLBA})
	}
	if err := l.Validate(); err != nil {
		return Layout{}, fmt.Errorf("reading GPT: %w", err)
	}
	return l, nil
}

// checkHeader guards ugpt.New, which allocates what the header says and
// reads the backup where it says: a corrupt or hostile disk must not make
// PID 1 allocate gigabytes or read past the disk.
func checkHeader(r io.ReaderAt, size int64) error {
	var h ugpt.Header
	if err := binary.Read(io.NewSectionReader(r, ugpt.HeaderOff, ugpt.HeaderSize), binary.LittleEndian, &h); err != nil {
		return fmt.Errorf("reading GPT header: %w", err)
	}
	if h.Signature != ugpt.Signature {
		return errors.New("reading GPT: no GPT signature at LBA 1")
	}
	if h.PartSize != partEntrySize || h.NPart == 0 || h.NPart > nParts {
		return fmt.Errorf("reading GPT: header with %d entries of %d bytes", h.NPart, h.PartSize)
	}
	if h.BackupLBA < 2*(2+arraySectors) || h.BackupLBA >= uint64(size)/SectorSize {
		return fmt.Errorf("reading GPT: backup header at LBA %d, disk has %d sectors", h.BackupLBA, size/SectorSize)
	}
	if h.PartStart != 2 {
		return fmt.Errorf("reading GPT: entry array at LBA %d, want 2", h.PartStart)
	}
	return nil
}

// ErrGrown says the data partition already ends at the end of the disk:
// the first-boot grow happened (or the disk is exactly the image's size).
var ErrGrown = errors.New("data partition already fills the disk")

// Grow plans the first-boot grow: l with the disk resized to diskBytes
// and the data partition (which must be last) ending at the last whole MiB
// before the backup GPT. Writing the result with Write moves the backup
// GPT to the new end. It returns ErrGrown (wrapped) when there is nothing
// to grow, and refuses to shrink.
func Grow(l Layout, diskBytes int64) (Layout, error) {
	p, i, ok := l.Find(NameData)
	if !ok {
		return Layout{}, fmt.Errorf("growing: no partition named %q", NameData)
	}
	for _, q := range l.Parts {
		if q.FirstLBA > p.FirstLBA {
			return Layout{}, fmt.Errorf("growing: partition %q (LBA %d) lies after %q; only a last partition can grow", q.Name, q.FirstLBA, NameData)
		}
	}
	total := uint64(diskBytes) / SectorSize
	if diskBytes <= 0 || total < l.Sectors {
		return Layout{}, fmt.Errorf("growing: disk of %d bytes is smaller than the table's %d sectors", diskBytes, l.Sectors)
	}
	lastUsable := total - arraySectors - 2
	end := (lastUsable+1)/AlignSectors*AlignSectors - 1
	if end < p.LastLBA {
		return Layout{}, fmt.Errorf("growing: %s would shrink from LBA %d to %d", NameData, p.LastLBA, end)
	}
	if end == p.LastLBA {
		if total != l.Sectors {
			// The partition is as large as it gets, but the backup GPT is
			// not at the end: still rewrite the table.
			out := l.clone()
			out.Sectors = total
			return out, nil
		}
		return Layout{}, fmt.Errorf("growing %s (LBA %d-%d on %d sectors): %w", NameData, p.FirstLBA, p.LastLBA, total, ErrGrown)
	}
	out := l.clone()
	out.Sectors = total
	out.Parts[i].LastLBA = end
	return out, out.Validate()
}

func (l Layout) clone() Layout {
	l.Parts = append([]Part(nil), l.Parts...)
	return l
}

// String is a short human form for logs and errors.
func (l Layout) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "disk %s, %d sectors:", l.DiskGUID, l.Sectors)
	for i, p := range l.Parts {
		fmt.Fprintf(&b, " %d=%s[%d-%d]", i+1, p.Name, p.FirstLBA, p.LastLBA)
	}
	return b.String()
}
