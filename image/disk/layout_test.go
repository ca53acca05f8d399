package disk

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/berth-node/berth/mounts/partition"
)

var testRoot = func() []byte { h := sha256.Sum256([]byte("root")); return h[:] }()

func testLayout(t *testing.T) Layout {
	t.Helper()
	l, err := Plan(Sizes{ESP: 30 << 20, Root: 200<<20 + 5, Data: 64 << 20}, testRoot)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// imageFile makes a sparse file of size bytes and writes l's table on it.
func imageFile(t *testing.T, l Layout, size int64) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "disk.raw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if err := Write(f, l); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestPlan checks the layout the issue asks for: ESP, root, data in that
// order, 1 MiB aligned, sizes rounded up to MiB, the spec's type GUIDs, the
// root GUID from the root hash, and the backup GPT in its own last MiB.
func TestPlan(t *testing.T) {
	l := testLayout(t)
	want := []struct {
		name, typ     string
		first, sector uint64
	}{
		{NameESP, TypeESP, 2048, 30 * 2048},
		{NameRoot, TypeRootX86_64, 2048 + 30*2048, 201 * 2048},
		{NameData, TypeLinuxFS, 2048 + 231*2048, 64 * 2048},
	}
	if len(l.Parts) != len(want) {
		t.Fatalf("%d partitions: %v", len(l.Parts), l)
	}
	for i, w := range want {
		p := l.Parts[i]
		typ, _ := partition.ParseUUID(w.typ)
		if p.Name != w.name || p.Type != typ || p.FirstLBA != w.first || p.LastLBA-p.FirstLBA+1 != w.sector {
			t.Errorf("partition %d = %+v, want %s type %s at %d, %d sectors", i+1, p, w.name, w.typ, w.first, w.sector)
		}
	}
	if l.Sectors != (1+30+201+64+1)*2048 {
		t.Errorf("disk %d sectors", l.Sectors)
	}
	if !bytes.Equal(l.Parts[1].GUID[:], testRoot[:16]) {
		t.Errorf("root GUID %s is not the root hash's first 128 bits", l.Parts[1].GUID)
	}
	seen := map[partition.UUID]bool{l.DiskGUID: true}
	for _, p := range l.Parts {
		if seen[p.GUID] {
			t.Errorf("GUID %s used twice", p.GUID)
		}
		seen[p.GUID] = true
	}
	other := sha256.Sum256([]byte("other root"))
	l2, _ := Plan(Sizes{ESP: 30 << 20, Root: 200<<20 + 5, Data: 64 << 20}, other[:])
	if l2.DiskGUID == l.DiskGUID || l2.Parts[0].GUID == l.Parts[0].GUID {
		t.Error("another root hash gave the same GUIDs")
	}
	if _, err := Plan(Sizes{ESP: 1, Root: 0, Data: 1}, testRoot); err == nil {
		t.Error("zero-size root accepted")
	}
	if _, err := Plan(Sizes{ESP: 1, Root: 1, Data: 1}, testRoot[:8]); err == nil {
		t.Error("8-byte root hash accepted")
	}
}

// TestRoundTrip writes the table into an image file and reads it back, and
// checks two writes give the same bytes (reproducible disk.raw).
func TestRoundTrip(t *testing.T) {
	l := testLayout(t)
	f := imageFile(t, l, l.Size())
	got, err := Read(f, l.Size())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, l) {
		t.Fatalf("read back\n%v\nwrote\n%v", got, l)
	}
	// The table lives in the first 34 and last 33 sectors; compare those.
	ends := func(f *os.File) []byte {
		b := make([]byte, 67*SectorSize)
		if _, err := f.ReadAt(b[:34*SectorSize], 0); err != nil {
			t.Fatal(err)
		}
		if _, err := f.ReadAt(b[34*SectorSize:], l.Size()-33*SectorSize); err != nil {
			t.Fatal(err)
		}
		return b
	}
	a := ends(f)
	if !bytes.Equal(a, ends(imageFile(t, testLayout(t), l.Size()))) {
		t.Fatal("two writes of the same layout differ")
	}
	// The protective MBR and both headers are where UEFI looks.
	if a[510] != 0x55 || a[511] != 0xaa || a[450] != 0xee || string(a[512:520]) != "EFI PART" ||
		string(a[len(a)-512:len(a)-504]) != "EFI PART" {
		t.Fatal("protective MBR or GPT headers missing")
	}
}

