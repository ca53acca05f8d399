// Package sigprobe tells what a block device already holds by reading the
// magic numbers at the start of it, like a tiny blkid. berth uses it to
// refuse instance-store disks that carry someone else's data: anything it
// recognises (or anything non-zero it does not) is "not blank"; and to
// find a NoCloud seed by its label (vfat or iso9660 labelled cidata),
// since a node has no blkid or udev and the kernel shows no filesystem
// labels under /sys.
//
// It is a pure function over the first ReadLen bytes of a device, so it is
// unit-tested and fuzzed without any device.
package sigprobe

import (
	"bytes"
	"encoding/binary"
)

// ReadLen is how many bytes from the start of a device Probe wants. btrfs
// keeps its superblock at 64 KiB, the furthest magic checked.
const ReadLen = 128 << 10

// Kind names what was found, using blkid's TYPE words where there is one.
type Kind string

const (
	// Blank means every byte read was zero: a fresh instance-store disk.
	Blank Kind = "blank"
	// Unknown means non-zero bytes without a recognised magic.
	Unknown  Kind = "unknown data"
	GPT      Kind = "gpt"
	MBR      Kind = "dos"
	XFS      Kind = "xfs"
	Ext4     Kind = "ext4" // ext2/3/4 share one magic; berth only makes ext4
	MDRaid   Kind = "linux_raid_member"
	LVM2     Kind = "LVM2_member"
	Swap     Kind = "swap"
	Btrfs    Kind = "btrfs"
	ISO9660  Kind = "iso9660"
	Squashfs Kind = "squashfs"
	EROFS    Kind = "erofs"
	VFAT     Kind = "vfat" // FAT12, FAT16 and FAT32 alike, as blkid says
	DMRaidSB Kind = "dm-raid metadata"
)

// Signature is what Probe found.
type Signature struct {
	Kind Kind `json:"kind"`
	// Label is the filesystem label, for xfs, ext4, vfat and iso9660
	// (empty otherwise), trailing blanks trimmed for the last two.
	Label string `json:"label,omitempty"`
	// UUID is the filesystem UUID in canonical form, for xfs and ext4.
	UUID string `json:"uuid,omitempty"`
}

// IsFilesystem reports whether the signature is a mountable filesystem.
func (s Signature) IsFilesystem() bool {
	switch s.Kind {
	case XFS, Ext4, Btrfs, ISO9660, Squashfs, EROFS, VFAT:
		return true
	}
	return false
}

// Probe returns the first signature found in b, the leading bytes of a
// device (ReadLen of them, fewer if the device is smaller). Filesystems are
// checked before partition tables because mkfs leaves a stale MBR boot
// signature alone only on some tools; a GPT header beats an MBR signature
// because a GPT disk carries a protective MBR.
func Probe(b []byte) Signature {
	if s, ok := probeFS(b); ok {
		return s
	}
	if at(b, 512, []byte("EFI PART")) {
		return Signature{Kind: GPT}
	}
	if len(b) >= 512 && b[510] == 0x55 && b[511] == 0xaa && hasMBRPartition(b) {
		return Signature{Kind: MBR}
	}
	if isZero(b) {
		return Signature{Kind: Blank}
	}
	return Signature{Kind: Unknown}
}

func probeFS(b []byte) (Signature, bool) {
	switch {
	case at(b, 0, []byte("XFSB")):
		// xfs_sb: sb_uuid at 32, sb_fname[12] at 108.
		return Signature{Kind: XFS, UUID: uuidAt(b, 32), Label: cstr(b, 108, 12)}, true
	case le16(b, 1024+56) == 0xef53:
		// ext4 superblock at 1024: s_magic at 56, s_uuid at 104, s_volume_name[16] at 120.
		return Signature{Kind: Ext4, UUID: uuidAt(b, 1024+104), Label: cstr(b, 1024+120, 16)}, true
	case le32(b, 0) == 0xa92b4efc || le32(b, 4096) == 0xa92b4efc:
		// md superblock v1.1 at 0, v1.2 at 4 KiB (v0.90 and v1.0 sit at
		// the end of the device and are not looked for here).
		return Signature{Kind: MDRaid}, true
	case le32(b, 0) == 0x64526d44: // DM_RAID_MAGIC, dm-raid's superblock on its metadata devices
		return Signature{Kind: DMRaidSB}, true
	case at(b, 512, []byte("LABELONE")) && at(b, 512+24, []byte("LVM2")):
		return Signature{Kind: LVM2}, true
	case at(b, 4096-10, []byte("SWAPSPACE2")) || at(b, 4096-10, []byte("SWAP-SPACE")):
		return Signature{Kind: Swap}, true
	case at(b, 65536+64, []byte("_BHRfS_M")):
		return Signature{Kind: Btrfs}, true
	case at(b, 32768+1, []byte("CD001")):
		return Signature{Kind: ISO9660, Label: isoLabel(b)}, true
	case at(b, 0, []byte("hsqs")):
		return Signature{Kind: Squashfs}, true
	case le32(b, 1024) == 0xe0f5e1e2:
		return Signature{Kind: EROFS}, true
	}
	// Last: a FAT boot sector has no magic number of its own, only fields
	// that must make sense together, and an MBR may look like one.
	if label, ok := fatLabel(b); ok {
		return Signature{Kind: VFAT, Label: label}, true
	}
	return Signature{}, false
}

