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
	"github.com/berth-node/berth/internal/fsutil"
	"github.com/berth-node/berth/mounts/partition"
	mverity "github.com/berth-node/berth/mounts/verity"
	"github.com/berth-node/berth/update/bootcount"
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
	// picks the stub and systemd-boot, checks the stub's PE machine, and
	// names the ESP's loader.
	Arch string
	// Version names the UKI on the ESP (EFI/Linux/berth-<Version>.efi),
	// by which systemd-boot orders its entries; "dev" when empty.
	Version string
	// BootLoader is systemd-boot's EFI binary; Arch's (BootLoaderFor)
	// when empty.
	BootLoader string
	// Sign, when set, signs each EFI binary on the ESP (systemd-boot and
	// the UKI) once its content is final: the UKI's command line, with the
	// root hash, is then covered by the signature. Without it the disk
	// boots only with Secure Boot off.
	Sign func(pe []byte) ([]byte, error)
	// EnrollKeys, when set, are PK.auth, KEK.auth and db.auth (Src on the
	// host): they go under loader/keys/auto/, from which systemd-boot
	// enrolls them on a machine in Secure Boot setup mode (bare metal, a
	// new QEMU vars file) and reboots into Secure Boot.
	EnrollKeys []esp.File
	// UKIOut, when set, is where the UKI is also written, as it is on the
	// ESP (signed when Sign is set): a release's UKI for an update
	// repository (berth.efi beside disk.raw).
	UKIOut string
}

// BootLoaderFor is systemd-boot's EFI binary for an architecture, from
// Debian's systemd-boot-efi (Multi-Arch: same, so arm64's installs beside
// amd64's).
func BootLoaderFor(arch string) (string, bool) {
	switch arch {
	case "", "amd64":
		return "/usr/lib/systemd/boot/efi/systemd-bootx64.efi", true
	case "arm64":
		return "/usr/lib/systemd/boot/efi/systemd-bootaa64.efi", true
	}
	return "", false
}

// OSRelease is a berth image's os-release: /etc/os-release in its root
// and the UKI's .osrel, from which systemd-boot takes an entry's title
// (PRETTY_NAME), its kind (ID) and the version it orders entries by
// (VERSION_ID); it skips a UKI that lacks any of them.
func OSRelease(version string) string {
	return fmt.Sprintf("NAME=berth\nID=berth\nPRETTY_NAME=\"berth %s\"\nVERSION_ID=%s\nHOME_URL=\"https://github.com/berth-node/berth\"\n",
		version, version)
}

// UKIPath is where a version's UKI sits on the ESP: systemd-boot lists
// every EFI/Linux/*.efi with an .osrel section as a boot entry.
func UKIPath(version string) string { return "EFI/Linux/berth-" + version + ".efi" }

// LoaderConf is systemd-boot's loader/loader.conf on the disk: boot the
// first entry at once (no menu delay; a key held at boot still shows the
// menu), no command line editor (a UKI's command line is part of what is
// signed), no entries of other systems, and, when enroll is set, enroll
// the keys under loader/keys/auto/ on a machine in setup mode. The first
// entry is the newest version with tries left (systemd-boot's order).
func LoaderConf(enroll bool) string {
	c := "timeout 0\neditor no\nauto-entries no\nauto-firmware no\n"
	if enroll {
		c += "secure-boot-enroll force\n"
	}
	return c
}

// keysDir is where systemd-boot 252 auto-enrolls from: only a directory
// named "auto" is enrolled without a user picking it from the menu.
const keysDir = "loader/keys/auto"

