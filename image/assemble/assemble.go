// Package assemble builds a berth node image from a resolved spec: the root
// file tree (packed as erofs, its dm-verity hash tree appended), the
// initramfs tree (berth as /init, kernel modules with their dependency and
// alias data, the manifest), and the manifest describing every file. It is
// the library behind image/cmd/mkimage.
//
// The root image stays out of the initramfs: a direct-kernel boot attaches
// root.erofs as a read-only disk (the manifest names its serial and verity
// parameters), because the kernel unpacks an initramfs whole before /init
// runs, seconds for a 110 MB root under TCG. Inputs.RootInInitramfs builds
// the older layout, for a launcher that can pass no disk.
package assemble

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/berth-node/berth/config/accepts"
	"github.com/berth-node/berth/config/manifest"
	"github.com/berth-node/berth/image/disk"
	"github.com/berth-node/berth/image/disk/esp"
	"github.com/berth-node/berth/image/elfarch"
	"github.com/berth-node/berth/image/elfdeps"
	"github.com/berth-node/berth/image/erofs"
	"github.com/berth-node/berth/image/fstree"
	"github.com/berth-node/berth/image/initramfs"
	"github.com/berth-node/berth/image/moddeps"
	"github.com/berth-node/berth/image/oci"
	"github.com/berth-node/berth/image/spec"
	"github.com/berth-node/berth/image/sysroot"
	"github.com/berth-node/berth/image/verity"
	"github.com/berth-node/berth/internal/fsutil"
	"github.com/berth-node/berth/internal/syntax"
	"github.com/berth-node/berth/mounts/partition"
	mverity "github.com/berth-node/berth/mounts/verity"
	"github.com/berth-node/berth/update/repo"
)

// Paths fixed by the image layout that berth (init/, mounts/, kmod/) relies on.
const (
	InitPath      = "/init"       // berth in the initramfs
	RootImagePath = "/root.erofs" // the root image in the initramfs
	RootBerthPath = "/sbin/berth" // berth in the root image
)

// Inputs are everything one build reads.
type Inputs struct {
	// Spec is already resolved for the variant being built.
	Spec *spec.Spec
	// Berth is the static berth binary on the build host.
	Berth string
	// BerthVersion is stamped into the manifest and os-release.
	BerthVersion string
	// KernelDir is the unpacked kernel package (boot/, lib/modules/<kver>/).
	KernelDir string
	// RepoRoot is where relative spec paths and goBuild packages are found.
	RepoRoot string
	// MTime is the timestamp of every file in the image (SOURCE_DATE_EPOCH or 0).
	MTime int64
	// Out is the output directory (vmlinuz, initramfs.img, manifest.json,
	// root.erofs: the erofs image followed by its dm-verity hash tree).
	Out string
	// RootInInitramfs puts the root image in the initramfs as /root.erofs
	// (berth loop-mounts it) instead of leaving it to a root disk: the
	// layout before root disks, for a launcher that attaches no disk.
	RootInInitramfs bool
	// Arch is the architecture the image is for, by Go's name (amd64,
	// arm64; amd64 when empty): goBuild packages are built for it, every
	// ELF file placed in the image (berth, binaries, libraries, modules)
	// must be for its machine, and the manifest records it.
	Arch string
	// Components are the versions of the components the spec ships
	// (kubelet, containerd...), recorded in the manifest; the Makefile
	// that built them is where they are pinned.
	Components map[string]string
	// Accepts is what the components accept in their configuration
	// (components/kubeaccepts, components/containerdaccepts), recorded in
	// the manifest for validation.
	Accepts *accepts.Accepts
	// Disk, when set, is where a bootable GPT disk image (disk.raw) is
	// written too, from the same root filesystem: ESP with a UKI whose
	// initramfs lacks /root.erofs, the root plus its dm-verity tree, and an
	// empty data partition.
	Disk string
	// DiskCmdline is the start of the UKI's kernel command line (the
	// console); the spec's kernelArgs and berth.verity= are appended.
	// DefaultDiskCmdline when empty.
	DiskCmdline string
	// DiskSign, when set, signs the disk's EFI binaries (systemd-boot and
	// the UKI) for Secure Boot, and DiskSigner says with what, for the
	// manifest. Without it the disk is unsigned, and the manifest says so.
	DiskSign   func(pe []byte) ([]byte, error)
	DiskSigner *manifest.DiskSigner
	// DiskEnrollKeys are PK.auth, KEK.auth and db.auth, put on the ESP for
	// systemd-boot to enroll on a machine in setup mode (disk.Inputs).
	DiskEnrollKeys []esp.File
	// UpdateRoot, when set, is the host path of the update repository's
	// trusted root.json (make keys writes it), placed in the root
	// filesystem at manifest.TrustedRootPath and recorded in the
	// manifest; UpdateRepository is the default repository's URL the
	// manifest records, which needs UpdateRoot.
	UpdateRoot, UpdateRepository string
	// Sysroot is where the spec's absolute host paths (programs, their
	// libraries and plugins, files) are read: another architecture's
	// packages unpacked (make sysroot ARCH=arm64). The builder's own /
	// when empty. Relative paths (the repository's build outputs) are
	// never under it.
	Sysroot string

	// record, when set, is told the target's path of every host file a
	// layer copies (HostFiles).
	record func(string)
}

