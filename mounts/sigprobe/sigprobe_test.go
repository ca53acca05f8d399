package sigprobe

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// readHead loads the first ReadLen bytes of a real image made by mkfs
// (committed gzip'd so the test checks real-world layouts, not our guess).
func readHead(t *testing.T, name string) []byte {
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

// FuzzProbe checks Probe never panics on arbitrary bytes, whatever their
// length, and that its answer is stable and consistent with IsFilesystem.
func FuzzProbe(f *testing.F) {
	f.Add([]byte("XFSB"))
	f.Add(make([]byte, 1100))
	f.Add(bytes.Repeat([]byte{0x55, 0xaa}, 300))
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
	})
}