// isoLabel is the volume identifier of an ISO 9660 primary volume
// descriptor (type 1): the descriptors start at sector 16 (2048-byte
// sectors), and the primary one is usually, not always, the first (an El
// Torito boot record may come before it); a terminator (type 255) ends
// the set. genisoimage -V cidata writes "cidata" padded with blanks.
func isoLabel(b []byte) string {
	const sector, first = 2048, 16
	for off := first * sector; off+sector <= len(b); off += sector {
		if !at(b, off+1, []byte("CD001")) {
			return ""
		}
		switch b[off] {
		case 1:
			return trimLabel(b[off+40 : off+72])
		case 255:
			return ""
		}
	}
	return ""
}

// fatLabel reads a FAT boot sector: ok says the fields agree with one
// (the checks blkid and the kernel's fat_read_bpb make), and label is the
// volume label. The label is read where blkid reads it first, the root
// directory's volume-label entry (what Windows and mlabel change), when
// that entry lies within b; else the boot sector's copy, which mkfs.fat
// -n writes too. "NO NAME" is no label.
func fatLabel(b []byte) (label string, ok bool) {
	if len(b) < 512 {
		return "", false
	}
	if !(b[0] == 0xeb && b[2] == 0x90) && b[0] != 0xe9 {
		return "", false // the x86 jump every FAT boot sector starts with
	}
	bps := int(le16(b, 11))
	spc := int(b[13])
	reserved := int(le16(b, 14))
	fats := int(b[16])
	rootEntries := int(le16(b, 17))
	media := b[21]
	fatSize16 := int(le16(b, 22))
	fatSize32 := int(le32(b, 36))
	switch {
	case bps != 512 && bps != 1024 && bps != 2048 && bps != 4096:
		return "", false
	case spc == 0 || spc&(spc-1) != 0:
		return "", false
	case reserved == 0 || (fats != 1 && fats != 2):
		return "", false
	case media != 0xf0 && media < 0xf8:
		return "", false
	}
	var bootLabel []byte
	rootOff := -1
	switch {
	case fatSize16 != 0 && at(b, 54, []byte("FAT")):
		// FAT12/16: the extended boot record (signature 0x29) at 38, the
		// label at 43; the root directory follows the FATs.
		if b[38] == 0x29 {
			bootLabel = b[43:54]
		}
		rootOff = (reserved + fats*fatSize16) * bps
	case fatSize16 == 0 && fatSize32 != 0 && at(b, 82, []byte("FAT32")):
		// FAT32: the extended boot record at 66, the label at 71; the
		// root directory is a cluster chain from cluster root (only its
		// first cluster is looked at).
		if b[66] == 0x29 {
			bootLabel = b[71:82]
		}
		if root := int(le32(b, 44)); root >= 2 {
			rootOff = (reserved+fats*fatSize32)*bps + (root-2)*spc*bps
		}
		rootEntries = spc * bps / 32
	default:
		return "", false
	}
	if l, found := fatRootLabel(b, rootOff, rootEntries); found {
		return l, true
	}
	if l := trimLabel(bootLabel); l != "NO NAME" {
		return l, true
	}
	return "", true
}

// fatRootLabel finds the volume-label entry (attribute 0x08, not a long
// name's 0x0f) among the first entries of the root directory at off,
// stopping at the end-of-directory entry (first byte 0) or at the end of
// b. found is false when the directory is not within b or holds no label.
func fatRootLabel(b []byte, off, entries int) (string, bool) {
	if off <= 0 {
		return "", false
	}
	for i := 0; i < entries && off+32*(i+1) <= len(b); i++ {
		e := b[off+32*i : off+32*(i+1)]
		switch {
		case e[0] == 0:
			return "", false
		case e[0] == 0xe5:
			continue // deleted
		case e[11]&0x3f == 0x0f:
			continue // a long name's part
		case e[11]&0x18 == 0x08:
			return trimLabel(e[:11]), true
		}
	}
	return "", false
}

// trimLabel makes a blank-padded label a string: trailing blanks and
// NULs dropped, invalid UTF-8 replaced.
func trimLabel(s []byte) string {
	s = bytes.TrimRight(s, " \x00")
	return string(bytes.ToValidUTF8(s, []byte("?")))
}

// hasMBRPartition tells a real MBR from a stray 0x55AA: at least one of the
// four entries has a type and a size.
func hasMBRPartition(b []byte) bool {
	for i := range 4 {
		e := b[446+16*i : 446+16*(i+1)]
		if e[4] != 0 && binary.LittleEndian.Uint32(e[12:16]) != 0 {
			return true
		}
	}
	return false
}

func at(b []byte, off int, magic []byte) bool {
	return len(b) >= off+len(magic) && bytes.Equal(b[off:off+len(magic)], magic)
}

func le16(b []byte, off int) uint16 {
	if len(b) < off+2 {
		return 0
	}
	return binary.LittleEndian.Uint16(b[off:])
}

func le32(b []byte, off int) uint32 {
	if len(b) < off+4 {
		return 0
	}
	return binary.LittleEndian.Uint32(b[off:])
}

func cstr(b []byte, off, n int) string {
	if len(b) < off+n {
		return ""
	}
	s := b[off : off+n]
	if i := bytes.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	return string(bytes.ToValidUTF8(s, []byte("?")))
}

// uuidAt formats 16 bytes stored in big-endian (RFC 4122) order, as xfs and
// ext4 both store theirs.
func uuidAt(b []byte, off int) string {
	if len(b) < off+16 {
		return ""
	}
	u := b[off : off+16]
	const hex = "0123456789abcdef"
	out := make([]byte, 0, 36)
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, hex[c>>4], hex[c&15])
	}
	return string(out)
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
