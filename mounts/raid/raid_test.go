package raid

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func members(n int, sectors uint64) []Member {
	var ms []Member
	for i := range n {
		ms = append(ms, Member{Dev: "259:" + string(rune('1'+i)), Sectors: sectors, MetaDev: "254:" + string(rune('1'+i))})
	}
	return ms
}

func TestTableRAID0(t *testing.T) {
	// Two 1 GiB QEMU disks: partition = 2048..2095103 → 2093056 sectors.
	ms := members(2, 2093056)
	ms[1].Sectors += 700 // a slightly larger disk uses only the common size
	got, err := Table(Spec{Name: "berth-is", Level: RAID0, Members: ms})
	if err != nil {
		t.Fatal(err)
	}
	want := "0 4186112 striped 2 1024 259:1 0 259:2 0"
	if got.String() != want {
		t.Fatalf("table %q, want %q", got, want)
	}
	if got.Length%(ChunkSectors*2) != 0 {
		t.Fatal("length not whole stripes")
	}
}

func TestTableRAID10(t *testing.T) {
	got, err := Table(Spec{Level: RAID10, Members: members(4, 2093056+100)})
	if err != nil {
		t.Fatal(err)
	}
	want := "0 4186112 raid raid10 5 1024 raid10_copies 2 raid10_format near 4 254:1 259:1 254:2 259:2 254:3 259:3 254:4 259:4"
	if got.String() != want {
		t.Fatalf("table %q, want %q", got, want)
	}
	// Five members: length still whole chunks.
	got, err = Table(Spec{Level: RAID10, Members: members(5, 10*ChunkSectors+1)})
	if err != nil {
		t.Fatal(err)
	}
	if got.Length%ChunkSectors != 0 || got.Length != 10*ChunkSectors*5/2 {
		t.Fatalf("5-disk raid10 length %d", got.Length)
	}
}

func TestTableRefuses(t *testing.T) {
	for name, s := range map[string]Spec{
		"raid10 with 3": {Level: RAID10, Members: members(3, 1<<21)},
		"raid0 with 1":  {Level: RAID0, Members: members(1, 1<<21)},
		"tiny":          {Level: RAID0, Members: members(2, 100)},
		"bad dev":       {Level: RAID0, Members: []Member{{Dev: "259:1 0 8:0", Sectors: 1 << 21}, {Dev: "259:2", Sectors: 1 << 21}}},
		"unknown level": {Level: "raid5", Members: members(4, 1<<21)},
	} {
		if _, err := Table(s); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	_, err := Table(Spec{Level: RAID10, Members: members(2, 1<<21)})
	if err == nil || !strings.Contains(err.Error(), "raid10 needs at least 4 disks, have 2") {
		t.Fatalf("raid10 error = %v", err)
	}
}

func TestSplit(t *testing.T) {
	meta, data, err := Split("259:3", 2093056)
	if err != nil {
		t.Fatal(err)
	}
	if meta.String() != "0 8192 linear 259:3 0" || data.String() != "0 2084864 linear 259:3 8192" {
		t.Fatalf("split %q / %q", meta, data)
	}
	if _, _, err := Split("259:3", MetaSectors); err == nil {
		t.Fatal("tiny member accepted")
	}
	noMeta := members(4, 1<<21)
	noMeta[2].MetaDev = ""
	if _, err := Table(Spec{Level: RAID10, Members: noMeta}); err == nil {
		t.Fatal("raid10 member without metadata device accepted")
	}
}

func TestDataDisks(t *testing.T) {
	if DataDisks(RAID0, 3) != 3 || DataDisks(RAID10, 4) != 2 || DataDisks(RAID10, 5) != 2 {
		t.Fatal("wrong sw")
	}
}

// The buffer must follow the kernel ABI: 312-byte dm_ioctl, data_start
// after it, 40-byte target specs whose next offsets are 8-aligned.
func TestEncodeABI(t *testing.T) {
	if dmIoctlSize != 312 || dmSpecSize != 40 {
		t.Fatalf("struct sizes %d/%d, kernel has 312/40", dmIoctlSize, dmSpecSize)
	}
	tg := []Target{{Length: 8, Type: "striped", Params: "2 1024 259:1 0 259:2 0"}, {Start: 8, Length: 8, Type: "zero"}}
	buf, err := encode("berth-is", "BERTH-x", 0, tg)
	if err != nil {
		t.Fatal(err)
	}
	var h unix.DmIoctl
	if err := binary.Read(bytes.NewReader(buf), binary.NativeEndian, &h); err != nil {
		t.Fatal(err)
	}
	if h.Data_start != 312 || int(h.Data_size) != len(buf) || h.Target_count != 2 || h.Version != dmVersion {
		t.Fatalf("header %+v", h)
	}
	if string(bytes.TrimRight(h.Name[:], "\x00")) != "berth-is" || string(bytes.TrimRight(h.Uuid[:], "\x00")) != "BERTH-x" {
		t.Fatal("name/uuid not stored")
	}
	off := 312
	for i, want := range tg {
		var s unix.DmTargetSpec
		if err := binary.Read(bytes.NewReader(buf[off:]), binary.NativeEndian, &s); err != nil {
			t.Fatal(err)
		}
		params := buf[off+40:]
		params = params[:bytes.IndexByte(params, 0)]
		if s.Length != want.Length || s.Sector_start != want.Start || string(bytes.TrimRight(s.Target_type[:], "\x00")) != want.Type || string(params) != want.Params {
			t.Fatalf("target %d = %+v %q", i, s, params)
		}
		if s.Next%8 != 0 {
			t.Fatalf("target %d next %d not 8-aligned", i, s.Next)
		}
		off += int(s.Next)
	}
	if _, err := encode(strings.Repeat("x", 200), "", 0, nil); err == nil {
		t.Fatal("over-long name accepted")
	}
}