// DefaultDiskCmdline is the disk image's command line: EC2's serial
// console (the get-console-output API reads ttyS0) and berth's default
// failure handling.
const DefaultDiskCmdline = "console=ttyS0,115200n8"

// Result summarises a build.
type Result struct {
	Manifest      *manifest.Manifest
	KernelVersion string
	InitramfsSize int64
	RootSize      int64
	// Disk is set when Inputs.Disk was.
	Disk *disk.Result
}

// Build writes the image into in.Out.
func Build(ctx context.Context, log *slog.Logger, in Inputs) (*Result, error) {
	arch := archOf(in)
	machine, ok := elfarch.Machine(arch)
	if !ok {
		return nil, fmt.Errorf("architecture %q: want one of %s", arch, elfarch.Names)
	}
	kver, err := KernelVersion(in.KernelDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(in.Out, 0o755); err != nil {
		return nil, fmt.Errorf("creating output dir: %w", err)
	}
	m := &manifest.Manifest{BerthVersion: in.BerthVersion, KernelVersion: kver, Arch: arch, Tools: map[string]string{},
		Components: in.Components, Accepts: in.Accepts, SandboxImage: in.Spec.SandboxImage, KernelArgs: in.Spec.KernelArgs}

	mods, err := selectModules(log, in.KernelDir, kver, in.Spec)
	if err != nil {
		return nil, err
	}
	root, err := rootTree(ctx, log, in, m)
	if err != nil {
		return nil, err
	}
	if err := mods.add(root, mods.all); err != nil {
		return nil, fmt.Errorf("root: %w", err)
	}
	if err := checkMachine(root, machine, "root"); err != nil {
		return nil, err
	}
	rootOut := filepath.Join(in.Out, "root.erofs")
	if err := erofs.Build(ctx, root, rootOut, erofs.Options{MTime: in.MTime}); err != nil {
		return nil, err
	}
	rootData, err := os.ReadFile(rootOut)
	if err != nil {
		return nil, fmt.Errorf("reading back root image: %w", err)
	}
	rootSum := sha256.Sum256(rootData)
	m.Root = &manifest.Root{Format: "erofs", Size: int64(len(rootData)), SHA256: hex.EncodeToString(rootSum[:])}
	var vt *verity.Tree
	if in.Disk != "" || !in.RootInInitramfs {
		vt, err = verity.Build(bytes.NewReader(rootData), int64(len(rootData)), verity.Options{})
		if err != nil {
			return nil, fmt.Errorf("hashing root image %s for dm-verity: %w", rootOut, err)
		}
		m.Root.RootHash = vt.RootHashHex()
	}
	if in.RootInInitramfs {
		m.Root.Path = RootImagePath
	} else {
		// The tree goes right after the filesystem, as on the disk
		// image's root partition: one disk carries both.
		m.Root.Serial = RootSerial
		m.Root.Verity = mverity.Param{DataBlocks: vt.DataBlocks, HashStartBlock: vt.HashStartBlock(int64(len(rootData))),
			RootHash: vt.RootHashHex(), Salt: vt.SaltHex()}.String()
	}

	ird := fstree.New()
	if err := ird.AddFile(InitPath, in.Berth, 0o755); err != nil {
		return nil, err
	}
	if in.RootInInitramfs {
		if err := ird.AddData(RootImagePath, rootData, 0o444); err != nil {
			return nil, err
		}
	}
	if err := addLayer(ctx, ird, in.Spec.Initramfs, in, m); err != nil {
		return nil, fmt.Errorf("initramfs: %w", err)
	}
	if err := mods.add(ird, mods.early); err != nil {
		return nil, fmt.Errorf("initramfs: %w", err)
	}
	for _, mod := range mods.all {
		m.Modules = append(m.Modules, mod.Name)
	}
	for _, mod := range mods.early {
		m.EarlyModules = append(m.EarlyModules, mod.Name)
	}
	m.Preload = append([]string(nil), in.Spec.Preload...)
	if err := checkMachine(ird, machine, "initramfs"); err != nil {
		return nil, err
	}

	m.Files, err = mergeFiles(ird.Manifest(), root.Manifest())
	if err != nil {
		return nil, err
	}
	if len(m.Tools) == 0 {
		m.Tools = nil
	}
	mjson, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding manifest: %w", err)
	}
	mjson = append(mjson, '\n')
	if err := ird.AddData(manifest.DefaultPath, mjson, 0o644); err != nil {
		return nil, err
	}

	var cpio bytes.Buffer
	if err := initramfs.Write(&cpio, ird, uint64(in.MTime)); err != nil {
		return nil, err
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(in.Out, "initramfs.img"), cpio.Bytes(), 0o644); err != nil {
		return nil, fmt.Errorf("writing initramfs: %w", err)
	}
	vmlinuz := filepath.Join(in.KernelDir, "boot", "vmlinuz-"+kver)
	kdata, err := os.ReadFile(vmlinuz)
	if err != nil {
		return nil, fmt.Errorf("reading kernel: %w", err)
	}
	if err := checkKernel(vmlinuz, kdata, arch); err != nil {
		return nil, err
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(in.Out, "vmlinuz"), kdata, 0o644); err != nil {
		return nil, fmt.Errorf("writing vmlinuz: %w", err)
	}
	var dres *disk.Result
	if in.Disk != "" {
		r, err := buildDisk(ctx, log, in, mods, m, root, vmlinuz, rootOut)
		if err != nil {
			return nil, err
		}
		dres = &r
		m.Disk = &manifest.Disk{Path: filepath.Base(in.Disk), Size: r.Layout.Size(), SHA256: r.SHA256, Cmdline: r.Cmdline,
			UKI: r.UKI, Slot: string(r.Slot), EnrollKeys: r.Enroll, UKIFile: UKIFile, UKISize: r.UKISize, UKISHA256: r.UKISHA256}
		if r.Signed {
			m.Disk.SignedBy = in.DiskSigner
		}
		// The manifest beside the image says what the disk is; the one in
		// the initramfs (above) cannot.
		mjson, err = json.MarshalIndent(m, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("encoding manifest: %w", err)
		}
		mjson = append(mjson, '\n')
	}
	rootSize := int64(len(rootData))
	if !in.RootInInitramfs {
		// After the disk image, which took the bare filesystem from
		// rootOut and lays out its own tree.
		rootSize += int64(len(vt.Hash))
		if err := writeRootDisk(rootOut, rootData, vt.Hash); err != nil {
			return nil, err
		}
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(in.Out, "manifest.json"), mjson, 0o644); err != nil {
		return nil, fmt.Errorf("writing manifest: %w", err)
	}
	log.Info("image built", "out", in.Out, "kernel", kver, "initramfs_bytes", cpio.Len(), "root_bytes", rootSize,
		"root_in_initramfs", in.RootInInitramfs, "modules", len(m.Modules), "files", len(m.Files))
	return &Result{Manifest: m, KernelVersion: kver, InitramfsSize: int64(cpio.Len()), RootSize: rootSize, Disk: dres}, nil
}

