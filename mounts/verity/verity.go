// Package verity sets up the dm-verity device berth mounts its root from
// on a disk-image boot: the kernel's `verity` device-mapper target over the
// root partition (erofs followed by its hash tree), checked against the
// root hash that the unified kernel image's command line carries.
//
// The parameters travel in one command-line word, berth.verity=, written
// by the image builder (see Param) so that the root hash, salt and tree
// position cannot be given separately from each other.
//
// On corruption the table's default mode is kept: a read of a tampered
// block fails with EIO and the kernel logs "dm-verity ... data block N is
// corrupted". That is the mode in which berth, not the kernel, reports the
// failure: the mount (or ReadAll, which berth can run before moving to the
// root) fails, and berth prints the error and stops. restart_on_corruption
// would turn a tampered disk into a reboot loop, and panic_on_corruption
// stops the boot with only a kernel panic; both are available (Mode) for
// a production policy that prefers them.
//
// Table construction and Param parsing are pure; Setup acts through
// mounts/raid's device-mapper ioctls and needs root and dm-verity.
package verity

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/berth-node/berth/mounts/raid"
)

const (
	// BlockSize is the data and hash block size berth's images use.
	BlockSize = 4096
	// Algorithm is the tree's hash.
	Algorithm = "sha256"
	// ParamKey is the kernel command-line key for Param.
	ParamKey = "berth.verity"

	sectorsPerBlock = BlockSize / 512
	rootHashHexLen  = 64
	maxSaltHexLen   = 512
)

// Mode is what the kernel does on a corrupted block.
type Mode string

const (
	// ModeEIO fails the read (the kernel's default; berth reports it).
	ModeEIO Mode = ""
	// ModeRestart reboots the machine.
	ModeRestart Mode = "restart_on_corruption"
	// ModePanic panics the kernel.
	ModePanic Mode = "panic_on_corruption"
)

// Params describe one verity device.
type Params struct {
	DataDev, HashDev string // /dev paths or major:minor
	DataBlocks       uint64 // 4096-byte blocks of the filesystem
	HashStartBlock   uint64 // 4096-byte block on HashDev where the tree (after any superblock) starts
	RootHash         string // hex
	Salt             string // hex, or "-" for none
	Mode             Mode
}

// Table is the one-target device-mapper table for p:
// `0 <sectors> verity 1 <data> <hash> 4096 4096 <blocks> <hash start> sha256 <root> <salt> [1 <mode>]`.
func Table(p Params) (raid.Target, error) {
	for _, d := range []struct{ what, v string }{{"data device", p.DataDev}, {"hash device", p.HashDev}} {
		if d.v == "" || strings.ContainsAny(d.v, " \t\n\x00") {
			return raid.Target{}, fmt.Errorf("verity %s %q", d.what, d.v)
		}
	}
	if p.DataBlocks == 0 || p.DataBlocks > (1<<63)/BlockSize {
		return raid.Target{}, fmt.Errorf("verity data blocks %d", p.DataBlocks)
	}
	if p.DataDev == p.HashDev && p.HashStartBlock < p.DataBlocks {
		return raid.Target{}, fmt.Errorf("verity hash tree at block %d overlaps the %d data blocks on %s", p.HashStartBlock, p.DataBlocks, p.DataDev)
	}
	if err := checkHex("root hash", p.RootHash, rootHashHexLen, rootHashHexLen); err != nil {
		return raid.Target{}, err
	}
	if p.Salt != "-" {
		if err := checkHex("salt", p.Salt, 2, maxSaltHexLen); err != nil {
			return raid.Target{}, err
		}
	}
	params := fmt.Sprintf("1 %s %s %d %d %d %d %s %s %s", p.DataDev, p.HashDev, BlockSize, BlockSize,
		p.DataBlocks, p.HashStartBlock, Algorithm, strings.ToLower(p.RootHash), strings.ToLower(p.Salt))
	switch p.Mode {
	case ModeEIO:
	case ModeRestart, ModePanic:
		params += " 1 " + string(p.Mode)
	default:
		return raid.Target{}, fmt.Errorf("verity corruption mode %q", p.Mode)
	}
	return raid.Target{Start: 0, Length: p.DataBlocks * sectorsPerBlock, Type: "verity", Params: params}, nil
}