// TestGrow is the first-boot path over image files: a larger disk, the
// grow, a re-read, then a second boot that finds nothing to do.
func TestGrow(t *testing.T) {
	l := testLayout(t)
	big := int64(1<<30) + 12345 // not a whole MiB, like a real disk may be
	f := imageFile(t, l, l.Size())
	if err := f.Truncate(big); err != nil { // the volume grew under the image
		t.Fatal(err)
	}
	cur, err := Read(f, big)
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
	if err := Write(f, g); err != nil {
		t.Fatal(err)
	}
	again, err := Read(f, big)
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
	l := testLayout(t)
	size := l.Size() + 10*SectorSize
	g, err := Grow(l, size)
	if err != nil {
		t.Fatal(err)
	}
	if g.Sectors != uint64(size)/SectorSize || g.Parts[2] != l.Parts[2] {
		t.Fatalf("grow to %d bytes gave %v", size, g)
	}
	f := imageFile(t, l, size)
	if err := Write(f, g); err != nil {
		t.Fatal(err)
	}
	again, err := Read(f, size)
	if err != nil || again.Sectors != g.Sectors {
		t.Fatalf("after rewrite: %v, %v", again, err)
	}
	if _, err := Grow(again, size); !errors.Is(err, ErrGrown) {
		t.Fatalf("then: %v, want ErrGrown", err)
	}
}

func TestGrowRefusesDataNotLast(t *testing.T) {
	l := testLayout(t)
	l.Parts[1].Name, l.Parts[2].Name = NameData, NameRoot
	if _, err := Grow(l, 4<<30); err == nil {
		t.Fatal("grew a data partition that is not last")
	}
	l = testLayout(t)
	l.Parts = l.Parts[:2]
	if _, err := Grow(l, 4<<30); err == nil {
		t.Fatal("grew a table without a data partition")
	}
}

func TestReadRejects(t *testing.T) {
	l := testLayout(t)
	f := imageFile(t, l, l.Size())
	if _, err := Read(f, l.Size()-512); err == nil {
		t.Error("backup header beyond the disk accepted")
	}
	empty := bytes.NewReader(make([]byte, 1<<20))
	if _, err := Read(empty, 1<<20); err == nil {
		t.Error("blank disk accepted")
	}
	bad := l.clone()
	bad.Parts[1].FirstLBA = bad.Parts[0].LastLBA
	if err := bad.Validate(); err == nil {
		t.Error("overlap accepted")
	}
}

// FuzzRead: Read parses a disk berth did not necessarily write; it must not
// panic or allocate wildly whatever the first and last sectors hold.
func FuzzRead(f *testing.F) {
	l, _ := Plan(Sizes{ESP: 1, Root: 1, Data: 1}, testRoot)
	var buf writerAt = make([]byte, l.Size())
	if err := Write(&buf, l); err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(buf[:34*512]), []byte(buf[len(buf)-33*512:]))
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, head, tail []byte) {
		d := make([]byte, l.Size())
		copy(d, head)
		copy(d[len(d)-min(len(tail), len(d)):], tail)
		got, err := Read(bytes.NewReader(d), int64(len(d)))
		if err == nil {
			if verr := got.Validate(); verr != nil {
				t.Fatalf("Read returned an invalid layout: %v", verr)
			}
		}
	})
}

type writerAt []byte

func (w *writerAt) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > int64(len(*w)) {
		return 0, errors.New("write past end")
	}
	return copy((*w)[off:], p), nil
}