// UKIFile is the disk's UKI, written beside disk.raw (and the manifest):
// a release's UKI, as `make update-repo` publishes it.
const UKIFile = "berth.efi"

// RootSerial is the serial of a direct-kernel boot's root disk, recorded
// in the manifest for the launcher and for berth: the disk image's root
// partition's name, so one name means "berth's root" wherever it is.
const RootSerial = partition.NameRoot

// writeRootDisk replaces path (the bare erofs image) with the root disk's
// content: the filesystem, then its dm-verity hash tree from the next
// block on (the filesystem is a whole number of blocks). A reader of the
// erofs image alone (a loop mount, the disk image build) reads its first
// manifest.Root.Size bytes.
func writeRootDisk(path string, fs, tree []byte) error {
	if len(fs)%verity.BlockSize != 0 {
		return fmt.Errorf("root image %s: %d bytes, not a whole number of %d-byte blocks", path, len(fs), verity.BlockSize)
	}
	buf := make([]byte, 0, len(fs)+len(tree))
	buf = append(append(buf, fs...), tree...)
	if err := fsutil.WriteFileAtomic(path, buf, 0o644); err != nil {
		return fmt.Errorf("writing root disk %s: %w", path, err)
	}
	return nil
}

// buildDisk writes in.Disk. Its initramfs is the image's without
// /root.erofs (the root is the disk's root slot a, berth-root-a), with a
// manifest saying so; m itself is not changed.
func buildDisk(ctx context.Context, log *slog.Logger, in Inputs, mods *moduleSet, m *manifest.Manifest, root *fstree.Tree, vmlinuz, rootOut string) (disk.Result, error) {
	ird := fstree.New()
	if err := ird.AddFile(InitPath, in.Berth, 0o755); err != nil {
		return disk.Result{}, err
	}
	// The layers were recorded in m already; these calls fill a scratch
	// manifest so that nothing is recorded twice.
	scratch := &manifest.Manifest{Tools: map[string]string{}}
	if err := addLayer(ctx, ird, in.Spec.Initramfs, in, scratch); err != nil {
		return disk.Result{}, fmt.Errorf("disk initramfs: %w", err)
	}
	if err := mods.add(ird, mods.early); err != nil {
		return disk.Result{}, fmt.Errorf("disk initramfs: %w", err)
	}
	dm := *m
	r := *m.Root
	// The UKI's command line carries the verity parameters; the root is
	// a partition, not a disk of its own.
	r.Path, r.Partition, r.Serial, r.Verity = "", partition.SlotA.PartName(), "", ""
	dm.Root = &r
	files, err := mergeFiles(ird.Manifest(), root.Manifest())
	if err != nil {
		return disk.Result{}, err
	}
	dm.Files = files
	mjson, err := json.MarshalIndent(&dm, "", "  ")
	if err != nil {
		return disk.Result{}, fmt.Errorf("encoding disk manifest: %w", err)
	}
	if err := ird.AddData(manifest.DefaultPath, append(mjson, '\n'), 0o644); err != nil {
		return disk.Result{}, err
	}
	var cpio bytes.Buffer
	if err := initramfs.Write(&cpio, ird, uint64(in.MTime)); err != nil {
		return disk.Result{}, err
	}
	initrd := filepath.Join(filepath.Dir(in.Disk), ".disk-initramfs.img")
	if err := fsutil.WriteFileAtomic(initrd, cpio.Bytes(), 0o644); err != nil {
		return disk.Result{}, fmt.Errorf("writing disk initramfs: %w", err)
	}
	defer os.Remove(initrd)
	cmd := in.DiskCmdline
	if cmd == "" {
		cmd = DefaultDiskCmdline
	}
	cmd = strings.Join(append([]string{cmd}, m.KernelArgs...), " ")
	return disk.Assemble(ctx, log, in.Disk, disk.Inputs{
		RootFS: rootOut, RootFSSize: m.Root.Size, Kernel: vmlinuz, Initrd: initrd, Version: in.BerthVersion,
		Cmdline: cmd, Epoch: in.MTime, Arch: archOf(in), Sign: in.DiskSign, EnrollKeys: in.DiskEnrollKeys,
		UKIOut: filepath.Join(filepath.Dir(in.Disk), UKIFile),
	})
}

