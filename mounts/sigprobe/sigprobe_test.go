package sigprobe

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// readHead loads the first ReadLen bytes of a real image made by mkfs
// (committed gzip'd so the test checks real-world layouts, not our guess).
func readHead(t testing.TB, name string) []byte {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestProbeRealFilesystems(t *testing.T) {
	for _, tc := range []struct {
		file string
		want Signature
	}{
		// made with: mkfs.xfs -L berth-is -m uuid=11111111-2222-3333-4444-555555555555
		{"xfs.head.gz", Signature{Kind: XFS, Label: "berth-is", UUID: "11111111-2222-3333-4444-555555555555"}},
		// made with: mkfs.ext4 -L berth-is -U 11111111-2222-3333-4444-555555555556
		{"ext4.head.gz", Signature{Kind: Ext4, Label: "berth-is", UUID: "11111111-2222-3333-4444-555555555556"}},
		// NoCloud seeds. made with: mkfs.vfat -n cidata -C img 2048 (FAT12),
		// then mcopy -i img user-data meta-data ::
		{"vfat12.head.gz", Signature{Kind: VFAT, Label: "cidata"}},
		// made with: mkfs.vfat -F 32 -n CIDATA -C img 40960 (its root
		// directory is past the bytes read: the boot sector's label)
		{"vfat32.head.gz", Signature{Kind: VFAT, Label: "CIDATA"}},
		// made with: genisoimage -volid cidata -joliet -rock user-data meta-data,
		// as cloud-localds makes a seed
		{"iso9660.head.gz", Signature{Kind: ISO9660, Label: "cidata"}},
	} {
		got := Probe(readHead(t, tc.file))
		if got != tc.want {
			t.Errorf("%s: Probe = %+v, want %+v", tc.file, got, tc.want)
		}
		if !got.IsFilesystem() {
			t.Errorf("%s: IsFilesystem = false", tc.file)
		}
	}
}

func TestProbeSynthetic(t *testing.T) {
	put := func(off int, s string) []byte {
		b := make([]byte, ReadLen)
		copy(b[off:], s)
		return b
	}
	le32 := func(off int, v uint32) []byte {
		b := make([]byte, ReadLen)
		binary.LittleEndian.PutUint32(b[off:], v)
		return b
	}
	mbr := make([]byte, ReadLen)
	mbr[510], mbr[511] = 0x55, 0xaa
	mbr[446+4] = 0x83
	binary.LittleEndian.PutUint32(mbr[446+12:], 2048)
	strayAA := make([]byte, ReadLen)
	strayAA[510], strayAA[511] = 0x55, 0xaa
	gptDisk := put(512, "EFI PART")
	copy(gptDisk[446:], mbr[446:512]) // protective MBR must not win over GPT
	lvm := put(512, "LABELONE")
	copy(lvm[512+24:], "LVM2 001")

	for name, tc := range map[string]struct {
		b    []byte
		want Kind
	}{
		"zeros":         {make([]byte, ReadLen), Blank},
		"short zeros":   {make([]byte, 100), Blank},
		"empty":         {nil, Blank},
		"junk":          {put(70000, "x"), Unknown},
		"gpt":           {gptDisk, GPT},
		"mbr":           {mbr, MBR},
		"stray 55aa":    {strayAA, Unknown},
		"md 1.2":        {le32(4096, 0xa92b4efc), MDRaid},
		"md 1.1":        {le32(0, 0xa92b4efc), MDRaid},
		"dm-raid":       {le32(0, 0x64526d44), DMRaidSB},
		"lvm":           {lvm, LVM2},
		"swap":          {put(4086, "SWAPSPACE2"), Swap},
		"btrfs":         {put(65536+64, "_BHRfS_M"), Btrfs},
		"iso":           {put(32769, "CD001"), ISO9660},
		"squashfs":      {put(0, "hsqs"), Squashfs},
		"erofs":         {le32(1024, 0xe0f5e1e2), EROFS},
		"truncated xfs": {[]byte("XFSB"), XFS},
	} {
		if got := Probe(tc.b); got.Kind != tc.want {
			t.Errorf("%s: Probe kind = %q, want %q", name, got.Kind, tc.want)
		}
	}
}

// The root directory's label wins over the boot sector's, as in blkid
// (Windows' label command changes only the first); "NO NAME" in the boot
// sector is no label; a FAT boot sector with a field out of range is no
// FAT.
func TestProbeFATLabels(t *testing.T) {
	base := readHead(t, "vfat12.head.gz")
	edit := func(f func(b []byte)) []byte {
		b := bytes.Clone(base)
		f(b)
		return b
	}
	// The FAT12 root directory: after the reserved sectors and the FATs.
	rootOff := (int(binary.LittleEndian.Uint16(base[14:])) + int(base[16])*int(binary.LittleEndian.Uint16(base[22:]))) * 512
	for name, tc := range map[string]struct {
		b    []byte
		want Signature
	}{
		"boot sector differs": {edit(func(b []byte) { copy(b[43:54], "OTHER      ") }), Signature{Kind: VFAT, Label: "cidata"}},
		"no root label": {edit(func(b []byte) {
			b[rootOff] = 0xe5 // the label entry deleted: the boot sector's copy
			copy(b[43:54], "BOOTLABEL  ")
		}), Signature{Kind: VFAT, Label: "BOOTLABEL"}},
		"no label at all": {edit(func(b []byte) {
			b[rootOff] = 0xe5
			copy(b[43:54], "NO NAME    ")
		}), Signature{Kind: VFAT}},
		"root past the read": {edit(func(b []byte) { copy(b[43:54], "BOOTLABEL  ") })[:rootOff], Signature{Kind: VFAT, Label: "BOOTLABEL"}},
		"bad sector size":    {edit(func(b []byte) { binary.LittleEndian.PutUint16(b[11:], 500) }), Signature{Kind: Unknown}},
		"bad cluster size":   {edit(func(b []byte) { b[13] = 3 }), Signature{Kind: Unknown}},
		"three FATs":         {edit(func(b []byte) { b[16] = 3 }), Signature{Kind: Unknown}},
		"bad media":          {edit(func(b []byte) { b[21] = 0x12 }), Signature{Kind: Unknown}},
		"no jump":            {edit(func(b []byte) { b[0] = 0 }), Signature{Kind: Unknown}},
		"no FAT type":        {edit(func(b []byte) { copy(b[54:], "XXX") }), Signature{Kind: Unknown}},
	} {
		if got := Probe(tc.b); got != tc.want {
			t.Errorf("%s: Probe = %+v, want %+v", name, got, tc.want)
		}
	}
}

// The ISO 9660 label is the primary volume descriptor's, found after a
// boot record; a set with none, or ending before one, has no label.
func TestProbeISOLabels(t *testing.T) {
	const sector = 2048
	vd := func(types ...byte) []byte {
		b := make([]byte, ReadLen)
		for i, ty := range types {
			off := (16 + i) * sector
			b[off] = ty
			copy(b[off+1:], "CD001")
			copy(b[off+40:], "LABEL-"+string('A'+rune(i))+"                        ")
		}
		return b
	}
	for name, tc := range map[string]struct {
		b    []byte
		want string
	}{
		"primary first":      {vd(1, 255), "LABEL-A"},
		"after boot record":  {vd(0, 1, 255), "LABEL-B"},
		"terminator first":   {vd(255, 1), ""},
		"supplementary only": {vd(2, 255), ""},
		"cut short":          {vd(0, 1)[:17*sector+100], ""},
	} {
		got := Probe(tc.b)
		if got.Kind != ISO9660 || got.Label != tc.want {
			t.Errorf("%s: Probe = %+v, want iso9660 labelled %q", name, got, tc.want)
		}
	}
}

// FuzzProbe checks Probe never panics on arbitrary bytes, whatever their
// length, and that its answer is stable and consistent with IsFilesystem.
func FuzzProbe(f *testing.F) {
	f.Add([]byte("XFSB"))
	f.Add(make([]byte, 1100))
	f.Add(bytes.Repeat([]byte{0x55, 0xaa}, 300))
	// Seeds' heads, cut where the interesting parts end (the boot sector
	// and the root directory; the volume descriptors).
	f.Add(readHead(f, "vfat12.head.gz")[:16<<10])
	f.Add(readHead(f, "iso9660.head.gz")[:40<<10])
	f.Fuzz(func(t *testing.T, b []byte) {
		s := Probe(b)
		if s.Kind == "" {
			t.Fatalf("Probe returned an empty kind for %d bytes", len(b))
		}
		if s2 := Probe(b); s2 != s {
			t.Fatalf("Probe not deterministic: %+v then %+v", s, s2)
		}
		if s.Kind == Blank && !isZero(b) {
			t.Fatalf("Blank for non-zero input")
		}
		if (s.Kind == VFAT || s.Kind == ISO9660) && (!utf8.ValidString(s.Label) || strings.TrimRight(s.Label, " \x00") != s.Label) {
			t.Fatalf("label %q: want valid UTF-8 without trailing blanks", s.Label)
		}
	})
}
