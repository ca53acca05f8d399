package verity

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	iverity "github.com/berth-node/berth/image/verity"
)

// topTestData is n blocks of reproducible random data.
func topTestData(n uint64) []byte {
	r := rand.New(rand.NewChaCha8([32]byte{byte(n), byte(n >> 8), 3}))
	b := make([]byte, n*BlockSize)
	for i := 0; i < len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	return b
}

// topOf reads the block at p.TopOffset from a root partition's bytes.
func topOf(t *testing.T, part []byte, p Param) []byte {
	t.Helper()
	off := p.TopOffset()
	if off+BlockSize > int64(len(part)) {
		t.Fatalf("top block at byte %d lies past the %d-byte partition", off, len(part))
	}
	return part[off : off+BlockSize]
}

var veritysetupRoot = regexp.MustCompile(`(?m)^Root hash:\s+([0-9a-f]+)\s*$`)

// The rule berth finds its root slot by (the block at TopOffset hashes,
// under the salt, to the root hash) holds for what veritysetup itself
// writes, the tree after the data on one device as the disk image's root
// slots have it: without a superblock (the image's layout) and with one
// (the tree a block later).
func TestTopHashVeritysetup(t *testing.T) {
	if _, err := exec.LookPath("veritysetup"); err != nil {
		t.Fatalf("veritysetup: %v (CI needs Debian's cryptsetup-bin)", err)
	}
	const salt = "1f2c1e0a7b3d4c5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6"
	dir := t.TempDir()
	// One block (no tree), one full hash block, two levels.
	for _, n := range []uint64{1, 5, 128, 129, 300} {
		for _, sb := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d blocks superblock=%v", n, sb), func(t *testing.T) {
				data := topTestData(n)
				f := filepath.Join(dir, fmt.Sprintf("part-%d-%v", n, sb))
				if err := os.WriteFile(f, data, 0o644); err != nil {
					t.Fatal(err)
				}
				args := []string{"format", f, f, "--hash-offset=" + strconv.Itoa(len(data)), "--salt=" + salt}
				hashStart := n
				if sb {
					hashStart++
				} else {
					args = append(args, "--no-superblock")
				}
				out, err := exec.Command("veritysetup", args...).CombinedOutput()
				if err != nil {
					t.Fatalf("veritysetup %v: %v\n%s", args, err, out)
				}
				m := veritysetupRoot.FindSubmatch(out)
				if m == nil {
					t.Fatalf("no root hash in veritysetup's output:\n%s", out)
				}
				part, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				p := Param{DataBlocks: n, HashStartBlock: hashStart, RootHash: string(m[1]), Salt: salt}
				got, err := p.TopHash(topOf(t, part, p))
				if err != nil || got != p.RootHash {
					t.Fatalf("TopHash = %s, %v; veritysetup's root hash is %s", got, err, p.RootHash)
				}
				// Any other block (the first data block, the block after
				// the top) is not the root.
				for _, off := range []int64{0, p.TopOffset() + BlockSize} {
					if off == p.TopOffset() || off+BlockSize > int64(len(part)) {
						continue
					}
					if h, _ := p.TopHash(part[off : off+BlockSize]); h == p.RootHash {
						t.Errorf("the block at byte %d also hashes to the root hash", off)
					}
				}
			})
		}
	}
}

// The same rule for image/verity's trees (the disk image's builder), up
// to two levels (the top one first, the three blocks below after it), with its derived salt and with no salt at all, and a
// flipped bit in the top block is no match.
func TestTopHashImageBuilder(t *testing.T) {
	for _, n := range []uint64{1, 129, 300} {
		for _, noSalt := range []bool{false, true} {
			data := topTestData(n)
			o := iverity.Options{}
			if noSalt {
				o.Salt = []byte{} // none; nil derives one from the data
			}
			tr, err := iverity.Build(bytes.NewReader(data), int64(len(data)), o)
			if err != nil {
				t.Fatal(err)
			}
			if noSalt != (tr.SaltHex() == "-") {
				t.Fatalf("%d blocks: salt %s, want none: %v", n, tr.SaltHex(), noSalt)
			}
			part := append(data, tr.Hash...)
			p := Param{DataBlocks: tr.DataBlocks, HashStartBlock: tr.HashStartBlock(int64(len(data))), RootHash: tr.RootHashHex(), Salt: tr.SaltHex()}
			top := bytes.Clone(topOf(t, part, p))
			if got, err := p.TopHash(top); err != nil || got != p.RootHash {
				t.Errorf("%d blocks, salt %s: TopHash = %s, %v; the builder's root hash is %s", n, p.Salt, got, err, p.RootHash)
			}
			top[BlockSize-1] ^= 1
			if got, _ := p.TopHash(top); got == p.RootHash {
				t.Errorf("%d blocks: a flipped bit in the top block still matches", n)
			}
		}
	}
}

func TestTopHashRejectsShortBlock(t *testing.T) {
	p := Param{DataBlocks: 300, HashStartBlock: 300, RootHash: root, Salt: "00ff"}
	if _, err := p.TopHash(make([]byte, BlockSize-1)); err == nil {
		t.Fatal("a short block was hashed")
	}
	if p.TopOffset() != 300*BlockSize {
		t.Fatalf("TopOffset = %d, want the hash start %d", p.TopOffset(), 300*BlockSize)
	}
	if one := (Param{DataBlocks: 1, HashStartBlock: 1}); one.TopOffset() != 0 {
		t.Fatalf("one data block: TopOffset = %d, want 0 (the block itself)", one.TopOffset())
	}
}