// imageID reads the image ID (oci.ImageID) of the OCI tarball at path.
func imageID(path, arch string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return oci.ImageID(f, arch)
}

// archOf is the image's architecture: amd64 unless the inputs say.
func archOf(in Inputs) string {
	if in.Arch == "" {
		return "amd64"
	}
	return in.Arch
}

// checkMachine refuses an ELF file of another machine anywhere in t (which
// is the image's root or initramfs, named by where): a host binary, library
// or module of the wrong architecture would fail only on the node. It names
// every such file, up to maxWrongELF: one host program brings its
// libraries, and the program, not the first library by path, is the one to
// fix.
func checkMachine(t *fstree.Tree, want elf.Machine, where string) error {
	var errs []error
	n := 0
	for _, e := range t.Entries() {
		if e.Kind != fstree.File {
			continue
		}
		if err := elfarch.Check(e.Path, e.Data, want); err != nil {
			if n++; n <= maxWrongELF {
				errs = append(errs, err)
			}
		}
	}
	if n == 0 {
		return nil
	}
	if n > maxWrongELF {
		errs = append(errs, fmt.Errorf("and %d more", n-maxWrongELF))
	}
	return fmt.Errorf("%s: %d files are not for %v:\n%w", where, n, want, errors.Join(errs...))
}

// maxWrongELF bounds the files checkMachine names.
const maxWrongELF = 20

// checkKernel refuses a kernel image of another architecture (a -kernel
// directory from the other arch's build): the boot image formats differ, so
// the check reads their magic numbers. amd64's is a bzImage ("HdrS" at
// 0x202); arm64's Debian ships the plain Image ("ARM\x64" at 56) or, with
// CONFIG_EFI_ZBOOT, a PE file whose header says "zimg" at 4.
func checkKernel(name string, data []byte, arch string) error {
	at := func(off int, magic string) bool {
		return len(data) >= off+len(magic) && string(data[off:off+len(magic)]) == magic
	}
	var ok bool
	switch arch {
	case "amd64":
		ok = at(0x202, "HdrS")
	case "arm64":
		ok = at(56, "ARM\x64") || (at(0, "MZ") && at(4, "zimg"))
	}
	if !ok {
		return fmt.Errorf("kernel %s: not a Linux boot image for %s (make kernel ARCH=%s unpacks one)", name, arch, arch)
	}
	return nil
}

