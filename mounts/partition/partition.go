// Package partition writes and recognises berth's GPTs: the one on an
// instance-store disk, and the node's side of the disk image's (see
// diskimage.go: the partition names, reading the table, the first-boot
// grow of the data partition, finding a partition by name in sysfs).
// image/disk plans and assembles the image from the same definitions.
//
// On an instance-store disk the table holds one 1 MiB-aligned partition
// covering the disk, whose name and GUIDs say that berth made it, for which
// layout, and which member of which array the disk is.
//
// The mark, all derived so that a reboot recognises its own disks and the
// same disks always give the same identity:
//
//   - disk GUID      = the array ID: UUIDv5(Namespace, layout + member serials);
//   - partition GUID = UUIDv5(array ID, "member/<index>");
//   - partition name = "berth-is <layout> <index+1>/<count>", e.g. "berth-is raid0 1/2";
//   - type GUID      = Linux RAID for array members, Linux filesystem otherwise.
//
// A table is berth's only when the name parses and the partition GUID is
// the one derived from the disk GUID; a table someone else wrote with a
// look-alike name is foreign. device-mapper keeps no metadata on disk, so
// this mark is the array's identity (see package raid).
//
// Writing uses u-root's pkg/mount/gpt (protective MBR, primary and backup
// GPT with their CRCs); it assumes 512-byte logical blocks, which EC2
// (instance store and EBS) and QEMU's NVMe use. BLKPG (blkpg_linux.go)
// tells the kernel about a partition berth added or grew.
package partition

import (
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"

	ugpt "github.com/u-root/u-root/pkg/mount/gpt"
)

const (
	// SectorSize is the logical block size berth's GPT assumes.
	SectorSize = ugpt.BlockSize
	// AlignSectors puts partition boundaries on 1 MiB.
	AlignSectors = (1 << 20) / SectorSize
	// NamePrefix starts every berth partition name.
	NamePrefix = "berth-is"
	// nParts/partEntrySize: the standard 128 x 128-byte entry array (32 sectors).
	nParts        = 128
	partEntrySize = 128
	arraySectors  = nParts * partEntrySize / SectorSize
	// minSectors is the smallest disk a GPT fits on: MBR, both headers
	// and both entry arrays.
	minSectors = 2 * (2 + arraySectors)
)

// Type GUIDs, canonical text form.
const (
	TypeLinuxRAID = "a19d880f-05fc-4d3b-a006-743f0f84911e"
	TypeLinuxFS   = "0fc63daf-8483-4772-8e79-3d69d8477de4"
)

// Namespace is berth's UUIDv5 namespace for instance-store identities.
// Changing it would make every existing berth disk look foreign.
var Namespace = UUID{0x6b, 0x1e, 0x7a, 0x52, 0x3c, 0x0d, 0x4f, 0x8e, 0x9b, 0x41, 0x0c, 0x5e, 0x2d, 0x8a, 0x17, 0xb3}

// UUID is 16 bytes in RFC 4122 (big-endian) order.
type UUID [16]byte

func (u UUID) String() string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// ParseUUID reads the canonical 36-character form.
func ParseUUID(s string) (UUID, error) {
	var u UUID
	h := strings.ReplaceAll(s, "-", "")
	if len(s) != 36 || len(h) != 32 {
		return u, fmt.Errorf("bad UUID %q", s)
	}
	for i := range 16 {
		v, err := strconv.ParseUint(h[2*i:2*i+2], 16, 8)
		if err != nil {
			return u, fmt.Errorf("bad UUID %q: %w", s, err)
		}
		u[i] = byte(v)
	}
	return u, nil
}

// UUIDv5 is the RFC 4122 name-based (SHA-1) UUID of name in ns.
func UUIDv5(ns UUID, name string) UUID {
	h := sha1.New()
	h.Write(ns[:])
	h.Write([]byte(name))
	var u UUID
	copy(u[:], h.Sum(nil))
	u[6] = (u[6] & 0x0f) | 0x50
	u[8] = (u[8] & 0x3f) | 0x80
	return u
}

// ArrayID derives the identity of the array (or disk set) that layout makes
// of the disks with these serials, in member order.
func ArrayID(layout string, serials []string) UUID {
	return UUIDv5(Namespace, "array\x00"+layout+"\x00"+strings.Join(serials, "\x00"))
}

// MemberGUID is the unique partition GUID of member index of array.
func MemberGUID(array UUID, index int) UUID {
	return UUIDv5(array, "member/"+strconv.Itoa(index))
}

// Mark is what berth's GPT says about a disk.
type Mark struct {
	Layout string // raid0, raid10, mount
	Array  UUID
	Index  int // 0-based member index
	Count  int
	// RAIDMember selects the Linux RAID type GUID.
	RAIDMember bool
}

// Name is the partition name for m.
func (m Mark) Name() string {
	return fmt.Sprintf("%s %s %d/%d", NamePrefix, m.Layout, m.Index+1, m.Count)
}

