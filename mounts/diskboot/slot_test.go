package diskboot

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	iverity "github.com/berth-node/berth/image/verity"
	"github.com/berth-node/berth/mounts/partition"
	"github.com/berth-node/berth/mounts/verity"
)

// slotSize is the test slots' size: room for either release and then
// some, as a real slot has.
const slotSize = 2 << 20

// release is a root image as a slot holds it, built by image/verity (the
// disk image's builder): the data, then at once its tree; param is what
// its UKI's berth.verity= seals.
type release struct {
	image []byte
	param verity.Param
}

func newRelease(t testing.TB, blocks int, seed byte) release {
	t.Helper()
	data := make([]byte, blocks*verity.BlockSize)
	r := rand.New(rand.NewChaCha8([32]byte{seed, 9}))
	for i := 0; i < len(data); i += 8 {
		binary.LittleEndian.PutUint64(data[i:], r.Uint64())
	}
	tr, err := iverity.Build(bytes.NewReader(data), int64(len(data)), iverity.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return release{
		image: append(data, tr.Hash...),
		param: verity.Param{DataBlocks: tr.DataBlocks, HashStartBlock: tr.HashStartBlock(int64(len(data))), RootHash: tr.RootHashHex(), Salt: tr.SaltHex()},
	}
}

// slotFile writes a slot's partition as a file: rel's image (none: a
// new disk's empty slot b) in slotSize zero bytes.
func slotFile(t *testing.T, dir, name string, rel *release) string {
	t.Helper()
	b := make([]byte, slotSize)
	if rel != nil {
		copy(b, rel.image)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The two releases of the tests: of different sizes, so their trees lie
// at different blocks, and each with its own salt.
func testReleases(t testing.TB) (a, b release) {
	return newRelease(t, 300, 1), newRelease(t, 400, 2)
}

// ChooseSlot takes the slot whose tree top has the sealed root hash, read
// from real slot images (image/verity's trees, read back by readSlots), in
// every arrangement of two releases and an empty slot; slot a when both
// hold it; the hint's slot only when it holds it; and an error naming
// each partition and what it holds otherwise.
func TestChooseSlot(t *testing.T) {
	relA, relB := testReleases(t)
	dir := t.TempDir()
	files := map[string]string{
		"A":     slotFile(t, dir, "A", &relA),
		"B":     slotFile(t, dir, "B", &relB),
		"empty": slotFile(t, dir, "empty", nil),
	}
	p := relA.param
	// read reads what a node finds in slots a and b.
	read := func(inA, inB string) []SlotRead {
		reads := []SlotRead{{Slot: partition.SlotA, Partition: "/dev/nvme0n1p2"}, {Slot: partition.SlotB, Partition: "/dev/nvme0n1p3"}}
		for i, what := range []string{inA, inB} {
			reads[i].Partition = files[what]
		}
		readSlots(reads, p, os.Open)
		for i := range reads {
			reads[i].Partition = fmt.Sprintf("/dev/nvme0n1p%d", i+2)
		}
		return reads
	}
	for _, tc := range []struct {
		name     string
		reads    []SlotRead
		hint     string
		want     SlotChoice
		wantErrs []string // substrings; nil: no error
	}{{
		name:  "new disk: a holds it, b empty",
		reads: read("A", "empty"),
		want:  SlotChoice{Slot: partition.SlotA, Partition: "/dev/nvme0n1p2", By: SlotByHash},
	}, {
		name:  "updated into b, a holds the previous release",
		reads: read("B", "A"),
		want:  SlotChoice{Slot: partition.SlotB, Partition: "/dev/nvme0n1p3", By: SlotByHash},
	}, {
		name:  "b holds it, a empty",
		reads: read("empty", "A"),
		want:  SlotChoice{Slot: partition.SlotB, Partition: "/dev/nvme0n1p3", By: SlotByHash},
	}, {
		name:  "the same release in both: a",
		reads: read("A", "A"),
		want:  SlotChoice{Slot: partition.SlotA, Partition: "/dev/nvme0n1p2", By: SlotByHash, Both: true},
	}, {
		name:  "only b was found",
		reads: []SlotRead{read("A", "A")[1]},
		want:  SlotChoice{Slot: partition.SlotB, Partition: "/dev/nvme0n1p3", By: SlotByHash},
	}, {
		name:  "hint a, a holds it",
		reads: read("A", "B"),
		hint:  "a",
		want:  SlotChoice{Slot: partition.SlotA, Partition: "/dev/nvme0n1p2", By: SlotByHint},
	}, {
		name:  "hint b, both hold it",
		reads: read("A", "A"),
		hint:  "b",
		want:  SlotChoice{Slot: partition.SlotB, Partition: "/dev/nvme0n1p3", By: SlotByHint, Both: true},
	}, {
		name:  "hint b, but a holds it",
		reads: read("A", "B"),
		hint:  "b",
		wantErrs: []string{"the command line's berth.slot=b names berth-root-b, which holds another root than the sealed root hash " + p.RootHash,
			"berth-root-a (/dev/nvme0n1p2): holds it", "berth-root-b (/dev/nvme0n1p3): its tree's top hashes to ",
			"slot a holds it, but this UKI boots only slot b"},
	}, {
		name:     "hint a, neither holds it",
		reads:    read("B", "empty"),
		hint:     "a",
		wantErrs: []string{"berth.slot=a names berth-root-a, which holds another root"},
	}, {
		name:     "hint not a slot",
		reads:    read("A", "B"),
		hint:     "c",
		wantErrs: []string{`berth.slot="c": want "a" or "b"`},
	}, {
		name:  "neither holds it",
		reads: read("B", "empty"),
		wantErrs: []string{"no root slot holds the root this UKI seals (root hash " + p.RootHash + ")",
			"berth-root-a (/dev/nvme0n1p2): its tree's top hashes to ", "berth-root-b (/dev/nvme0n1p3): its tree's top hashes to ",
			"not booting a root that cannot be verified"},
	}, {
		name: "one unreadable, the other another root",
		reads: []SlotRead{read("B", "A")[0],
			{Slot: partition.SlotB, Partition: "/dev/nvme0n1p3", Err: fmt.Errorf("reading its tree's top block at byte 1228800: input/output error")}},
		wantErrs: []string{"berth-root-a (/dev/nvme0n1p2): its tree's top hashes to ",
			"berth-root-b (/dev/nvme0n1p3): reading its tree's top block at byte 1228800: input/output error"},
	}, {
		name:     "one missing, the other empty",
		reads:    []SlotRead{read("empty", "A")[0], {Slot: partition.SlotB, Err: fmt.Errorf("no such partition on the boot disk")}},
		wantErrs: []string{"berth-root-b: no such partition on the boot disk"},
	}, {
		name:     "no partitions",
		wantErrs: []string{"no root slot partition (berth-root-a, berth-root-b)"},
	}, {
		name:     "two partitions for slot a",
		reads:    append(read("A", "B")[:1], SlotRead{Slot: partition.SlotA, Partition: "/dev/nvme1n1p2", Top: read("A", "B")[0].Top}),
		wantErrs: []string{"two partitions for root slot a (/dev/nvme0n1p2, /dev/nvme1n1p2)"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ChooseSlot(tc.reads, p, tc.hint)
			if tc.wantErrs == nil {
				if err != nil || got != tc.want {
					t.Fatalf("ChooseSlot = %+v, %v; want %+v", got, err, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("ChooseSlot = %+v; want an error", got)
			}
			for _, w := range tc.wantErrs {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v\nwant it to say %q", err, w)
				}
			}
		})
	}
}

// A hash that names what a slot holds is the one its tree's top gives,
// and differs from the sealed one: the error shows B's top under A's salt.
func TestChooseSlotNamesHash(t *testing.T) {
	relA, relB := testReleases(t)
	dir := t.TempDir()
	// B's tree top lies where A's would only if B were A's size; read B's
	// slot where A's UKI looks.
	f, err := os.Open(slotFile(t, dir, "B", &relB))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	top, err := ReadTop(f, relA.param)
	if err != nil {
		t.Fatal(err)
	}
	wantHash, err := relA.param.TopHash(top)
	if err != nil || wantHash == relA.param.RootHash {
		t.Fatalf("B's block at A's top hashes to %s (%v), A's root hash %s", wantHash, err, relA.param.RootHash)
	}
	_, err = ChooseSlot([]SlotRead{{Slot: partition.SlotA, Partition: "/dev/vda2", Top: top}}, relA.param, "")
	if err == nil || !strings.Contains(err.Error(), "berth-root-a (/dev/vda2): its tree's top hashes to "+wantHash) {
		t.Fatalf("err = %v; want it to name hash %s", err, wantHash)
	}
}

// readSlots reads the tree's top block from real files, and says where a
// slot too short for the tree ends and what could not be opened.
func TestReadSlots(t *testing.T) {
	rel, _ := testReleases(t)
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	off := rel.param.TopOffset()
	if err := os.WriteFile(short, rel.image[:off+100], 0o644); err != nil {
		t.Fatal(err)
	}
	reads := []SlotRead{
		{Slot: "a", Partition: slotFile(t, dir, "A", &rel)},
		{Slot: "b", Partition: short},
		{Slot: "a", Partition: filepath.Join(dir, "none")},
		{Slot: "b", Err: fmt.Errorf("no such partition on the boot disk")},
	}
	readSlots(reads, rel.param, os.Open)
	if r := reads[0]; r.Err != nil || !bytes.Equal(r.Top, rel.image[off:off+verity.BlockSize]) {
		t.Errorf("whole slot: %d bytes, %v; want the block at byte %d", len(r.Top), r.Err, off)
	}
	if r := reads[1]; r.Top != nil || r.Err == nil || !strings.Contains(r.Err.Error(), fmt.Sprintf("it ends before byte %d", off+verity.BlockSize)) {
		t.Errorf("short slot: %d bytes, %v", len(r.Top), r.Err)
	}
	if r := reads[2]; r.Top != nil || r.Err == nil || !strings.Contains(r.Err.Error(), "opening it") {
		t.Errorf("missing slot: %d bytes, %v", len(r.Top), r.Err)
	}
	if r := reads[3]; r.Top != nil || r.Err.Error() != "no such partition on the boot disk" {
		t.Errorf("a slot not found was read: %d bytes, %v", len(r.Top), r.Err)
	}
}

var slotDisk = []string{partition.NameESP, "berth-root-a", "berth-root-b", partition.NameData}

// findSlots finds both root slots on the boot disk; a disk with one
// waits the grace for the other and goes on with the one; a second disk
// with root slots, or two of one slot, is refused at once; no disk at all
// is an error once the wait is over.
func TestFindSlots(t *testing.T) {
	for _, tc := range []struct {
		name     string
		disks    map[string][]string
		ready    func(string) bool
		want     []SlotRead // Err compared by text
		wantErrs []string
	}{{
		name:  "both on the boot disk, another disk beside",
		disks: map[string][]string{"nvme0n1": slotDisk, "nvme1n1": {"scratch"}},
		want:  []SlotRead{{Slot: "a", Partition: "/dev/nvme0n1p2"}, {Slot: "b", Partition: "/dev/nvme0n1p3"}},
	}, {
		name:  "only slot a",
		disks: map[string][]string{"nvme0n1": {partition.NameESP, "berth-root-a", partition.NameData}},
		want:  []SlotRead{{Slot: "a", Partition: "/dev/nvme0n1p2"}, {Slot: "b", Err: fmt.Errorf("no such partition on the boot disk")}},
	}, {
		name:  "slot b's node never appears",
		disks: map[string][]string{"nvme0n1": slotDisk},
		ready: func(dev string) bool { return dev != "/dev/nvme0n1p3" },
		want:  []SlotRead{{Slot: "a", Partition: "/dev/nvme0n1p2"}, {Slot: "b", Partition: "/dev/nvme0n1p3", Err: fmt.Errorf("its device node did not appear")}},
	}, {
		name:     "another berth disk attached",
		disks:    map[string][]string{"nvme0n1": slotDisk, "nvme1n1": {partition.NameESP, "berth-root-b"}},
		wantErrs: []string{"root slot partitions on 2 disks: /dev/nvme0n1 (/dev/nvme0n1p2, /dev/nvme0n1p3), /dev/nvme1n1 (/dev/nvme1n1p2): attach only one berth disk"},
	}, {
		name:     "two of slot a",
		disks:    map[string][]string{"nvme0n1": {partition.NameESP, "berth-root-a", "berth-root-a", partition.NameData}},
		wantErrs: []string{"2 partitions named berth-root-a (/dev/nvme0n1p2, /dev/nvme0n1p3): not choosing one"},
	}, {
		name:     "no device nodes",
		disks:    map[string][]string{"nvme0n1": slotDisk},
		ready:    func(string) bool { return false },
		wantErrs: []string{"root slot partitions /dev/nvme0n1p2, /dev/nvme0n1p3 have no device node after 100ms"},
	}, {
		name:     "none",
		disks:    map[string][]string{"nvme0n1": {partition.NameESP, partition.NameData}},
		wantErrs: []string{"no partition named berth-root-a or berth-root-b appeared within 100ms"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ready := tc.ready
			if ready == nil {
				ready = always
			}
			got, err := findSlots(context.Background(), sysfsDisks(t, tc.disks), 100*time.Millisecond, 100*time.Millisecond, ready)
			if tc.wantErrs != nil {
				for _, w := range tc.wantErrs {
					if err == nil || !strings.Contains(err.Error(), w) {
						t.Errorf("err = %v; want it to say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("findSlots = %+v; want %+v", got, tc.want)
			}
		})
	}
}

// findRoot from sysfs to the choice: the fixture's partitions are real
// slot files (opened in their /dev paths' place), and the log says which
// slot was found and how.
func TestFindRoot(t *testing.T) {
	relA, relB := testReleases(t)
	for _, tc := range []struct {
		name     string
		inA, inB *release
		seal     release
		hint     string
		want     SlotChoice
		wantLog  string
		wantErr  string
	}{{
		name: "updated into b", inA: &relA, inB: &relB, seal: relB,
		want:    SlotChoice{Slot: "b", Partition: "/dev/nvme0n1p3", By: SlotByHash},
		wantLog: `msg="root slot found" slot=b partition=/dev/nvme0n1p3 root_hash=` + relB.param.RootHash + " by=hash",
	}, {
		name: "rolled back to a", inA: &relA, inB: &relB, seal: relA,
		want:    SlotChoice{Slot: "a", Partition: "/dev/nvme0n1p2", By: SlotByHash},
		wantLog: `msg="root slot found" slot=a partition=/dev/nvme0n1p2`,
	}, {
		name: "the same release in both", inA: &relA, inB: &relA, seal: relA,
		want:    SlotChoice{Slot: "a", Partition: "/dev/nvme0n1p2", By: SlotByHash, Both: true},
		wantLog: `msg="both root slots hold this root (the same release in each); booting the one chosen, and an update writes the other" slot=a`,
	}, {
		name: "an older image's hint", inA: &relA, inB: &relB, seal: relB, hint: "b",
		want:    SlotChoice{Slot: "b", Partition: "/dev/nvme0n1p3", By: SlotByHint},
		wantLog: "by=hint",
	}, {
		name: "neither", inA: &relA, seal: relB,
		wantErr: "no root slot holds the root this UKI seals (root hash " + relB.param.RootHash + ")",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			files := map[string]string{
				"/dev/nvme0n1p2": slotFile(t, dir, "a", tc.inA),
				"/dev/nvme0n1p3": slotFile(t, dir, "b", tc.inB),
			}
			var opened []string
			open := func(dev string) (*os.File, error) {
				opened = append(opened, dev)
				f, ok := files[dev]
				if !ok {
					return nil, fmt.Errorf("no fixture for %s", dev)
				}
				return os.Open(f)
			}
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			got, err := findRoot(context.Background(), log, sysfsDisks(t, map[string][]string{"nvme0n1": slotDisk}), tc.seal.param, tc.hint,
				time.Second, time.Second, always, open)
			if fmt.Sprint(opened) != "[/dev/nvme0n1p2 /dev/nvme0n1p3]" {
				t.Errorf("opened %v; want both slots, a first", opened)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v; want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("findRoot = %+v, %v; want %+v", got, err, tc.want)
			}
			if !strings.Contains(logs.String(), tc.wantLog) {
				t.Fatalf("log does not say %q:\n%s", tc.wantLog, logs.String())
			}
		})
	}
}

// Whatever the slots hold and whatever the hint, ChooseSlot never panics,
// and a slot it chooses is one it was given whose top block hashes to the
// root hash: it never picks a slot it cannot verify.
func FuzzChooseSlot(f *testing.F) {
	relA, relB := testReleases(f)
	topA := relA.image[relA.param.TopOffset():][:verity.BlockSize]
	topB := relB.image[relA.param.TopOffset():][:verity.BlockSize]
	f.Add(topA, topB, "", false)
	f.Add(topB, topA, "", false)
	f.Add(topA, topA, "b", false)
	f.Add(topB, topB, "a", true)
	f.Add([]byte{}, topA, "c", false)
	f.Fuzz(func(t *testing.T, a, b []byte, hint string, bErr bool) {
		reads := []SlotRead{{Slot: partition.SlotA, Partition: "/dev/vda2", Top: a}, {Slot: partition.SlotB, Partition: "/dev/vda3", Top: b}}
		if bErr {
			reads[1] = SlotRead{Slot: partition.SlotB, Err: fmt.Errorf("unreadable")}
		}
		c, err := ChooseSlot(reads, relA.param, hint)
		if err != nil {
			return
		}
		var top []byte
		switch c.Slot {
		case partition.SlotA:
			top = a
		case partition.SlotB:
			top = b
			if bErr {
				t.Fatalf("chose slot b, which could not be read")
			}
		default:
			t.Fatalf("chose slot %q", c.Slot)
		}
		if h, err := relA.param.TopHash(top); err != nil || h != relA.param.RootHash {
			t.Fatalf("chose slot %s, whose top hashes to %s (%v), not %s", c.Slot, h, err, relA.param.RootHash)
		}
		if hint != "" && string(c.Slot) != hint {
			t.Fatalf("hint %q, chose slot %s", hint, c.Slot)
		}
	})
}