// KernelVersion returns the one <kver> under dir/lib/modules.
func KernelVersion(dir string) (string, error) {
	ents, err := os.ReadDir(filepath.Join(dir, "lib", "modules"))
	if err != nil {
		return "", fmt.Errorf("finding the kernel version in %s: %w", dir, err)
	}
	var vers []string
	for _, e := range ents {
		if e.IsDir() {
			vers = append(vers, e.Name())
		}
	}
	if len(vers) != 1 {
		return "", fmt.Errorf("%s/lib/modules: want exactly one kernel version, found %v", dir, vers)
	}
	return vers[0], nil
}

func rootTree(ctx context.Context, log *slog.Logger, in Inputs, m *manifest.Manifest) (*fstree.Tree, error) {
	t := fstree.New()
	if err := t.AddFile(RootBerthPath, in.Berth, 0o755); err != nil {
		return nil, err
	}
	if err := t.AddData("/etc/os-release", []byte(disk.OSRelease(in.BerthVersion)), 0o644); err != nil {
		return nil, err
	}
	if err := addLayer(ctx, t, in.Spec.Root, in, m); err != nil {
		return nil, fmt.Errorf("root: %w", err)
	}
	if err := addUpdateTrust(t, in, m); err != nil {
		return nil, err
	}
	return t, nil
}

// addUpdateTrust puts the update repository's trusted root.json in the
// root tree and records it, with the default repository, in m.
func addUpdateTrust(t *fstree.Tree, in Inputs, m *manifest.Manifest) error {
	if in.UpdateRoot == "" {
		if in.UpdateRepository != "" {
			return fmt.Errorf("update repository %s: no trusted root.json to check it with (make keys writes one)", in.UpdateRepository)
		}
		return nil
	}
	data, err := os.ReadFile(in.UpdateRoot)
	if err != nil {
		return fmt.Errorf("the update repository's trusted root: %w", err)
	}
	if _, err := repo.ParseTrustedRoot(data); err != nil {
		return fmt.Errorf("the update repository's trusted root %s: %w", in.UpdateRoot, err)
	}
	if in.UpdateRepository != "" {
		if err := syntax.HTTPURL(in.UpdateRepository); err != nil {
			return fmt.Errorf("the default update repository: %w", err)
		}
	}
	if err := t.AddData(manifest.TrustedRootPath, data, 0o444); err != nil {
		return err
	}
	m.Update = &manifest.Update{TrustedRoot: manifest.TrustedRootPath, Repository: in.UpdateRepository}
	return nil
}