func checkHex(what, s string, minLen, maxLen int) error {
	if len(s) < minLen || len(s) > maxLen || len(s)%2 != 0 {
		return fmt.Errorf("verity %s %q: want %d to %d hex digits", what, s, minLen, maxLen)
	}
	if _, err := hex.DecodeString(s); err != nil {
		return fmt.Errorf("verity %s %q: %w", what, s, err)
	}
	return nil
}

// Param is what berth.verity= carries: the tree's parameters, without the
// devices (berth finds the root partition by its GPT name and type).
type Param struct {
	DataBlocks     uint64
	HashStartBlock uint64 // relative to the root partition's start
	RootHash       string
	Salt           string
}

// String encodes p as berth.verity='s value:
// sha256:<root hash>:<salt>:<data blocks>:<hash start block>.
func (p Param) String() string {
	return fmt.Sprintf("%s:%s:%s:%d:%d", Algorithm, p.RootHash, p.Salt, p.DataBlocks, p.HashStartBlock)
}

// ParseParam reads berth.verity='s value (from the command line, so
// outside input until the root hash has checked the data).
func ParseParam(s string) (Param, error) {
	f := strings.Split(s, ":")
	if len(f) != 5 {
		return Param{}, fmt.Errorf("%s=%q: want %s:<root hash>:<salt>:<data blocks>:<hash start block>", ParamKey, s, Algorithm)
	}
	if f[0] != Algorithm {
		return Param{}, fmt.Errorf("%s=%q: hash %q, berth supports only %s", ParamKey, s, f[0], Algorithm)
	}
	n, err1 := strconv.ParseUint(f[3], 10, 64)
	h, err2 := strconv.ParseUint(f[4], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return Param{}, fmt.Errorf("%s=%q: block numbers: %w", ParamKey, s, err)
	}
	p := Param{DataBlocks: n, HashStartBlock: h, RootHash: strings.ToLower(f[1]), Salt: strings.ToLower(f[2])}
	// Validate through the table itself, on one device as berth uses it.
	if _, err := Table(p.On("dev")); err != nil {
		return Param{}, fmt.Errorf("%s=%q: %w", ParamKey, s, err)
	}
	return p, nil
}

// On is p for a root partition dev holding both the data and the tree.
func (p Param) On(dev string) Params {
	return Params{DataDev: dev, HashDev: dev, DataBlocks: p.DataBlocks, HashStartBlock: p.HashStartBlock, RootHash: p.RootHash, Salt: p.Salt}
}

