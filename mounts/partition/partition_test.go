package partition

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-node/berth/mounts/sigprobe"
	ugpt "github.com/u-root/u-root/pkg/mount/gpt"
)

func diskImage(t *testing.T, size int64) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "disk.img"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestWriteReadBack(t *testing.T) {
	const size = 1<<30 + 12345*512 // not a whole MiB: the end must be aligned down
	serials := []string{"berth-is-0", "berth-is-1"}
	array := ArrayID("raid0", serials)
	for i := range serials {
		f := diskImage(t, size)
		m := Mark{Layout: "raid0", Array: array, Index: i, Count: 2, RAIDMember: true}
		geo, err := Write(f, size, m)
		if err != nil {
			t.Fatal(err)
		}
		if geo.FirstLBA != 2048 || (geo.LastLBA+1)%AlignSectors != 0 {
			t.Fatalf("geometry %+v not 1 MiB aligned", geo)
		}
		if end := (geo.LastLBA + 1) * SectorSize; end > size-33*512 {
			t.Fatalf("partition ends at %d, overlapping the backup GPT of a %d-byte disk", end, size)
		}
		got, g2, err := Read(f)
		if err != nil {
			t.Fatal(err)
		}
		if got != m || g2 != geo {
			t.Fatalf("read back %+v %+v, want %+v %+v", got, g2, m, geo)
		}
		// The u-root reader sees both copies valid and the name we set.
		pt, err := ugpt.New(f)
		if err != nil {
			t.Fatalf("u-root rejects the table: %v", err)
		}
		if n := DecodeName(pt.Backup.Parts[0].Name); n != "berth-is raid0 "+[]string{"1/2", "2/2"}[i] {
			t.Fatalf("backup partition name %q", n)
		}
		if pt.Primary.Parts[0].PartGUID.String() != pt.Backup.Parts[0].PartGUID.String() {
			t.Fatal("primary and backup type GUIDs differ")
		}
		// The probe sees a GPT, so no other tool would take this disk for blank.
		head := make([]byte, sigprobe.ReadLen)
		if _, err := f.ReadAt(head, 0); err != nil {
			t.Fatal(err)
		}
		if k := sigprobe.Probe(head).Kind; k != sigprobe.GPT {
			t.Fatalf("probe of berth disk = %q", k)
		}
	}
}

func TestTypeGUIDOnDisk(t *testing.T) {
	f := diskImage(t, 64<<20)
	if _, err := Write(f, 64<<20, Mark{Layout: "mount", Array: ArrayID("mount", []string{"a"}), Count: 1}); err != nil {
		t.Fatal(err)
	}
	// Linux filesystem type GUID 0FC63DAF-8483-4772-8E79-3D69D8477DE4 is
	// stored mixed-endian at LBA 2: AF 3D C6 0F 83 84 72 47 8E 79 ...
	b := make([]byte, 16)
	if _, err := f.ReadAt(b, 1024); err != nil {
		t.Fatal(err)
	}
	want := []byte{0xaf, 0x3d, 0xc6, 0x0f, 0x83, 0x84, 0x72, 0x47, 0x8e, 0x79, 0x3d, 0x69, 0xd8, 0x47, 0x7d, 0xe4}
	if string(b) != string(want) {
		t.Fatalf("type GUID bytes % x, want % x", b, want)
	}
}

func TestIdentityIsDeterministic(t *testing.T) {
	a := ArrayID("raid10", []string{"s1", "s2", "s3", "s4"})
	if a != ArrayID("raid10", []string{"s1", "s2", "s3", "s4"}) {
		t.Fatal("ArrayID not deterministic")
	}
	if a == ArrayID("raid0", []string{"s1", "s2", "s3", "s4"}) || a == ArrayID("raid10", []string{"s2", "s1", "s3", "s4"}) {
		t.Fatal("ArrayID ignores layout or member order")
	}
	if MemberGUID(a, 0) == MemberGUID(a, 1) {
		t.Fatal("member GUIDs collide")
	}
	if v := a[6] >> 4; v != 5 {
		t.Fatalf("not a version 5 UUID: %s", a)
	}
	u, err := ParseUUID(a.String())
	if err != nil || u != a {
		t.Fatalf("ParseUUID(%s) = %s, %v", a, u, err)
	}
}

