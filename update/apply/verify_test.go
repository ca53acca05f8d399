package apply

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/berth-node/berth/mounts/verity"
)

// TestVerifySlot: verifySlot accepts exactly what image/verity built,
// whatever the tree's height, and names the first block that changed,
// in the data or in any level of the tree.
func TestVerifySlot(t *testing.T) {
	ctx := context.Background()
	for _, n := range []int{1, 2, 128, 129, 300, 16385} {
		img := newSlotImage(t, n, uint64(n))
		// The slot is larger than the image; what lies past it is no
		// part of the check.
		slot := append(bytes.Clone(img.bytes), bytes.Repeat([]byte{0xee}, 3*4096)...)
		read, err := verifySlot(ctx, bytes.NewReader(slot), img.param)
		if err != nil || read != int64(len(img.bytes)) {
			t.Fatalf("%d blocks: verifySlot = %d, %v; want %d bytes checked", n, read, err, len(img.bytes))
		}
		// One byte changed in each block of the tree, and in a few data
		// blocks.
		levels := verity.TreeLevels(uint64(n))
		type at struct {
			level int
			block uint64
			off   int64
		}
		var cases []at
		off := int64(img.param.HashStartBlock) * 4096
		for i := len(levels) - 1; i >= 0; i-- {
			for b := range levels[i] {
				cases = append(cases, at{i, b, off + int64(b)*4096})
			}
			off += int64(levels[i]) * 4096
		}
		for _, b := range []uint64{0, uint64(n) / 2, uint64(n) - 1} {
			cases = append(cases, at{-1, b, int64(b) * 4096})
		}
		for _, c := range cases {
			slot[c.off+4095] ^= 0x80
			_, err := verifySlot(ctx, bytes.NewReader(slot), img.param)
			slot[c.off+4095] ^= 0x80
			var me *MismatchError
			if !errors.As(err, &me) || me.Level != c.level || me.Block != c.block || me.Offset != c.off || me.RootHash != img.param.RootHash {
				t.Fatalf("%d blocks, byte changed in level %d block %d: %v", n, c.level, c.block, err)
			}
		}
		if n == 300 {
			if _, err := verifySlot(ctx, bytes.NewReader(slot[:len(img.bytes)-1]), img.param); !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "of the slot") {
				t.Errorf("a slot that ends inside the tree: %v", err)
			}
			p := img.param
			p.Salt = strings.Repeat("00", 32)
			if _, err := verifySlot(ctx, bytes.NewReader(slot), p); !isMismatch(err, len(levels)-1, 0) {
				t.Errorf("another salt: %v; want the top block named", err)
			}
			p = img.param
			p.Salt = "-"
			if _, err := verifySlot(ctx, bytes.NewReader(slot), p); !isMismatch(err, len(levels)-1, 0) {
				t.Errorf("no salt: %v; want the top block named", err)
			}
		}
	}
}

func isMismatch(err error, level int, block uint64) bool {
	var me *MismatchError
	return errors.As(err, &me) && me.Level == level && me.Block == block
}

func TestVerifySlotRefusesParams(t *testing.T) {
	img := newSlotImage(t, 10, 1)
	for _, c := range []struct {
		name string
		mut  func(p *verity.Param)
		want string
	}{
		{"root hash", func(p *verity.Param) { p.RootHash = "abcd" }, `root hash "abcd": want 64 hex digits`},
		{"salt", func(p *verity.Param) { p.Salt = "xy" }, `salt "xy"`},
		{"overlap", func(p *verity.Param) { p.HashStartBlock = 9 }, "overlaps the 10 data blocks"},
		{"no data", func(p *verity.Param) { p.DataBlocks = 0 }, "overlaps the 0 data blocks"},
	} {
		p := img.param
		c.mut(&p)
		if _, err := verifySlot(context.Background(), bytes.NewReader(img.bytes), p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", c.name, err, c.want)
		}
	}
}

// cancelReader cancels a context once it reads data past a byte.
type cancelReader struct {
	r        io.ReaderAt
	at, tree int64
	cancel   context.CancelFunc
}

func (c cancelReader) ReadAt(p []byte, off int64) (int, error) {
	if off >= c.at && off < c.tree {
		c.cancel()
	}
	return c.r.ReadAt(p, off)
}

func TestVerifySlotCanceled(t *testing.T) {
	img := newSlotImage(t, 1000, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := verifySlot(ctx, cancelReader{bytes.NewReader(img.bytes), 1 << 20, 1000 * 4096, cancel}, img.param)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "stopped at byte 2097152") {
		t.Errorf("verifySlot cancelled after its first MiB of data: %v", err)
	}
}

// TestVerifySlotMemoryBounded: what verifySlot allocates does not grow
// with the image (its 1 MiB buffer and the tree's few level offsets).
func TestVerifySlotMemoryBounded(t *testing.T) {
	alloc := func(img slotImage) uint64 {
		r := bytes.NewReader(img.bytes)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		if _, err := verifySlot(context.Background(), r, img.param); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	small, large := alloc(newSlotImage(t, 300, 1)), alloc(newSlotImage(t, 8000, 1))
	if large > small+64<<10 || large > 2<<20 {
		t.Errorf("verifying 8000 blocks allocated %d bytes, 300 blocks %d: memory grows with the image", large, small)
	}
}

func BenchmarkVerifySlot(b *testing.B) {
	img := newSlotImage(b, 16385, 1)
	b.SetBytes(int64(len(img.bytes)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := verifySlot(context.Background(), bytes.NewReader(img.bytes), img.param); err != nil {
			b.Fatal(err)
		}
	}
}