// Setup creates the read-only verity device name over p and returns the
// path of its node (/dev/dm-N, which devtmpfs makes). The kernel checks
// only the table's syntax when it is loaded: a wrong root hash or a
// tampered block shows up as a read error (EIO) later, not here.
func Setup(ctx context.Context, log *slog.Logger, control, name string, p Params) (string, error) {
	t, err := Table(p)
	if err != nil {
		return "", err
	}
	start := time.Now()
	d, err := raid.CreateReadOnly(ctx, control, name, "BERTH-VERITY-"+name, t)
	if err != nil {
		return "", fmt.Errorf("setting up dm-verity device %s over %s: %w", name, p.DataDev, err)
	}
	path := fmt.Sprintf("/dev/dm-%d", d.Minor)
	deadline := time.Now().Add(2 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			break
		} else if time.Now().After(deadline) {
			return "", fmt.Errorf("dm-verity device %s (%s) has no node %s: %w", name, d.Dev(), path, err)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	log.Info("dm-verity device ready", "name", name, "dev", path, "data", p.DataDev, "blocks", p.DataBlocks,
		"root_hash", p.RootHash, "took", time.Since(start))
	return path, nil
}

// CorruptError says a block of a verity device failed its check.
type CorruptError struct {
	Dev    string
	Offset int64 // byte offset of the first unreadable block
	Err    error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("dm-verity: %s is corrupted at byte %d (block %d): %v; the root filesystem does not match the root hash this image was built with",
		e.Dev, e.Offset, e.Offset/BlockSize, e.Err)
}

func (e *CorruptError) Unwrap() error { return e.Err }

// ReadAll reads the whole verity device so that any tampered block fails
// now, with a CorruptError berth can print, rather than later inside some
// process. It costs one pass over the root filesystem.
func ReadAll(ctx context.Context, dev string) error {
	f, err := os.Open(dev)
	if err != nil {
		return fmt.Errorf("opening %s to verify it: %w", dev, err)
	}
	defer f.Close()
	return readAll(ctx, dev, f)
}

func readAll(ctx context.Context, dev string, f io.ReaderAt) error {
	buf := make([]byte, 1<<20)
	var off int64
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("verifying %s: stopped at byte %d: %w", dev, off, err)
		}
		n, err := f.ReadAt(buf, off)
		off += int64(n)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			// Find the first bad block within this chunk for the message.
			bad := off
			blk := make([]byte, BlockSize)
			for o := off; o < off+int64(len(buf)); o += BlockSize {
				if _, berr := f.ReadAt(blk, o); berr != nil && !errors.Is(berr, io.EOF) {
					bad = o
					break
				}
			}
			return &CorruptError{Dev: dev, Offset: bad, Err: err}
		}
	}
}

// hashesPerBlock is how many sha256 digests a 4096-byte hash block holds.
const hashesPerBlock = BlockSize / sha256.Size

// TreeLevels is the block count of each level of the dm-verity hash tree
// over n data blocks, level 0 (the one that hashes the data) first, as
// veritysetup lays it out and image/verity builds it (the host side
// keeps its own count: PID 1 links none of the image builder): level i has
// ceil(n / 128^(i+1)) blocks, up to a level of one block, whose hash is
// the root hash. One data block needs no tree: its own hash is the root.
func TreeLevels(n uint64) []uint64 {
	var lv []uint64
	for c := n; c > 1; {
		c = (c + hashesPerBlock - 1) / hashesPerBlock
		lv = append(lv, c)
	}
	return lv
}

// TreeBlocks is the hash tree's size in blocks over n data blocks.
func TreeBlocks(n uint64) uint64 {
	var s uint64
	for _, c := range TreeLevels(n) {
		s += c
	}
	return s
}

// TopOffset is the byte offset, from the root partition's start, of the
// block whose hash is the root hash: the hash tree's top level, a single
// block, which veritysetup's layout puts first at the hash start (levels
// are stored top down). With one data block there is no tree, and that
// block is the data block itself.
func (p Param) TopOffset() int64 {
	if len(TreeLevels(p.DataBlocks)) == 0 {
		return 0
	}
	return int64(p.HashStartBlock) * BlockSize
}

// TopHash is the hash that block, read at TopOffset, gives under p's salt
// as the kernel's verity target (format 1) computes it: sha256(salt ||
// block), in hex. A partition holds p's root exactly when this equals
// p.RootHash (and, below it, every block matches the tree, which the
// kernel checks as the device is read).
func (p Param) TopHash(block []byte) (string, error) {
	if len(block) != BlockSize {
		return "", fmt.Errorf("a verity tree's top block is %d bytes; got %d", BlockSize, len(block))
	}
	h := sha256.New()
	if p.Salt != "-" {
		salt, err := hex.DecodeString(p.Salt)
		if err != nil {
			return "", fmt.Errorf("verity salt %q: %w", p.Salt, err)
		}
		h.Write(salt)
	}
	h.Write(block)
	return hex.EncodeToString(h.Sum(nil)), nil
}