// Result says what Assemble wrote, for the manifest and the build log.
type Result struct {
	Layout   partition.DiskLayout
	RootHash string // hex
	Verity   mverity.Param
	Cmdline  string // as put in the UKI
	SHA256   string // of the whole disk image
	// UKI is the UKI's path on the ESP (UKIPath).
	UKI string
	// Slot is the root slot the root was written to (a new disk's is a);
	// the UKI finds it by its root hash.
	Slot partition.Slot
	// Signed says the ESP's EFI binaries were signed (Inputs.Sign).
	Signed bool
	// Enroll says the ESP carries keys for systemd-boot to enroll.
	Enroll bool
	// UKISize and UKISHA256 describe the UKI as on the ESP (and at
	// Inputs.UKIOut).
	UKISize   int64
	UKISHA256 string
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
	if in.Version == "" {
		in.Version = "dev"
	}
	// The UKI's name must read back as the same version on the ESP,
	// where systemd-boot's boot counting renames it (update/bootcount).
	if err := bootcount.CheckVersion(in.Version); err != nil {
		return fail(err)
	}
	bootLoader, ok := BootLoaderFor(in.Arch)
	if !ok {
		return fail(fmt.Errorf("architecture %q: want amd64 or arm64", in.Arch))
	}
	if in.BootLoader != "" {
		bootLoader = in.BootLoader
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
	// A new disk's root is in slot a. The command line seals the root
	// hash but no slot: the release's one UKI boots from either slot (an
	// update writes the other), and berth finds the slot whose tree has
	// this root hash.
	slot := partition.SlotA
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
	if err := uki.Build(ctx, log, ukiPath, uki.Inputs{OSRelease: []byte(OSRelease(in.Version)), Cmdline: cmdline, Kernel: in.Kernel, Initrd: in.Initrd},
		uki.Options{Stub: stub, Machine: machine, Objcopy: uki.ObjcopyFor(in.Arch), Epoch: uint32(in.Epoch)}); err != nil {
		return fail(err)
	}
	loaderPath := filepath.Join(tmp, "BOOT.EFI")
	if err := copyEFI(bootLoader, loaderPath, in.Sign); err != nil {
		return fail(fmt.Errorf("systemd-boot: %w", err))
	}
	if in.Sign != nil {
		if err := copyEFI(ukiPath, ukiPath, in.Sign); err != nil {
			return fail(fmt.Errorf("UKI: %w", err))
		}
	}
	ukiData, err := os.ReadFile(ukiPath)
	if err != nil {
		return fail(err)
	}
	ukiSum := sha256.Sum256(ukiData)
	confPath := filepath.Join(tmp, "loader.conf")
	if err := os.WriteFile(confPath, []byte(LoaderConf(len(in.EnrollKeys) > 0)), 0o644); err != nil {
		return fail(err)
	}
	files := []esp.File{{Path: bootPath, Src: loaderPath}, {Path: UKIPath(in.Version), Src: ukiPath}, {Path: "loader/loader.conf", Src: confPath}}
	for _, k := range in.EnrollKeys {
		files = append(files, esp.File{Path: keysDir + "/" + k.Path, Src: k.Src})
	}
	// Room for two UKIs (the running version's and an update's, each a
	// little larger), and for FAT's own structures.
	espSize := (int64(len(ukiData))*5/2 + 8<<20 + (1<<20 - 1)) / (1 << 20) * (1 << 20)
	espPath := filepath.Join(tmp, "esp.img")
	if err := esp.Build(ctx, log, espPath, esp.Options{Size: espSize, VolumeID: binary.BigEndian.Uint32(tree.RootHash), Epoch: in.Epoch}, files); err != nil {
		return fail(err)
	}
	l, err := Plan(Sizes{ESP: espSize, Root: size + int64(len(tree.Hash)), Data: in.DataSize}, tree.RootHash)
	if err != nil {
		return fail(err)
	}
	espP, _, _ := l.Find(partition.NameESP)
	rootP, _, _ := l.Find(slot.PartName())

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
	if in.UKIOut != "" {
		// Before the disk is renamed into place: a disk.raw beside an
		// older berth.efi would pair two builds.
		if err := fsutil.WriteFileAtomic(in.UKIOut, ukiData, 0o644); err != nil {
			return fail(fmt.Errorf("writing the UKI: %w", err))
		}
	}
	if err := os.Rename(part, out); err != nil {
		return fail(err)
	}
	r := Result{UKISize: int64(len(ukiData)), UKISHA256: hex.EncodeToString(ukiSum[:]), Layout: l, RootHash: tree.RootHashHex(), Verity: param, Cmdline: cmdline, SHA256: hex.EncodeToString(h.Sum(nil)),
		UKI: UKIPath(in.Version), Slot: slot, Signed: in.Sign != nil, Enroll: len(in.EnrollKeys) > 0}
	log.Info("disk image assembled", "path", out, "bytes", l.Size(), "root_fs_bytes", size, "root_hash", r.RootHash,
		"uki", r.UKI, "signed", r.Signed, "enroll_keys", r.Enroll, "sha256", r.SHA256)
	return r, nil
}

// copyEFI copies the EFI binary src to dst (which may be src), signed by
// sign when it is set.
func copyEFI(src, dst string, sign func([]byte) ([]byte, error)) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if sign != nil {
		if b, err = sign(b); err != nil {
			return fmt.Errorf("signing %s: %w", src, err)
		}
	}
	return fsutil.WriteFileAtomic(dst, b, 0o644)
}