// Tables berth did not write are refused, with what was found.
func TestReadRefusesForeign(t *testing.T) {
	const size = 64 << 20
	array := ArrayID("raid0", []string{"x"})

	blank := diskImage(t, size)
	if _, _, err := Read(blank); !errors.Is(err, ErrNotBerth) || !strings.Contains(err.Error(), "no valid GPT") {
		t.Fatalf("blank disk: %v", err)
	}

	// A GPT with a look-alike name but a partition GUID not derived from
	// the disk GUID (someone copying the name) is not berth's.
	forged := diskImage(t, size)
	pt, _, err := Table(Mark{Layout: "raid0", Array: array, Count: 1}, size)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []*ugpt.GPT{pt.Primary, pt.Backup} {
		g.Parts[0].UniqueGUID.L ^= 1
	}
	if err := ugpt.Write(forged, pt); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Read(forged); !errors.Is(err, ErrNotBerth) || !strings.Contains(err.Error(), "not the one berth derives") {
		t.Fatalf("forged GUID: %v", err)
	}

	// Someone else's partition name.
	other := diskImage(t, size)
	pt, _, _ = Table(Mark{Layout: "raid0", Array: array, Count: 1}, size)
	for _, g := range []*ugpt.GPT{pt.Primary, pt.Backup} {
		g.Parts[0].Name = EncodeName("Linux filesystem")
	}
	if err := ugpt.Write(other, pt); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Read(other); !errors.Is(err, ErrNotBerth) || !strings.Contains(err.Error(), `named "Linux filesystem"`) {
		t.Fatalf("foreign name: %v", err)
	}

	// Two partitions.
	two := diskImage(t, size)
	pt, _, _ = Table(Mark{Layout: "raid0", Array: array, Count: 1}, size)
	for _, g := range []*ugpt.GPT{pt.Primary, pt.Backup} {
		g.Parts[1] = g.Parts[0]
	}
	if err := ugpt.Write(two, pt); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Read(two); !errors.Is(err, ErrNotBerth) || !strings.Contains(err.Error(), "2 partitions") {
		t.Fatalf("two partitions: %v", err)
	}
}

func TestLayoutLimits(t *testing.T) {
	if _, err := Layout(1 << 20); err == nil {
		t.Fatal("1 MiB disk accepted")
	}
	g, err := Layout(3 << 20)
	if err != nil || g.FirstLBA != 2048 || g.LastLBA != 4095 {
		t.Fatalf("3 MiB disk: %+v %v", g, err)
	}
	if _, _, err := Table(Mark{Layout: "raid0", Index: 2, Count: 2}, 64<<20); err == nil {
		t.Fatal("index beyond count accepted")
	}
}

func TestParseName(t *testing.T) {
	for s, ok := range map[string]bool{
		"berth-is raid0 1/2": true, "berth-is mount 3/3": true,
		"berth-is raid0 0/2": false, "berth-is raid0 3/2": false, "berth-is raid0": false,
		"berth-isx raid0 1/2": false, "berth-is raid0 1-2": false, "": false,
	} {
		if _, _, _, got := parseName(s); got != ok {
			t.Errorf("parseName(%q) ok = %v, want %v", s, got, ok)
		}
	}
}

// FuzzRead: a disk's first sectors are outside input.
func FuzzRead(f *testing.F) {
	img := make([]byte, 4<<20)
	w := &memDisk{b: img}
	if _, err := Write(w, int64(len(img)), Mark{Layout: "raid0", Array: ArrayID("raid0", []string{"a"}), Count: 1}); err != nil {
		f.Fatal(err)
	}
	f.Add(img[:34*512])
	f.Add([]byte("EFI PART"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, _, err := Read(&memDisk{b: b})
		if err == nil && (m.Count < 1 || m.Index >= m.Count) {
			t.Fatalf("accepted impossible mark %+v", m)
		}
	})
}

type memDisk struct{ b []byte }

func (d *memDisk) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off >= int64(len(d.b)) {
		return 0, errors.New("out of range")
	}
	n := copy(p, d.b[off:])
	if n < len(p) {
		return n, errors.New("short read")
	}
	return n, nil
}

func (d *memDisk) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > int64(len(d.b)) {
		return 0, errors.New("out of range")
	}
	return copy(d.b[off:], p), nil
}
