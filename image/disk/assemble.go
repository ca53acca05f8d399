package disk

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/berth-node/berth/image/disk/esp"
	"github.com/berth-node/berth/image/disk/uki"
	"github.com/berth-node/berth/image/verity"
	"github.com/berth-node/berth/mounts/partition"
	mverity "github.com/berth-node/berth/mounts/verity"
)

// DefaultDataSize is the data partition's size in the image; berth grows
// it to the disk at first boot.
const DefaultDataSize = 16 << 20

// Inputs are what Assemble puts on the disk.
type Inputs struct {
	RootFS string // the erofs image (a multiple of 4096 bytes)
	// RootFSSize is how many bytes of RootFS are the filesystem (an
	// image's root.erofs has its own hash tree after them); 0 means the
	// whole file.
	RootFSSize int64
	Kernel     string // the kernel image (bzImage; arm64: Image, an EFI application itself)
	Initrd     string // initramfs
	OSRelease  []byte
	// Cmdline is the kernel command line; Assemble appends berth.verity=.
	Cmdline string
	// DataSize defaults to DefaultDataSize.
	DataSize int64
	// Epoch is every timestamp written (ESP entries, PE header); 0 gives
	// FAT's epoch.
	Epoch int64
	// Stub is the EFI stub; Arch's (uki.StubFor) when empty.
	Stub string
	// Arch is the architecture the disk boots on (amd64 when empty): it
	// picks the stub, checks its PE machine, and names the ESP's loader.
	Arch string
}

// Result says what Assemble wrote, for the manifest and the build log.
type Result struct {
	Layout   partition.DiskLayout
	RootHash string // hex
	Verity   mverity.Param
	Cmdline  string // as put in the UKI
	SHA256   string // of the whole disk image
}

// Assemble writes disk.raw to out: the GPT from Plan, the ESP holding a
// UKI whose command line carries the root filesystem's verity parameters,
// and the root partition holding the erofs image followed by its hash tree
// (no superblock: every parameter is on the command line). The data
// partition is left zero; berth formats it on first boot. Same inputs, same
// bytes.
func Assemble(ctx context.Context, log *slog.Logger, out string, in Inputs) (Result, error) {
	fail := func(err error) (Result, error) { return Result{}, fmt.Errorf("assembling disk image %s: %w", out, err) }
	if in.DataSize == 0 {
		in.DataSize = DefaultDataSize
	}
	if in.Epoch == 0 {
		in.Epoch = esp.FATEpoch
	}
	root, err := os.Open(in.RootFS)
	if err != nil {
		return fail(err)
	}
	defer root.Close()
	st, err := root.Stat()
	if err != nil {
		return fail(err)
	}
	size := st.Size()
	if in.RootFSSize != 0 {
		if in.RootFSSize < 0 || in.RootFSSize > size {
			return fail(fmt.Errorf("root filesystem %s: %d bytes, RootFSSize %d", in.RootFS, size, in.RootFSSize))
		}
		size = in.RootFSSize
	}
	tree, err := verity.Build(root, size, verity.Options{})
	if err != nil {
		return fail(fmt.Errorf("root filesystem %s: %w", in.RootFS, err))
	}
	param := mverity.Param{DataBlocks: tree.DataBlocks, HashStartBlock: tree.HashStartBlock(size), RootHash: tree.RootHashHex(), Salt: tree.SaltHex()}
	cmdline := strings.TrimSpace(in.Cmdline + " " + mverity.ParamKey + "=" + param.String())

	tmp, err := os.MkdirTemp(filepath.Dir(out), ".disk-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(tmp)
	stub, machine, ok := uki.StubFor(in.Arch)
	bootPath, _ := esp.BootPathFor(in.Arch)
	if !ok {
		return fail(fmt.Errorf("architecture %q: want amd64 or arm64", in.Arch))
	}
	if in.Stub != "" {
		stub = in.Stub
	}
	ukiPath := filepath.Join(tmp, "UKI.EFI")
	if err := uki.Build(ctx, log, ukiPath, uki.Inputs{OSRelease: in.OSRelease, Cmdline: cmdline, Kernel: in.Kernel, Initrd: in.Initrd},
		uki.Options{Stub: stub, Machine: machine, Objcopy: uki.ObjcopyFor(in.Arch), Epoch: uint32(in.Epoch)}); err != nil {
		return fail(err)
	}
	us, err := os.Stat(ukiPath)
	if err != nil {
		return fail(err)
	}
	// Room for a kernel or initramfs a little larger in an update, and for
	// FAT's own structures.
	espSize := (us.Size()*5/4 + 4<<20 + (1<<20 - 1)) / (1 << 20) * (1 << 20)
	espPath := filepath.Join(tmp, "esp.img")
	if err := esp.Build(ctx, log, espPath, esp.Options{Size: espSize, VolumeID: binary.BigEndian.Uint32(tree.RootHash), Epoch: in.Epoch},
		[]esp.File{{Path: bootPath, Src: ukiPath}}); err != nil {
		return fail(err)
	}
	l, err := Plan(Sizes{ESP: espSize, Root: size + int64(len(tree.Hash)), Data: in.DataSize}, tree.RootHash)
	if err != nil {
		return fail(err)
	}
	espP, _, _ := l.Find(partition.NameESP)
	rootP, _, _ := l.Find(partition.NameRoot)

	part := out + ".tmp"
	f, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fail(err)
	}
	defer os.Remove(part)
	defer f.Close()
	if err := f.Truncate(l.Size()); err != nil {
		return fail(err)
	}
	if err := partition.WriteDisk(f, l); err != nil {
		return fail(err)
	}
	ef, err := os.Open(espPath)
	if err != nil {
		return fail(err)
	}
	_, err = io.Copy(io.NewOffsetWriter(f, espP.Offset()), ef)
	ef.Close()
	if err != nil {
		return fail(fmt.Errorf("copying the ESP: %w", err))
	}
	if _, err := io.Copy(io.NewOffsetWriter(f, rootP.Offset()), io.NewSectionReader(root, 0, size)); err != nil {
		return fail(fmt.Errorf("copying the root filesystem: %w", err))
	}
	if _, err := f.WriteAt(tree.Hash, rootP.Offset()+size); err != nil {
		return fail(fmt.Errorf("writing the verity hash tree: %w", err))
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, l.Size())); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		return fail(err)
	}
	if err := os.Rename(part, out); err != nil {
		return fail(err)
	}
	r := Result{Layout: l, RootHash: tree.RootHashHex(), Verity: param, Cmdline: cmdline, SHA256: hex.EncodeToString(h.Sum(nil))}
	log.Info("disk image assembled", "path", out, "bytes", l.Size(), "root_fs_bytes", size, "root_hash", r.RootHash, "sha256", r.SHA256)
	return r, nil
}
