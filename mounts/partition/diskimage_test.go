package partition

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

// testDiskLayout is the table image/disk plans for an ESP of 30 MiB, a
// root of 200 MiB and 5 bytes and a data partition of 64 MiB.
func testDiskLayout() DiskLayout {
	disk := UUIDv5(Namespace, "test disk image")
	fs, _ := ParseUUID(TypeLinuxFS)
	return DiskLayout{DiskGUID: disk, Sectors: (1 + 30 + 201 + 64 + 1) * 2048, Parts: []DiskPart{
		{Name: NameESP, Type: fs, GUID: UUIDv5(disk, "esp"), FirstLBA: 2048, LastLBA: 2048 + 30*2048 - 1},
		{Name: NameRoot, Type: fs, GUID: UUIDv5(disk, "root"), FirstLBA: 2048 + 30*2048, LastLBA: 2048 + 231*2048 - 1},
		{Name: NameData, Type: fs, GUID: UUIDv5(disk, "data"), FirstLBA: 2048 + 231*2048, LastLBA: 2048 + 295*2048 - 1},
	}}
}

// diskImageFile makes a sparse file of size bytes and writes l's table on
// it.
func diskImageFile(t *testing.T, l DiskLayout, size int64) *os.File {
	t.Helper()
	f := diskImage(t, size)
	if err := WriteDisk(f, l); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestDiskRoundTrip(t *testing.T) {
	l := testDiskLayout()
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	f := diskImageFile(t, l, l.Size())
	got, err := ReadDisk(f, l.Size())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, l) {
		t.Fatalf("read back\n%v\nwrote\n%v", got, l)
	}
	// The disk image's table is not an instance-store mark.
	if _, _, err := Read(f); !errors.Is(err, ErrNotBerth) {
		t.Fatalf("instance-store Read of a disk image: %v, want ErrNotBerth", err)
	}
}

// TestGrow is the first-boot path over image files: a larger disk, the
// grow, a re-read, then a second boot that finds nothing to do.
func TestGrow(t *testing.T) {
	l := testDiskLayout()
	big := int64(1<<30) + 12345 // not a whole MiB, like a real disk may be
	f := diskImageFile(t, l, l.Size())
	if err := f.Truncate(big); err != nil { // the volume grew under the image
		t.Fatal(err)
	}
	cur, err := ReadDisk(f, big)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Grow(cur, big)
	if err != nil {
		t.Fatal(err)
	}
	total := uint64(big) / SectorSize
	p, _, _ := g.Find(NameData)
	if (p.LastLBA+1)%AlignSectors != 0 || p.LastLBA > total-34 || total-34-p.LastLBA > AlignSectors {
		t.Fatalf("data partition ends at LBA %d on a disk of %d sectors", p.LastLBA, total)
	}
	if g.Parts[0] != l.Parts[0] || g.Parts[1] != l.Parts[1] || p.FirstLBA != l.Parts[2].FirstLBA {
		t.Fatal("grow moved something other than the data partition's end")
	}
	if err := WriteDisk(f, g); err != nil {
		t.Fatal(err)
	}
	again, err := ReadDisk(f, big)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again, g) {
		t.Fatalf("after grow read\n%v\nwant\n%v", again, g)
	}
	if _, err := Grow(again, big); !errors.Is(err, ErrGrown) {
		t.Fatalf("second grow: %v, want ErrGrown", err)
	}
	if _, err := Grow(l, l.Size()); !errors.Is(err, ErrGrown) {
		t.Fatalf("grow of the image at its own size: %v, want ErrGrown", err)
	}
	if _, err := Grow(g, l.Size()); err == nil {
		t.Fatal("shrinking disk accepted")
	}
}

// TestGrowMovesBackupOnly: a disk less than a MiB larger than the table
// cannot give the data partition more, but the backup GPT must still move
// to the disk's end (firmware and the kernel check it is there).
func TestGrowMovesBackupOnly(t *testing.T) {
	l := testDiskLayout()
	size := l.Size() + 10*SectorSize
	g, err := Grow(l, size)
	if err != nil {
		t.Fatal(err)
	}
	if g.Sectors != uint64(size)/SectorSize || g.Parts[2] != l.Parts[2] {
		t.Fatalf("grow to %d bytes gave %v", size, g)
	}
	f := diskImageFile(t, l, size)
	if err := WriteDisk(f, g); err != nil {
		t.Fatal(err)
	}
	again, err := ReadDisk(f, size)
	if err != nil || again.Sectors != g.Sectors {
		t.Fatalf("after rewrite: %v, %v", again, err)
	}
	if _, err := Grow(again, size); !errors.Is(err, ErrGrown) {
		t.Fatalf("then: %v, want ErrGrown", err)
	}
}