func parseName(s string) (layout string, index, count int, ok bool) {
	f := strings.Fields(s)
	if len(f) != 3 || f[0] != NamePrefix {
		return "", 0, 0, false
	}
	a, b, ok := strings.Cut(f[2], "/")
	if !ok {
		return "", 0, 0, false
	}
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || i < 1 || n < 1 || i > n || n > 1024 {
		return "", 0, 0, false
	}
	return f[1], i - 1, n, true
}

// Geometry is where the one partition sits, in sectors.
type Geometry struct {
	FirstLBA, LastLBA uint64 // inclusive
}

// Sectors is the partition's length.
func (g Geometry) Sectors() uint64 { return g.LastLBA - g.FirstLBA + 1 }

// Layout computes the partition of a disk of size bytes: from 1 MiB to the
// last whole MiB before the backup GPT.
func Layout(size int64) (Geometry, error) {
	total := uint64(size) / SectorSize
	// MBR + header + array at the front, array + header at the back, and
	// at least one aligned MiB between.
	if size <= 0 || total < 2*AlignSectors+1+arraySectors+1 {
		return Geometry{}, fmt.Errorf("disk of %d bytes is too small for a 1 MiB-aligned partition", size)
	}
	lastUsable := total - 1 - arraySectors - 1
	end := (lastUsable+1)/AlignSectors*AlignSectors - 1
	return Geometry{FirstLBA: AlignSectors, LastLBA: end}, nil
}

// Table builds the protective MBR and both GPT copies for a disk of size
// bytes carrying m.
func Table(m Mark, size int64) (*ugpt.PartitionTable, Geometry, error) {
	geo, err := Layout(size)
	if err != nil {
		return nil, Geometry{}, err
	}
	if m.Index < 0 || m.Count < 1 || m.Index >= m.Count || m.Layout == "" || strings.ContainsAny(m.Layout, " \t/") {
		return nil, Geometry{}, fmt.Errorf("invalid partition mark %+v", m)
	}
	total := uint64(size) / SectorSize
	typ := TypeLinuxFS
	if m.RAIDMember {
		typ = TypeLinuxRAID
	}
	tg, _ := ParseUUID(typ)
	part := ugpt.Part{
		PartGUID:   ToGUID(tg),
		UniqueGUID: ToGUID(MemberGUID(m.Array, m.Index)),
		FirstLBA:   geo.FirstLBA,
		LastLBA:    geo.LastLBA,
		Name:       EncodeName(m.Name()),
	}
	parts := make([]ugpt.Part, nParts)
	parts[0] = part
	return newTable(m.Array, total, parts), geo, nil
}

// newTable is the protective MBR and both GPT copies, with the standard
// entry array, of a disk of total sectors holding parts (nParts entries).
func newTable(disk UUID, total uint64, parts []ugpt.Part) *ugpt.PartitionTable {
	last := total - 1
	hdr := ugpt.Header{
		Signature:  ugpt.Signature,
		Revision:   ugpt.Revision,
		HeaderSize: ugpt.HeaderSize,
		CurrentLBA: 1,
		BackupLBA:  last,
		FirstLBA:   2 + arraySectors,
		LastLBA:    last - arraySectors - 1,
		DiskGUID:   ToGUID(disk),
		PartStart:  2,
		NPart:      nParts,
		PartSize:   partEntrySize,
	}
	backup := hdr
	backup.CurrentLBA, backup.BackupLBA = last, 1
	backup.PartStart = last - arraySectors
	backupParts := append([]ugpt.Part(nil), parts...)

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
		Backup:           &ugpt.GPT{Header: backup, Parts: backupParts},
	}
}

// Write puts berth's GPT for m on w, a disk of size bytes. It zeroes the
// first MiB of the partition too, so a stale signature from whatever the
// disk held before (only possible when the caller chose to claim a foreign
// disk) cannot be mistaken for the new contents.
func Write(w io.WriterAt, size int64, m Mark) (Geometry, error) {
	pt, geo, err := Table(m, size)
	if err != nil {
		return Geometry{}, err
	}
	zero := make([]byte, 1<<20)
	if _, err := w.WriteAt(zero, int64(geo.FirstLBA)*SectorSize); err != nil {
		return Geometry{}, fmt.Errorf("zeroing the start of the partition: %w", err)
	}
	if err := ugpt.Write(w, pt); err != nil {
		return Geometry{}, fmt.Errorf("writing GPT: %w", err)
	}
	return geo, nil
}

// ErrNotBerth says the disk has no GPT, or one berth did not write.
var ErrNotBerth = errors.New("not a berth instance-store partition table")

