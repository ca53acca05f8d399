package localstorage

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/berth-node/berth/mounts/instancestore"
	"github.com/berth-node/berth/mounts/partition"
	"github.com/berth-node/berth/mounts/raid"
	"github.com/berth-node/berth/mounts/sigprobe"
)

// DiskState is a discovered disk and what it was found to hold.
type DiskState struct {
	Disk instancestore.Disk
	// Mark is berth's GPT mark, when the disk carries one.
	Mark *partition.Mark
	// Found is what the start of the disk holds when it is not berth's
	// (sigprobe.Blank for a fresh disk).
	Found sigprobe.Signature
}

// Member is one disk's role in the decision.
type Member struct {
	Disk instancestore.Disk
	Mark partition.Mark
}

// Volume is one filesystem to have and mount: over the array, or over one
// member's partition (single disk, Mount strategy).
type Volume struct {
	// Member is the index in Decision.Members whose partition holds the
	// filesystem, or -1 for the array.
	Member int
	Label  string
	UUID   string // derived from the array ID, so a reboot can tell it is ours
	Mount  string
}

// Decision is what the phase will do.
type Decision struct {
	Layout  string // raid0, raid10, mount
	ArrayID partition.UUID
	// Create says the disks get fresh partition tables and filesystems;
	// false means berth's layout is there already and is reused as is.
	Create bool
	// Reclaimed describes disks Force let berth overwrite, and what they held.
	Reclaimed []string
	Members   []Member
	// Level is set when a device-mapper array is assembled.
	Level   raid.Level
	Volumes []Volume
	Binds   []Bind
}

// FSLabel is the filesystem label of berth's array or single disk; the
// Mount strategy's disks are FSLabel-0, FSLabel-1, ... (xfs labels are at
// most 12 bytes).
const FSLabel = "berth-is"

// FSUUID derives a volume's filesystem UUID from the array identity.
func FSUUID(array partition.UUID, volume int) string {
	return partition.UUIDv5(array, "filesystem/"+strconv.Itoa(volume)).String()
}

// Decide is the pure heart of the phase: from the options and the disks
// found, what to build or reuse. It refuses (with an error naming the disk
// and what it holds) whenever going on would destroy data berth did not
// write, unless o.Force.
func Decide(o Options, disks []DiskState) (Decision, error) {
	o, err := o.withDefaults()
	if err != nil {
		return Decision{}, err
	}
	n := len(disks)
	if n == 0 || o.Strategy == StrategyNone {
		return Decision{}, fmt.Errorf("nothing to do")
	}
	var d Decision
	switch o.Strategy {
	case StrategyRAID0:
		d.Layout = "raid0"
		if n > 1 {
			d.Level = raid.RAID0
		}
	case StrategyRAID10:
		d.Layout = "raid10"
		d.Level = raid.RAID10
		if n < 4 {
			return Decision{}, fmt.Errorf("strategy RAID10 needs at least 4 instance-store disks, found %d (%s)", n, diskNames(disks))
		}
	case StrategyMount:
		d.Layout = "mount"
	}
	serials := make([]string, n)
	for i, ds := range disks {
		serials[i] = ds.Disk.Serial
	}
	d.ArrayID = partition.ArrayID(d.Layout, serials)
	for i, ds := range disks {
		d.Members = append(d.Members, Member{Disk: ds.Disk, Mark: partition.Mark{
			Layout: d.Layout, Array: d.ArrayID, Index: i, Count: n, RAIDMember: d.Level != "",
		}})
	}

	// Reuse only when every disk carries exactly the mark berth would write
	// now: same layout, same member set, same positions.
	ours, blank := 0, 0
	var problems []string
	for i, ds := range disks {
		switch {
		case ds.Mark != nil && *ds.Mark == d.Members[i].Mark:
			ours++
		case ds.Mark != nil:
			problems = append(problems, fmt.Sprintf("disk %s (serial %s) is berth's %s member %d/%d of array %s, not member %d/%d of the configured %s array %s",
				ds.Disk.Path, ds.Disk.Serial, ds.Mark.Layout, ds.Mark.Index+1, ds.Mark.Count, ds.Mark.Array, i+1, n, d.Layout, d.ArrayID))
		case ds.Found.Kind == sigprobe.Blank:
			blank++
		default:
			problems = append(problems, fmt.Sprintf("disk %s (serial %s) holds %s that berth did not create", ds.Disk.Path, ds.Disk.Serial, describe(ds.Found)))
		}
	}
	switch {
	case ours == n:
		d.Create = false
	case blank == n:
		d.Create = true
	case o.Force:
		d.Create = true
		d.Reclaimed = problems
		if ours > 0 {
			d.Reclaimed = append(d.Reclaimed, fmt.Sprintf("%d disk(s) already carried this layout's marks and are re-created with the others", ours))
		}
	default:
		if ours > 0 && len(problems) == 0 {
			problems = append(problems, fmt.Sprintf("%d of %d disks carry berth's marks for this array and %d are blank (a member was replaced?)", ours, n, blank))
		}
		return Decision{}, fmt.Errorf("refusing to format: %s; leaving all instance-store disks alone (set force to claim them)", strings.Join(problems, "; "))
	}

	if d.Layout == "mount" {
		for i := range disks {
			d.Volumes = append(d.Volumes, Volume{Member: i, Label: fmt.Sprintf("%s-%d", FSLabel, i), UUID: FSUUID(d.ArrayID, i), Mount: path.Join(o.MountPath, strconv.Itoa(i))})
		}
		return d, nil
	}
	v := Volume{Member: -1, Label: FSLabel, UUID: FSUUID(d.ArrayID, 0), Mount: path.Join(o.MountPath, "0")}
	if d.Level == "" {
		v.Member = 0
	}
	d.Volumes = []Volume{v}
	d.Binds = binds(v.Mount, o.DisabledMounts)
	return d, nil
}