func TestGrowRefusesDataNotLast(t *testing.T) {
	l := testDiskLayout()
	l.Parts[1].Name, l.Parts[2].Name = NameData, NameRoot
	if _, err := Grow(l, 4<<30); err == nil {
		t.Fatal("grew a data partition that is not last")
	}
	l = testDiskLayout()
	l.Parts = l.Parts[:2]
	if _, err := Grow(l, 4<<30); err == nil {
		t.Fatal("grew a table without a data partition")
	}
}

func TestReadDiskRejects(t *testing.T) {
	l := testDiskLayout()
	f := diskImageFile(t, l, l.Size())
	if _, err := ReadDisk(f, l.Size()-512); err == nil || !strings.Contains(err.Error(), "backup at LBA") {
		t.Errorf("backup header beyond the disk: %v", err)
	}
	empty := bytes.NewReader(make([]byte, 1<<20))
	if _, err := ReadDisk(empty, 1<<20); err == nil || !strings.Contains(err.Error(), "no valid GPT") {
		t.Errorf("blank disk: %v", err)
	}
	// An instance-store disk has a valid GPT, but no berth-data to grow.
	is := diskImage(t, 64<<20)
	if _, err := Write(is, 64<<20, Mark{Layout: "mount", Array: ArrayID("mount", []string{"a"}), Count: 1}); err != nil {
		t.Fatal(err)
	}
	got, err := ReadDisk(is, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Grow(got, 64<<20); err == nil {
		t.Error("grew an instance-store table")
	}
	bad := l.clone()
	bad.Parts[1].FirstLBA = bad.Parts[0].LastLBA
	if err := bad.Validate(); err == nil {
		t.Error("overlap accepted")
	}
}

// The disk image's table and the instance-store one share the writer: same
// protective MBR and headers, so the same firmware and kernel read both.
func TestDiskTableHeaders(t *testing.T) {
	l := testDiskLayout()
	pt, err := l.Table()
	if err != nil {
		t.Fatal(err)
	}
	if pt.Primary.BackupLBA != l.Sectors-1 || pt.Backup.PartStart != l.Sectors-1-arraySectors || pt.Primary.FirstLBA != 34 {
		t.Fatalf("headers %+v / %+v", pt.Primary.Header, pt.Backup.Header)
	}
	if _, err := (DiskLayout{Sectors: 10}).Table(); err == nil {
		t.Fatal("table for a 10-sector disk")
	}
}

// FuzzReadDisk: ReadDisk parses a disk berth did not necessarily write; it
// must not panic or allocate wildly whatever the first and last sectors
// hold.
func FuzzReadDisk(f *testing.F) {
	disk := UUIDv5(Namespace, "fuzz disk image")
	l := DiskLayout{DiskGUID: disk, Sectors: 5 * 2048, Parts: []DiskPart{
		{Name: NameESP, GUID: UUIDv5(disk, "esp"), FirstLBA: 2048, LastLBA: 4095},
		{Name: NameRoot, GUID: UUIDv5(disk, "root"), FirstLBA: 4096, LastLBA: 6143},
		{Name: NameData, GUID: UUIDv5(disk, "data"), FirstLBA: 6144, LastLBA: 8191},
	}}
	for i := range l.Parts {
		l.Parts[i].Type, _ = ParseUUID(TypeLinuxFS)
	}
	buf := &memDisk{b: make([]byte, l.Size())}
	if err := WriteDisk(buf, l); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.b[:34*512], buf.b[len(buf.b)-33*512:])
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, head, tail []byte) {
		d := make([]byte, l.Size())
		copy(d, head)
		copy(d[len(d)-min(len(tail), len(d)):], tail)
		got, err := ReadDisk(bytes.NewReader(d), int64(len(d)))
		if err == nil {
			if verr := got.Validate(); verr != nil {
				t.Fatalf("ReadDisk returned an invalid layout: %v", verr)
			}
		}
	})
}

func TestParseSlot(t *testing.T) {
	for in, want := range map[string]string{"a": "berth-root-a", "b": "berth-root-b"} {
		s, err := ParseSlot(in)
		if err != nil || s.PartName() != want || s.Other().Other() != s || s.Other() == s {
			t.Errorf("ParseSlot(%q) = %q (%s, other %q), %v; want %s", in, s, s.PartName(), s.Other(), err, want)
		}
	}
	for _, in := range []string{"", "c", "A", " a", "a\n", "berth-root-a"} {
		if s, err := ParseSlot(in); err == nil || !strings.Contains(err.Error(), SlotKey+"=") {
			t.Errorf("ParseSlot(%q) = %q, %v; want an error naming %s", in, s, err, SlotKey)
		}
	}
}
