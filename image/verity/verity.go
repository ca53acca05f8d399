// Package verity computes the dm-verity hash tree of a read-only filesystem
// image at build time, byte for byte as `veritysetup format` does with its
// defaults (format version 1, sha256, 4096-byte data and hash blocks), so
// that the kernel's verity target, given the root hash on the command line,
// accepts the image and refuses any block that changed.
//
// The salt is derived from the data (see Salt) rather than random, so the
// same root filesystem always gives the same hash tree and root hash: the
// disk image is reproducible.
//
// A veritysetup superblock is optional (Options.Superblock). berth does not
// need one: it builds the kernel's table from parameters carried in the
// UKI's command line, which the root hash authenticates only together with
// those parameters; the superblock itself is not covered by the root hash.
// It is still worth writing because `veritysetup verify/open` can then check
// the image with nothing but the root hash, which is how an operator
// inspects a disk by hand.
package verity

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
)

const (
	// BlockSize is both the data and the hash block size (veritysetup's
	// default, and the page size the kernel verifies in).
	BlockSize = 4096
	// Algorithm is the hash the tree uses.
	Algorithm = "sha256"
	// Version is the verity format: 1 hashes salt||block (0 is Chrome OS's
	// block||salt).
	Version = 1
	// SaltSize is veritysetup's default salt length.
	SaltSize = 32
	// SuperblockSize is the space the superblock takes before the tree:
	// struct verity_sb is 512 bytes, and the tree starts at the next hash
	// block boundary.
	SuperblockSize = BlockSize

	digestSize    = sha256.Size
	hashesPerBlk  = BlockSize / digestSize
	maxLevels     = 63
	sbStructSize  = 512
	sbSignature   = "verity\x00\x00"
	sbVersion     = 1
	maxSaltLength = 256
)

// Options choose what Build writes besides the tree.
type Options struct {
	// Salt; nil means Salt(data).
	Salt []byte
	// Superblock puts veritysetup's superblock before the tree, with UUID
	// as the hash device's UUID.
	Superblock bool
	UUID       [16]byte
}

// Tree is the result of Build.
type Tree struct {
	RootHash   []byte
	Salt       []byte
	DataBlocks uint64
	// Levels is the tree's height (0 when the data is one block: the root
	// hash is then the data block's own hash).
	Levels int
	// Hash is what goes on the hash device at the hash offset: the
	// superblock (if any, padded to SuperblockSize), then the levels from
	// the top one down, as veritysetup lays them out.
	Hash []byte
	// Superblock records whether Hash starts with one.
	Superblock bool
}

// RootHashHex is the root hash as the kernel table and veritysetup write it.
func (t *Tree) RootHashHex() string { return hex.EncodeToString(t.RootHash) }

// SaltHex is the salt as the kernel table writes it ("-" for none).
func (t *Tree) SaltHex() string {
	if len(t.Salt) == 0 {
		return "-"
	}
	return hex.EncodeToString(t.Salt)
}

// HashStartBlock is the kernel table's hash_start_block when Hash is
// written hashOffset bytes into the hash device (for a tree appended to
// the data on the same device, hashOffset is the data size).
func (t *Tree) HashStartBlock(hashOffset int64) uint64 {
	b := uint64(hashOffset) / BlockSize
	if t.Superblock {
		b += SuperblockSize / BlockSize
	}
	return b
}

// Salt derives a reproducible salt from the data: different images get
// different salts (which is what a salt is for) while one image always gets
// the same one. It reads r to the end.
func Salt(r io.Reader) ([]byte, error) {
	h := sha256.New()
	h.Write([]byte("berth dm-verity salt v1\x00"))
	if _, err := io.Copy(h, r); err != nil {
		return nil, fmt.Errorf("reading data to derive the verity salt: %w", err)
	}
	return h.Sum(nil), nil
}

