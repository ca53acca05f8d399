package apply

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/berth-node/berth/mounts/verity"
)

// dataBlocksFor is how many data blocks a slot image of length bytes
// holds: the image is the data followed at once by its hash tree (no
// superblock), as image/disk writes slot a, so length is 4096 × (n +
// verity.TreeBlocks(n)) for exactly one n when the image is one at all. n +
// verity.TreeBlocks(n) grows with n, so a binary search finds it.
func dataBlocksFor(length int64) (uint64, bool) {
	if length <= 0 || length%verity.BlockSize != 0 {
		return 0, false
	}
	total := uint64(length / verity.BlockSize)
	lo, hi := uint64(1), total
	for lo <= hi {
		n := lo + (hi-lo)/2
		switch t := n + verity.TreeBlocks(n); {
		case t == total:
			return n, true
		case t < total:
			lo = n + 1
		default:
			hi = n - 1
		}
	}
	return 0, false
}

// MismatchError says where a slot's bytes are not what the root hash
// vouches for: dm-verity would fail the read of that block (EIO) at the
// next boot, and berth would stop that boot.
type MismatchError struct {
	// Offset is the block's byte offset in the slot.
	Offset int64
	// Level is -1 for a data block, else the hash tree level of a hash
	// block (0 hashes the data).
	Level int
	// Block is the block's number: in the data, or within its level.
	Block uint64
	// RootHash is the root hash checked against.
	RootHash string
}

func (e *MismatchError) Error() string {
	what := fmt.Sprintf("data block %d", e.Block)
	if e.Level >= 0 {
		what = fmt.Sprintf("hash tree block %d of level %d", e.Block, e.Level)
	}
	return fmt.Sprintf("%s at byte %d of the slot does not match root hash %s: the slot does not hold the release's root image", what, e.Offset, e.RootHash)
}

// verifyChunk is how many blocks verifySlot reads at once: 1 MiB, the
// only buffer it needs whatever the image's size.
const verifyChunk = 256

// verifySlot checks r (the slot) as the kernel's verity target will with
// p: every hash block against the one above it, from the root hash down,
// then every data block against the tree. Checking top down means a
// mismatch is named at the block that is wrong, not at a block that is
// right but hashed against a wrong one. It reads each byte of the data
// and the tree once, in bounded memory, and returns how many of those
// it checked.
func verifySlot(ctx context.Context, r io.ReaderAt, p verity.Param) (int64, error) {
	root, err := hex.DecodeString(p.RootHash)
	if err != nil || len(root) != sha256.Size {
		return 0, fmt.Errorf("root hash %q: want %d hex digits", p.RootHash, 2*sha256.Size)
	}
	var salt []byte
	if p.Salt != "-" {
		if salt, err = hex.DecodeString(p.Salt); err != nil {
			return 0, fmt.Errorf("salt %q: %w", p.Salt, err)
		}
	}
	if p.DataBlocks == 0 || p.HashStartBlock < p.DataBlocks {
		return 0, fmt.Errorf("verity parameters %s: the tree at block %d overlaps the %d data blocks", p, p.HashStartBlock, p.DataBlocks)
	}
	v := &verifier{ctx: ctx, r: r, salt: salt, h: sha256.New(), buf: make([]byte, verifyChunk*verity.BlockSize), root: p.RootHash}
	levels := verity.TreeLevels(p.DataBlocks)
	// Levels sit top first from the hash start: offs[i] is level i's.
	offs := make([]int64, len(levels))
	off := int64(p.HashStartBlock) * verity.BlockSize
	for i := len(levels) - 1; i >= 0; i-- {
		offs[i] = off
		off += int64(levels[i]) * verity.BlockSize
	}
	top, topLevel, topOff := root, -1, int64(0)
	if len(levels) > 0 {
		topLevel, topOff = len(levels)-1, offs[len(levels)-1]
	}
	// The top block (the only data block when there is no tree) against
	// the root hash.
	if err := v.level(topOff, 1, topLevel, func(uint64, int) ([]byte, error) { return top, nil }); err != nil {
		return v.read, err
	}
	for i := len(levels) - 2; i >= -1; i-- {
		childOff, n := int64(0), p.DataBlocks
		if i >= 0 {
			childOff, n = offs[i], levels[i]
		}
		parent := offs[i+1]
		entries := make([]byte, verifyChunk*sha256.Size)
		// Entries of the level above, read a chunk's worth at a time.
		entry := func(first uint64, j int) ([]byte, error) {
			if j == 0 {
				k := min(verifyChunk, n-first)
				if err := v.readAt(entries[:k*sha256.Size], parent+int64(first)*sha256.Size); err != nil {
					return nil, err
				}
			}
			return entries[j*sha256.Size : (j+1)*sha256.Size], nil
		}
		if err := v.level(childOff, n, i, entry); err != nil {
			return v.read, err
		}
	}
	return v.read, nil
}

// verifier holds what verifySlot's passes share.
type verifier struct {
	ctx  context.Context
	r    io.ReaderAt
	salt []byte
	h    hash.Hash
	buf  []byte
	sum  [sha256.Size]byte
	read int64
	root string
}

// level checks n blocks from off (level's: -1 for data) against the
// digests want gives: the j-th block of the chunk starting at block first.
func (v *verifier) level(off int64, n uint64, level int, want func(first uint64, j int) ([]byte, error)) error {
	for first := uint64(0); first < n; first += verifyChunk {
		if err := v.ctx.Err(); err != nil {
			return fmt.Errorf("stopped at byte %d: %w", off+int64(first)*verity.BlockSize, err)
		}
		k := int(min(verifyChunk, n-first))
		chunk := v.buf[:k*verity.BlockSize]
		if err := v.readAt(chunk, off+int64(first)*verity.BlockSize); err != nil {
			return err
		}
		v.read += int64(len(chunk))
		for j := range k {
			w, err := want(first, j)
			if err != nil {
				return err
			}
			v.h.Reset()
			v.h.Write(v.salt)
			v.h.Write(chunk[j*verity.BlockSize : (j+1)*verity.BlockSize])
			if string(v.h.Sum(v.sum[:0])) != string(w) {
				b := first + uint64(j)
				return &MismatchError{Offset: off + int64(b)*verity.BlockSize, Level: level, Block: b, RootHash: v.root}
			}
		}
	}
	return nil
}

// readAt fills b from off; a short read is the slot ending early.
func (v *verifier) readAt(b []byte, off int64) error {
	n, err := v.r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("reading %d bytes at byte %d of the slot: %w", len(b), off, err)
}
