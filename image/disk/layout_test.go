package disk

import (
	"bytes"
	"crypto/sha256"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/berth-node/berth/mounts/partition"
)

var testRoot = func() []byte { h := sha256.Sum256([]byte("root")); return h[:] }()

func testLayout(t *testing.T) partition.DiskLayout {
	t.Helper()
	l, err := Plan(Sizes{ESP: 30 << 20, Root: 200<<20 + 5, Data: 64 << 20}, testRoot)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// imageFile makes a sparse file of size bytes and writes l's table on it.
func imageFile(t *testing.T, l partition.DiskLayout, size int64) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "disk.raw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if err := partition.WriteDisk(f, l); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestPlan checks the layout: ESP, root slots a and b, data in that
// order, 1 MiB aligned, sizes rounded up to MiB, both slots SlotSize of
// the root (200 MiB + 5 bytes: 328 MiB + 5 with headroom, so 384 MiB in
// 64 MiB units), the spec's type GUIDs, slot a's GUID from the root hash,
// and the backup GPT in its own last MiB.
func TestPlan(t *testing.T) {
	l := testLayout(t)
	want := []struct {
		name, typ     string
		first, sector uint64
	}{
		{partition.NameESP, TypeESP, 2048, 30 * 2048},
		{"berth-root-a", TypeRootX86_64, 2048 + 30*2048, 384 * 2048},
		{"berth-root-b", TypeRootX86_64, 2048 + 414*2048, 384 * 2048},
		{partition.NameData, partition.TypeLinuxFS, 2048 + 798*2048, 64 * 2048},
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
	if l.Sectors != (1+30+384+384+64+1)*2048 {
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
	if _, err := Plan(Sizes{ESP: 1, Root: 100 << 20, Slot: 99 << 20, Data: 1}, testRoot); err == nil || !strings.Contains(err.Error(), "cannot hold") {
		t.Errorf("a slot smaller than the root: %v", err)
	}
	// An explicit slot size is kept (rounded to MiB).
	l3, err := Plan(Sizes{ESP: 1, Root: 100 << 20, Slot: 150 << 20, Data: 1}, testRoot)
	if err != nil || l3.Parts[1].Size() != 150<<20 || l3.Parts[2].Size() != 150<<20 {
		t.Errorf("explicit 150 MiB slots: %v %v", l3, err)
	}
}

func TestSlotSize(t *testing.T) {
	for _, c := range []struct{ root, want int64 }{
		{1, 192 << 20},                 // 128 MiB more, in 64 MiB units
		{128 << 20, 256 << 20},         // 128 MiB more beats half as much again
		{256 << 20, 384 << 20},         // both give 384
		{400 << 20, 640 << 20},         // half as much again: 600, up to 640
		{1<<30 + 1, 1536<<20 + 64<<20}, // 1.5 GiB + a bit, up to the next 64 MiB
	} {
		if got := SlotSize(c.root); got != c.want || got < c.root {
			t.Errorf("SlotSize(%d) = %d, want %d", c.root, got, c.want)
		}
	}
}

// TestRoundTrip writes the planned table into an image file and reads it
// back the way the node does (mounts/partition), and checks two writes give
// the same bytes (reproducible disk.raw).
func TestRoundTrip(t *testing.T) {
	l := testLayout(t)
	f := imageFile(t, l, l.Size())
	got, err := partition.ReadDisk(f, l.Size())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, l) {
		t.Fatalf("read back\n%v\nwrote\n%v", got, l)
	}
	// The table lives in the first 34 and last 33 sectors; compare those.
	ends := func(f *os.File) []byte {
		b := make([]byte, 67*partition.SectorSize)
		if _, err := f.ReadAt(b[:34*partition.SectorSize], 0); err != nil {
			t.Fatal(err)
		}
		if _, err := f.ReadAt(b[34*partition.SectorSize:], l.Size()-33*partition.SectorSize); err != nil {
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