// Build computes the hash tree of the first size bytes of data, which must
// be a whole number of BlockSize blocks (erofs images are).
func Build(data io.ReaderAt, size int64, o Options) (*Tree, error) {
	if size <= 0 || size%BlockSize != 0 {
		return nil, fmt.Errorf("verity data of %d bytes: must be a positive multiple of %d", size, BlockSize)
	}
	salt := o.Salt
	if salt == nil {
		s, err := Salt(io.NewSectionReader(data, 0, size))
		if err != nil {
			return nil, err
		}
		salt = s
	}
	if len(salt) > maxSaltLength {
		return nil, fmt.Errorf("verity salt of %d bytes: at most %d", len(salt), maxSaltLength)
	}
	nData := uint64(size / BlockSize)
	levels := Levels(nData)

	// Level i has ceil(nData / 128^(i+1)) blocks; level 0 hashes data.
	sizes := make([]uint64, levels)
	for i := range levels {
		sizes[i] = (nData + (1 << (7 * uint(i+1))) - 1) >> (7 * uint(i+1))
	}
	t := &Tree{Salt: salt, DataBlocks: nData, Levels: levels, Superblock: o.Superblock}
	var hdr []byte
	if o.Superblock {
		hdr = superblock(o.UUID, salt, nData)
	}
	// Each level is written after the ones above it; compute bottom up.
	lvl := make([][]byte, levels)
	blk := make([]byte, BlockSize)
	hashBlock := func(b []byte) [digestSize]byte {
		h := sha256.New()
		h.Write(salt)
		h.Write(b)
		var d [digestSize]byte
		h.Sum(d[:0])
		return d
	}
	for i := range levels {
		out := make([]byte, sizes[i]*BlockSize)
		var n uint64
		var src func(j uint64) ([]byte, error)
		if i == 0 {
			n = nData
			src = func(j uint64) ([]byte, error) {
				return blk, readBlock(data, j, blk)
			}
		} else {
			n = sizes[i-1]
			below := lvl[i-1]
			src = func(j uint64) ([]byte, error) { return below[j*BlockSize : (j+1)*BlockSize], nil }
		}
		for j := range n {
			b, err := src(j)
			if err != nil {
				return nil, err
			}
			d := hashBlock(b)
			copy(out[j*digestSize:], d[:])
		}
		lvl[i] = out
	}
	var root [digestSize]byte
	if levels == 0 {
		if err := readBlock(data, 0, blk); err != nil {
			return nil, err
		}
		root = hashBlock(blk)
	} else {
		root = hashBlock(lvl[levels-1])
	}
	t.RootHash = root[:]
	var buf bytes.Buffer
	buf.Write(hdr)
	for i := levels - 1; i >= 0; i-- {
		buf.Write(lvl[i])
	}
	t.Hash = buf.Bytes()
	return t, nil
}

// readBlock reads data block j whole; io.ReaderAt may return io.EOF with
// a full last block, but a short one means the data is smaller than said.
func readBlock(r io.ReaderAt, j uint64, b []byte) error {
	n, err := r.ReadAt(b, int64(j)*BlockSize)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("reading verity data block %d: %w", j, err)
}

// Levels is the height of the tree over n data blocks, as veritysetup
// counts it: the smallest l with 128^l >= n.
func Levels(n uint64) int {
	l := 0
	for l < maxLevels && l*7 < 64 && (n-1)>>(7*uint(l)) != 0 {
		l++
	}
	return l
}

// HashSize is len(Tree.Hash) for n data blocks, without computing it: the
// image builder needs it to size the root partition before hashing.
func HashSize(n uint64, superblock bool) int64 {
	var s uint64
	for i := range Levels(n) {
		s += (n + (1 << (7 * uint(i+1))) - 1) >> (7 * uint(i+1))
	}
	size := int64(s) * BlockSize
	if superblock {
		size += SuperblockSize
	}
	return size
}

// superblock encodes struct verity_sb (little-endian, packed) padded to
// SuperblockSize.
func superblock(uuid [16]byte, salt []byte, nData uint64) []byte {
	b := make([]byte, SuperblockSize)
	copy(b[0:8], sbSignature)
	binary.LittleEndian.PutUint32(b[8:], sbVersion)
	binary.LittleEndian.PutUint32(b[12:], Version)
	copy(b[16:32], uuid[:])
	copy(b[32:64], Algorithm)
	binary.LittleEndian.PutUint32(b[64:], BlockSize)
	binary.LittleEndian.PutUint32(b[68:], BlockSize)
	binary.LittleEndian.PutUint64(b[72:], nData)
	binary.LittleEndian.PutUint16(b[80:], uint16(len(salt)))
	copy(b[88:88+maxSaltLength], salt)
	return b
}