// addLayer adds one spec layer's content to t.
func addLayer(ctx context.Context, t *fstree.Tree, l spec.Layer, in Inputs, m *manifest.Manifest) error {
	root, err := sysroot.New(in.Sysroot)
	if err != nil {
		return err
	}
	machine, ok := elfarch.Machine(archOf(in))
	if !ok {
		return fmt.Errorf("architecture %q: want one of %s", archOf(in), elfarch.Names)
	}
	tuple, _ := elfarch.Multiarch(machine)
	host := hostFiles{repo: in.RepoRoot, root: root, record: in.record}
	for _, d := range l.Dirs {
		if err := t.AddDir(d.Path, uint32(d.Mode)); err != nil {
			return err
		}
	}
	for _, f := range l.Files {
		var err error
		if f.Content != "" {
			err = t.AddData(f.Dst, []byte(f.Content), uint32(f.Mode))
		} else {
			src, perr := host.path(f.Src)
			if perr != nil {
				return fmt.Errorf("file %s: %w", f.Dst, perr)
			}
			if _, statErr := os.Stat(src); statErr != nil && f.Optional {
				continue
			}
			host.use(f.Src)
			err = t.AddFile(f.Dst, src, uint32(f.Mode))
		}
		if err != nil {
			return err
		}
	}
	for _, s := range l.Symlinks {
		if err := t.AddSymlink(s.Path, s.Target); err != nil {
			return err
		}
	}
	var dynamic []string
	for _, b := range l.Binaries {
		src, err := host.binary(b)
		if err != nil {
			return fmt.Errorf("binary %s: %w", b.Name, err)
		}
		dst := b.Dst
		if dst == "" {
			dst = "/usr/sbin/" + b.Name
		}
		if err := t.AddFile(dst, src, 0o755); err != nil {
			return err
		}
		if b.Tool {
			m.Tools[b.Name] = dst
		}
		for _, ln := range b.Links {
			if err := t.AddSymlink(path.Join(path.Dir(dst), ln), path.Base(dst)); err != nil {
				return fmt.Errorf("binary %s: %w", b.Name, err)
			}
		}
		dynamic = append(dynamic, src)
	}
	for _, p := range l.Plugins {
		p.Dir = strings.ReplaceAll(p.Dir, spec.MultiarchVar, tuple)
		files, links, err := pluginFiles(root, p)
		if err != nil {
			return err
		}
		for _, f := range files {
			src, err := root.Path(f)
			if err != nil {
				return err
			}
			host.use(f)
			if err := t.AddFile(f, src, 0o644); err != nil {
				return err
			}
			dynamic = append(dynamic, src)
		}
		for _, ln := range links {
			if err := t.AddSymlink(ln.path, ln.target); err != nil {
				return err
			}
		}
	}
	// A file of another machine is left to the machine check, which names
	// it: its libraries would be missing here, or another architecture's.
	dynamic = slices.DeleteFunc(dynamic, func(f string) bool { return otherMachine(f, machine) })
	deps, err := elfdeps.Resolve(root, dynamic, elfdeps.SearchDirs(machine))
	if err != nil {
		return err
	}
	for _, d := range deps {
		if t.Has(d.Path) {
			continue
		}
		host.use(d.Path)
		if err := t.AddFile(d.Path, d.Src, 0o755); err != nil {
			return err
		}
	}
	for _, g := range l.GoBuild {
		data, err := goBuild(ctx, in.RepoRoot, g.Package, archOf(in))
		if err != nil {
			return err
		}
		if err := t.AddData(g.Dst, data, 0o755); err != nil {
			return err
		}
	}
	for _, im := range l.Images {
		src, err := host.path(im.Src)
		if err != nil {
			return fmt.Errorf("image %s: %w", im.Name, err)
		}
		host.use(im.Src)
		id, err := imageID(src, archOf(in))
		if err != nil {
			return fmt.Errorf("image %s (%s): %w", im.Name, im.Src, err)
		}
		if err := t.AddFile(im.Dst, src, 0o644); err != nil {
			return fmt.Errorf("image %s: %w", im.Name, err)
		}
		m.Images = append(m.Images, manifest.Image{Name: im.Name, Path: im.Dst, ID: id})
	}
	if bb := l.Busybox; bb != nil {
		src, err := host.path(bb.Src)
		if err != nil {
			return fmt.Errorf("busybox: %w", err)
		}
		host.use(bb.Src)
		if err := t.AddFile(bb.Dst, src, 0o755); err != nil {
			return err
		}
		for _, a := range bb.Applets {
			p := path.Join(path.Dir(bb.Dst), a)
			if t.Has(p) {
				continue
			}
			if err := t.AddSymlink(p, path.Base(bb.Dst)); err != nil {
				return err
			}
		}
	}
	return nil
}

// otherMachine reports whether file is an ELF file for another machine
// than want. A file that is not ELF, or unreadable, is left to Resolve,
// whose error names it.
func otherMachine(file string, want elf.Machine) bool {
	f, err := elf.Open(file)
	if err != nil {
		return false
	}
	defer f.Close()
	return f.Machine != want
}

// pluginLink is a symlink among plugins to another file of the same
// directory (iptables' libxt_MASQUERADE.so → libxt_NAT.so).
type pluginLink struct{ path, target string }

// pluginFiles lists the files in p.Dir (in root) whose names match p.Glob,
// sorted, by the target's paths: the regular ones, and symlinks to a file
// of the same directory, which stay links (their target is shipped when it
// matches too, or else as a file the link names). A link elsewhere is
// shipped as the file it resolves to. A directory with none is an error:
// the spec named it because something loads from it.
func pluginFiles(root sysroot.Root, p spec.Plugins) ([]string, []pluginLink, error) {
	glob := p.Glob
	if glob == "" {
		glob = "*.so"
	}
	ents, err := root.ReadDir(p.Dir)
	if err != nil {
		return nil, nil, fmt.Errorf("plugins in %s (sysroot %s): %w (install its package: make deps, or make sysroot ARCH=...)", p.Dir, root, err)
	}
	files := map[string]bool{}
	var links []pluginLink
	for _, e := range ents {
		if ok, _ := path.Match(glob, e.Name()); !ok {
			continue
		}
		full := path.Join(p.Dir, e.Name())
		switch {
		case e.Type().IsRegular():
			files[full] = true
		case e.Type()&os.ModeSymlink != 0:
			target, err := root.Readlink(full)
			if err != nil {
				return nil, nil, fmt.Errorf("plugins in %s: %w", p.Dir, err)
			}
			st, err := root.Stat(full)
			if err != nil || !st.Mode().IsRegular() {
				return nil, nil, fmt.Errorf("plugins in %s: %s links to %s, which is no regular file", p.Dir, e.Name(), target)
			}
			if strings.Contains(target, "/") {
				files[full] = true // AddFile follows the link
				continue
			}
			links = append(links, pluginLink{path: full, target: target})
			files[path.Join(p.Dir, target)] = true
		}
	}
	if len(files) == 0 {
		return nil, nil, fmt.Errorf("plugins in %s: no file matches %q", p.Dir, glob)
	}
	out := make([]string, 0, len(files))
	for f := range files {
		out = append(out, f)
	}
	sort.Strings(out)
	return out, links, nil
}

