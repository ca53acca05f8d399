// Package raid assembles berth's instance-store arrays with the kernel's
// device-mapper, through its ioctls on /dev/mapper/control: the `striped`
// target for RAID0 and the `raid` target (dm-raid, which drives md's raid10
// personality) for RAID10. No mdadm is shipped.
//
// Why device-mapper and not md: md's ioctls (SET_ARRAY_INFO, ADD_NEW_DISK,
// RUN_ARRAY) only let the kernel write superblocks in the old 0.90 format,
// which caps member size (4 TiB; i3en disks are 7.5 TB) and sits at the end
// of the device; the modern v1.2 superblock is written by mdadm in
// userspace, which would mean re-implementing mdadm's on-disk format.
// device-mapper keeps no metadata on disk of its own: berth's GPT mark
// (package partition: array ID, member index and count) is the array's
// identity, and on every boot berth loads the same table from it. RAID0
// needs nothing more. For RAID10, each member partition is split with two
// `linear` devices into a 4 MiB metadata area and the data area (as LVM's
// rmeta/rimage): dm-raid keeps its superblock and write-intent bitmap there,
// so a reboot resyncs only dirty regions, and a zeroed metadata area (berth
// zeroes it when it partitions) is how dm-raid knows the array is new. (Without
// metadata devices the 6.1 kernel refuses raid10: "unsupported raid10
// layout: 0x0", as it only sets the layout up for new arrays.)
//
// Code that decides (the table text, sizes, alignment) is pure and tested;
// the ioctl client acts.
package raid

import (
	"fmt"
	"strings"
)

// ChunkSectors is the stripe chunk, 512 KiB: the mdadm default, large
// enough that NVMe sees whole-MiB-ish requests and small enough to spread
// a container image layer over every disk.
const ChunkSectors = 1024

// Level is the array layout.
type Level string

const (
	RAID0  Level = "raid0"
	RAID10 Level = "raid10"
)

// MinDisks is the fewest members a level accepts.
func (l Level) MinDisks() int {
	if l == RAID10 {
		return 4
	}
	return 2
}

// MetaSectors is the dm-raid metadata area at the start of each RAID10
// member: superblock plus bitmap (one bit per 4 MiB region: 240 KiB for a
// 7.5 TB disk), 4 MiB as LVM uses, a whole number of chunks.
const MetaSectors = 8192

// Member is one array member: the kernel's major:minor of its data device
// and that device's length in 512-byte sectors; MetaDev is the dm-raid
// metadata device (RAID10 only).
type Member struct {
	Dev     string
	Sectors uint64
	MetaDev string
}

// Spec is an array to assemble.
type Spec struct {
	Name    string // device-mapper name, e.g. "berth-is"
	UUID    string // device-mapper UUID, e.g. "BERTH-<array id>"
	Level   Level
	Members []Member
}

// Target is one line of a device-mapper table.
type Target struct {
	Start, Length uint64
	Type          string
	Params        string
}

func (t Target) String() string {
	return fmt.Sprintf("%d %d %s %s", t.Start, t.Length, t.Type, t.Params)
}

// Table computes the single-target table for s. Every member is used for
// the same length, the smallest member rounded down to whole chunks (to
// two chunks for RAID10, so an odd member count still gives a length that
// is a whole number of chunks).
func Table(s Spec) (Target, error) {
	n := len(s.Members)
	if n < s.Level.MinDisks() {
		return Target{}, fmt.Errorf("%s needs at least %d disks, have %d", s.Level, s.Level.MinDisks(), n)
	}
	per := s.Members[0].Sectors
	for _, m := range s.Members {
		if m.Dev == "" || strings.ContainsAny(m.Dev, " \t\n") {
			return Target{}, fmt.Errorf("bad member device %q", m.Dev)
		}
		per = min(per, m.Sectors)
	}
	unit := uint64(ChunkSectors)
	if s.Level == RAID10 {
		unit *= 2
	}
	per = per / unit * unit
	if per == 0 {
		return Target{}, fmt.Errorf("members smaller than one %d KiB chunk", unit/2)
	}
	var b strings.Builder
	switch s.Level {
	case RAID0:
		fmt.Fprintf(&b, "%d %d", n, ChunkSectors)
		for _, m := range s.Members {
			fmt.Fprintf(&b, " %s 0", m.Dev)
		}
		return Target{Length: per * uint64(n), Type: "striped", Params: b.String()}, nil
	case RAID10:
		// near layout, 2 copies: what mdadm --level=10 makes by default.
		fmt.Fprintf(&b, "raid10 5 %d raid10_copies 2 raid10_format near %d", ChunkSectors, n)
		for _, m := range s.Members {
			if m.MetaDev == "" || strings.ContainsAny(m.MetaDev, " \t\n") {
				return Target{}, fmt.Errorf("raid10 member %s: bad metadata device %q", m.Dev, m.MetaDev)
			}
			fmt.Fprintf(&b, " %s %s", m.MetaDev, m.Dev)
		}
		return Target{Length: per * uint64(n) / 2, Type: "raid", Params: b.String()}, nil
	}
	return Target{}, fmt.Errorf("unknown RAID level %q", s.Level)
}

// Split gives the two linear tables that cut a RAID10 member partition
// (dev, sectors long) into its metadata and data devices.
func Split(dev string, sectors uint64) (meta, data Target, err error) {
	if sectors <= MetaSectors+2*ChunkSectors {
		return Target{}, Target{}, fmt.Errorf("raid10 member %s of %d sectors is too small", dev, sectors)
	}
	meta = Target{Length: MetaSectors, Type: "linear", Params: dev + " 0"}
	data = Target{Length: sectors - MetaSectors, Type: "linear", Params: fmt.Sprintf("%s %d", dev, MetaSectors)}
	return meta, data, nil
}

// DataDisks is how many members' worth of data a stripe holds: the sw that
// mkfs.xfs (with su = the chunk) should be given.
func DataDisks(l Level, members int) int {
	if l == RAID10 {
		return max(1, members/2)
	}
	return members
}