// Read recognises berth's GPT on r. It returns ErrNotBerth (wrapped, with
// what was found) when there is no valid GPT or it is not berth's.
func Read(r io.ReaderAt) (Mark, Geometry, error) {
	if err := checkHeaders(r, 0); err != nil {
		return Mark{}, Geometry{}, fmt.Errorf("%w: %v", ErrNotBerth, err)
	}
	pt, err := ugpt.New(r)
	if err != nil || pt.Primary == nil {
		return Mark{}, Geometry{}, fmt.Errorf("%w: no valid GPT (%v)", ErrNotBerth, err)
	}
	g := pt.Primary
	var found []ugpt.Part
	for _, p := range g.Parts {
		if p.PartGUID != (ugpt.GUID{}) {
			found = append(found, p)
		}
	}
	if len(found) != 1 {
		return Mark{}, Geometry{}, fmt.Errorf("%w: GPT with %d partitions", ErrNotBerth, len(found))
	}
	p := found[0]
	name := DecodeName(p.Name)
	layout, idx, count, ok := parseName(name)
	if !ok {
		return Mark{}, Geometry{}, fmt.Errorf("%w: GPT partition named %q", ErrNotBerth, name)
	}
	array := FromGUID(g.DiskGUID)
	if FromGUID(p.UniqueGUID) != MemberGUID(array, idx) {
		return Mark{}, Geometry{}, fmt.Errorf("%w: partition %q has GUID %s, not the one berth derives from disk GUID %s", ErrNotBerth, name, FromGUID(p.UniqueGUID), array)
	}
	raidT, _ := ParseUUID(TypeLinuxRAID)
	return Mark{Layout: layout, Array: array, Index: idx, Count: count, RAIDMember: FromGUID(p.PartGUID) == raidT},
		Geometry{FirstLBA: p.FirstLBA, LastLBA: p.LastLBA}, nil
}

// checkHeaders guards ugpt.New, which allocates NPart*PartSize bytes as
// each header says and reads the backup where the primary says: a corrupt
// or hostile disk must not make PID 1 allocate gigabytes or read past the
// disk. Only the standard entry array berth writes is accepted, at LBA 2
// in the primary. size is the disk's size in bytes when the caller knows
// it (0 when not): the backup header must then lie on the disk.
func checkHeaders(r io.ReaderAt, size int64) error {
	off := int64(ugpt.HeaderOff)
	for _, which := range []string{"primary", "backup"} {
		var h ugpt.Header
		if err := binary.Read(io.NewSectionReader(r, off, ugpt.HeaderSize), binary.LittleEndian, &h); err != nil {
			return fmt.Errorf("no valid GPT (reading %s header: %v)", which, err)
		}
		if h.Signature != ugpt.Signature {
			return fmt.Errorf("no valid GPT (%s header has no signature)", which)
		}
		if h.PartSize != partEntrySize || h.NPart == 0 || h.NPart > nParts {
			return fmt.Errorf("GPT %s header with %d entries of %d bytes", which, h.NPart, h.PartSize)
		}
		if h.BackupLBA > math.MaxInt64/SectorSize {
			return fmt.Errorf("GPT %s header points at LBA %d", which, h.BackupLBA)
		}
		if which == "primary" {
			if h.PartStart != 2 {
				return fmt.Errorf("GPT primary header puts the entry array at LBA %d, want 2", h.PartStart)
			}
			if h.BackupLBA < minSectors {
				return fmt.Errorf("GPT primary header puts the backup at LBA %d: a disk of fewer than %d sectors holds no GPT", h.BackupLBA, minSectors)
			}
			if size > 0 && h.BackupLBA >= uint64(size)/SectorSize {
				return fmt.Errorf("GPT primary header puts the backup at LBA %d, disk has %d sectors", h.BackupLBA, size/SectorSize)
			}
		}
		off = int64(h.BackupLBA) * SectorSize
	}
	return nil
}

// ToGUID converts RFC 4122 byte order to GPT's mixed-endian fields.
func ToGUID(u UUID) ugpt.GUID {
	var g ugpt.GUID
	g.L = binary.BigEndian.Uint32(u[0:4])
	g.W1 = binary.BigEndian.Uint16(u[4:6])
	g.W2 = binary.BigEndian.Uint16(u[6:8])
	copy(g.B[:], u[8:16])
	return g
}

// FromGUID is ToGUID's inverse.
func FromGUID(g ugpt.GUID) UUID {
	var u UUID
	binary.BigEndian.PutUint32(u[0:4], g.L)
	binary.BigEndian.PutUint16(u[4:6], g.W1)
	binary.BigEndian.PutUint16(u[6:8], g.W2)
	copy(u[8:16], g.B[:])
	return u
}

// EncodeName is a GPT partition name: UTF-16LE, cut to the 36 units GPT has.
func EncodeName(s string) ugpt.PartName {
	var n ugpt.PartName
	for i, c := range utf16.Encode([]rune(s)) {
		if 2*i+1 >= len(n) {
			break
		}
		binary.LittleEndian.PutUint16(n[2*i:], c)
	}
	return n
}

// DecodeName reads a GPT partition name up to its first NUL.
func DecodeName(n ugpt.PartName) string {
	var u []uint16
	for i := 0; i+1 < len(n); i += 2 {
		c := binary.LittleEndian.Uint16(n[i:])
		if c == 0 {
			break
		}
		u = append(u, c)
	}
	return string(utf16.Decode(u))
}