// hostFiles finds the files a layer copies from the build host: a
// relative path in the repository, an absolute one in the sysroot.
type hostFiles struct {
	repo   string
	root   sysroot.Root
	record func(string)
}

// path is the builder's file for a spec's src: the repository's for a
// relative path or an absolute one inside it (a build output), else the
// sysroot's.
func (h hostFiles) path(p string) (string, error) {
	if h.inRepo(p) {
		if filepath.IsAbs(p) {
			return p, nil
		}
		return filepath.Join(h.repo, p), nil
	}
	return h.root.Path(p)
}

// inRepo reports whether the spec's src p names the repository's files.
func (h hostFiles) inRepo(p string) bool {
	if !filepath.IsAbs(p) {
		return true
	}
	repo, err := filepath.Abs(h.repo)
	if err != nil {
		return false
	}
	rel, err := filepath.Rel(repo, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// use records that the target's file p (from the sysroot) is copied.
func (h hostFiles) use(p string) {
	if h.record != nil && !h.inRepo(p) {
		h.record(p)
	}
}

// binary is the builder's file for a spec's program: its src, or its name
// looked up as the target's PATH would find it.
func (h hostFiles) binary(b spec.Binary) (string, error) {
	if b.Src != "" {
		src, err := h.path(b.Src)
		if err == nil {
			h.use(b.Src)
		}
		return src, err
	}
	p, err := h.lookPath(b.Name)
	if err != nil {
		return "", err
	}
	h.use(p)
	return h.root.Path(p)
}

// lookPath finds a program in the sbin and bin directories, the target's
// path to it. On the builder's own / the builder's PATH comes first (a
// non-root PATH often lacks the sbin directories); a sysroot has no PATH
// but the standard one.
func (h hostFiles) lookPath(name string) (string, error) {
	var dirs []string
	if h.root.IsHost() {
		dirs = filepath.SplitList(os.Getenv("PATH"))
	}
	dirs = append(dirs, "/usr/sbin", "/sbin", "/usr/bin", "/bin")
	for _, d := range dirs {
		if !filepath.IsAbs(d) {
			continue
		}
		p := path.Join(d, name)
		if st, err := h.root.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in %s of %s (install its package: make deps, or make sysroot ARCH=...)", name, strings.Join(dirs, ":"), h.root)
}

// goBuild builds a main package of this module as a static, reproducible
// linux binary for arch and returns its bytes.
func goBuild(ctx context.Context, repo, pkg, arch string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "mkimage-go-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "bin")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return os.ReadFile(out)
}

// moduleSet is the kernel modules an image ships: all of them (the spec's
// list and its dependency closure) for the root, and the early ones for
// the initramfs.
type moduleSet struct {
	dir, kver string
	all       []moddeps.Module
	early     []moddeps.Module
}

// selectModules resolves the spec's modules against the kernel's tree and
// picks the early ones (earlyModules).
func selectModules(log *slog.Logger, kernelDir, kver string, s *spec.Spec) (*moduleSet, error) {
	modDir := filepath.Join(kernelDir, "lib", "modules", kver)
	tree, err := moddeps.Scan(modDir)
	if err != nil {
		return nil, err
	}
	var reqs []moddeps.Request
	for _, name := range s.Modules {
		opt := strings.HasSuffix(name, "?")
		reqs = append(reqs, moddeps.Request{Name: strings.TrimSuffix(name, "?"), Optional: opt})
	}
	sel, err := tree.Select(reqs)
	if err != nil {
		return nil, err
	}
	shipped := map[string]bool{}
	for _, b := range sel.Builtin {
		shipped[b] = true
	}
	for _, mod := range sel.Modules {
		shipped[mod.Name] = true
	}
	for _, p := range s.Preload {
		if !shipped[moddeps.Normalize(p)] {
			return nil, fmt.Errorf("preload module %s is not among the shipped modules (add it to modules:)", p)
		}
	}
	for _, e := range s.Early {
		if !shipped[moddeps.Normalize(e)] {
			return nil, fmt.Errorf("early module %s is not among the shipped modules (add it to modules:)", e)
		}
	}
	if len(sel.Builtin) > 0 {
		log.Info("modules built into the kernel", "names", strings.Join(sel.Builtin, ","))
	}
	if len(sel.Missing) > 0 {
		log.Warn("optional modules not in this kernel", "names", strings.Join(sel.Missing, ","))
	}
	return &moduleSet{dir: modDir, kver: kver, all: sel.Modules,
		early: earlyModules(sel.Modules, append(append([]string(nil), s.Preload...), s.Early...))}, nil
}

// isDeviceBus says whether a modalias prefix names a bus whose devices the
// kernel lists in sysfs, which coldplug and hotplug match against
// modules.alias. Other aliases with a colon (devname:, ip_set:) name no
// device.
func isDeviceBus(bus string) bool {
	switch bus {
	case "pci", "virtio", "acpi", "platform", "of", "cpu", "input", "scsi", "usb", "hid",
		"vmbus", "xen", "xen-backend", "i2c", "spi", "mdio", "pnp", "dmi", "mmc", "sdio",
		"serio", "amba", "nvmem", "mhi":
		return true
	}
	return false
}

// isDeviceDriver says whether a module has an alias coldplug could match
// a present device with ("acpi*:PNP0C0C:*" counts as acpi).
func isDeviceDriver(m moddeps.Module) bool {
	for _, a := range m.Aliases {
		bus, _, ok := strings.Cut(a, ":")
		if ok && isDeviceBus(strings.TrimRight(bus, "*")) {
			return true
		}
	}
	return false
}

// earlyModules is what the initramfs carries: every device driver (the
// modules phase loads those of present devices before the root is
// mounted, and hotplug later ones), the named modules, and everything
// those need, by dependency or soft dependency (a softdep may name an
// alias). Whatever else boot loads, it loads from the root.
func earlyModules(all []moddeps.Module, named []string) []moddeps.Module {
	byName := make(map[string]moddeps.Module, len(all))
	for _, m := range all {
		byName[m.Name] = m
	}
	want := map[string]bool{}
	var add func(name string)
	add = func(name string) {
		name = moddeps.Normalize(name)
		if want[name] {
			return
		}
		m, ok := byName[name]
		if !ok {
			// A softdep by alias ("crc32c"): every module it names.
			for _, c := range all {
				if slices.Contains(c.Aliases, name) || slices.Contains(c.Aliases, "crypto-"+name) {
					add(c.Name)
				}
			}
			return
		}
		want[name] = true
		for _, d := range m.Depends {
			add(d)
		}
		for _, d := range m.SoftPre {
			add(d)
		}
	}
	for _, m := range all {
		if isDeviceDriver(m) {
			add(m.Name)
		}
	}
	for _, n := range named {
		add(n)
	}
	var out []moddeps.Module
	for _, m := range all {
		if want[m.Name] {
			out = append(out, m)
		}
	}
	return out
}

// add puts mods and their index (modules.dep, modules.alias,
// modules.softdep, and the kernel's own builtin and order lists) under
// /lib/modules/<kver> in t.
func (ms *moduleSet) add(t *fstree.Tree, mods []moddeps.Module) error {
	base := "/lib/modules/" + ms.kver
	for _, mod := range mods {
		if err := t.AddFile(base+"/"+mod.Path, filepath.Join(ms.dir, mod.Path), 0o644); err != nil {
			return err
		}
	}
	dep, err := moddeps.DepFile(mods)
	if err != nil {
		return err
	}
	if err := t.AddData(base+"/modules.dep", dep, 0o644); err != nil {
		return err
	}
	if err := t.AddData(base+"/modules.alias", moddeps.AliasFile(mods), 0o644); err != nil {
		return err
	}
	if err := t.AddData(base+"/modules.softdep", moddeps.SoftdepFile(mods), 0o644); err != nil {
		return err
	}
	for _, f := range []string{"modules.builtin", "modules.builtin.modinfo", "modules.order"} {
		src := filepath.Join(ms.dir, f)
		if _, err := os.Stat(src); err != nil {
			continue
		}
		if err := t.AddFile(base+"/"+f, src, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// mergeFiles lists initramfs and root files together, sorted by path. A
// path in both is listed once: the early modules are in both trees, the
// same file, and /lib/modules's index files differ (the initramfs's covers
// the early modules only), so the root's entry, what the node runs with
// after the switch, is the one kept. Any other path in both, differing,
// would make the list ambiguous, so it is an error.
func mergeFiles(initrd, root []manifest.File) ([]manifest.File, error) {
	seen := map[string]manifest.File{}
	for _, f := range initrd {
		seen[f.Path] = f
	}
	out := make([]manifest.File, 0, len(initrd)+len(root))
	for _, f := range root {
		if g, dup := seen[f.Path]; dup {
			if g != f && !strings.HasPrefix(f.Path, "/lib/modules/") {
				return nil, fmt.Errorf("%s is both in the initramfs and in the root image, differing", f.Path)
			}
			delete(seen, f.Path)
		}
		out = append(out, f)
	}
	for _, f := range initrd {
		if _, left := seen[f.Path]; left {
			out = append(out, f)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}