// FSAction decides what to do with a volume's device after partitioning
// and assembly: make the filesystem (mkfs true), mount what is there, or
// refuse. created says berth has just written the partition tables.
func FSAction(created bool, v Volume, fstype string, found sigprobe.Signature) (mkfs bool, err error) {
	if created {
		return true, nil
	}
	switch {
	case found.IsFilesystem() && found.UUID == v.UUID:
		return false, nil
	case found.Kind == sigprobe.Blank:
		// berth's partitions but no filesystem yet: the previous boot
		// stopped between partitioning and mkfs.
		return true, nil
	default:
		return false, fmt.Errorf("berth's partitions hold %s, not the filesystem berth made (uuid %s); not formatting", describe(found), v.UUID)
	}
}

// MkfsArgs is the mkfs command line (argv[1:]) for a volume. su/sw give
// XFS (stride/stripe-width ext4) the array geometry so allocation groups
// and log writes align to whole chunks. Discard is skipped: instance store
// arrives zeroed, and discarding terabytes costs seconds of boot.
func MkfsArgs(fstype string, v Volume, level raid.Level, members int, dev string) []string {
	switch fstype {
	case "ext4":
		args := []string{"-q", "-F", "-L", v.Label, "-U", v.UUID, "-E", "nodiscard"}
		if level != "" {
			stride := raid.ChunkSectors * 512 / 4096
			args[len(args)-1] = fmt.Sprintf("nodiscard,stride=%d,stripe_width=%d", stride, stride*raid.DataDisks(level, members))
		}
		return append(args, dev)
	default:
		args := []string{"-q", "-f", "-K", "-L", v.Label, "-m", "uuid=" + v.UUID}
		if level != "" {
			args = append(args, "-d", fmt.Sprintf("su=%dk,sw=%d", raid.ChunkSectors/2, raid.DataDisks(level, members)))
		}
		return append(args, dev)
	}
}

func describe(s sigprobe.Signature) string {
	out := string(s.Kind)
	switch s.Kind {
	case sigprobe.Unknown:
		return "non-zero data of no known format"
	case sigprobe.GPT:
		return "a GPT partition table"
	case sigprobe.MBR:
		return "an MBR partition table"
	}
	if s.IsFilesystem() {
		article := "a "
		if strings.ContainsRune("aeiox", rune(out[0])) { // an xfs, an ext4, an iso9660
			article = "an "
		}
		out = article + out + " filesystem"
	}
	var attrs []string
	if s.Label != "" {
		attrs = append(attrs, fmt.Sprintf("label %q", s.Label))
	}
	if s.UUID != "" {
		attrs = append(attrs, "uuid "+s.UUID)
	}
	if len(attrs) > 0 {
		out += " (" + strings.Join(attrs, ", ") + ")"
	}
	return out
}

func diskNames(ds []DiskState) string {
	var s []string
	for _, d := range ds {
		s = append(s, d.Disk.Path)
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
