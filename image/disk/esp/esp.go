// Package esp builds the EFI System Partition's FAT filesystem image for
// disk.raw, reproducibly: mkfs.fat (dosfstools) with --invariant and a
// volume ID the caller derives from content, and mtools' mmd/mcopy to put
// files in without mounting (no root, no loop device), with
// SOURCE_DATE_EPOCH fixing every directory entry's timestamps. Names are
// kept to a small portable set (letters, digits, ".", "_", "-", "+") and
// files are put in sorted order, so mtools writes the same VFAT long-name
// entries and short aliases every time; systemd-boot needs long names
// (EFI/Linux/berth-<version>.efi, loader/loader.conf), and a UKI's boot
// counter ("+3") is part of its name.
package esp

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

// BootPath is where UEFI firmware looks for a removable disk's loader on
// x86-64, and so where the unified kernel image goes (no boot menu, no
// NVRAM boot entry needed: an AMI has none).
const BootPath = "EFI/BOOT/BOOTX64.EFI"

// BootPathFor is BootPath for an architecture: the UEFI specification's
// removable-media name is per machine type (BOOTAA64.EFI on arm64).
func BootPathFor(arch string) (string, bool) {
	switch arch {
	case "", "amd64":
		return BootPath, true
	case "arm64":
		return "EFI/BOOT/BOOTAA64.EFI", true
	}
	return "", false
}

// FATEpoch is the earliest time FAT can store, the default timestamp.
const FATEpoch = 315532800 // 1980-01-01T00:00:00Z

// Options tune Build.
type Options struct {
	// Size of the image in bytes, a multiple of 1 MiB (the partition's size).
	Size int64
	// VolumeID is the FAT serial number; derive it from content.
	VolumeID uint32
	// Label is the volume label (at most 11 characters); "BERTH-ESP" when empty.
	Label string
	// Epoch is every timestamp (seconds since 1970, at least FATEpoch);
	// FATEpoch when zero.
	Epoch int64
	// Mkfs, Mmd, Mcopy name the programs; from PATH when empty.
	Mkfs, Mmd, Mcopy string
}

// File is one file to put in: Path inside the FAT (e.g. BootPath), Src on
// the build host.
type File struct {
	Path, Src string
}

// Build writes the FAT image to out (replacing it atomically) holding
// files, each in its directories.
func Build(ctx context.Context, log *slog.Logger, out string, o Options, files []File) error {
	if o.Size < 1<<20 || o.Size%(1<<20) != 0 {
		return fmt.Errorf("ESP image %s: size %d bytes, want a positive multiple of 1 MiB", out, o.Size)
	}
	if o.Label == "" {
		o.Label = "BERTH-ESP"
	}
	if len(o.Label) > 11 || strings.ContainsAny(o.Label, "\"*+,./:;<=>?[\\]|") {
		return fmt.Errorf("ESP image %s: bad volume label %q", out, o.Label)
	}
	if o.Epoch == 0 {
		o.Epoch = FATEpoch
	}
	if o.Epoch < FATEpoch {
		return fmt.Errorf("ESP image %s: epoch %d is before FAT's 1980", out, o.Epoch)
	}
	o.Mkfs = or(o.Mkfs, "mkfs.fat")
	o.Mmd = or(o.Mmd, "mmd")
	o.Mcopy = or(o.Mcopy, "mcopy")
	dirs, err := plan(files)
	if err != nil {
		return fmt.Errorf("ESP image %s: %w", out, err)
	}
	tmp := out + ".tmp"
	_ = os.Remove(tmp)
	defer os.Remove(tmp)
	env := append(os.Environ(), "SOURCE_DATE_EPOCH="+strconv.FormatInt(o.Epoch, 10), "MTOOLSRC=/dev/null", "MTOOLS_SKIP_CHECK=1")
	run := func(args ...string) error {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Env = env
		cmd.WaitDelay = 5 * time.Second
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building ESP image %s: %s: %w\n%s", out, strings.Join(args, " "), err, b)
		}
		return nil
	}
	if err := run(o.Mkfs, "--invariant", "-C", "-i", fmt.Sprintf("%08x", o.VolumeID), "-n", o.Label, tmp, strconv.FormatInt(o.Size/1024, 10)); err != nil {
		return err
	}
	for _, d := range dirs {
		if err := run(o.Mmd, "-i", tmp, "::/"+d); err != nil {
			return err
		}
	}
	for _, f := range sorted(files) {
		if err := run(o.Mcopy, "-i", tmp, f.Src, "::/"+f.Path); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("building ESP image: %w", err)
	}
	log.Info("ESP image built", "path", out, "size", o.Size, "files", len(files))
	return nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func sorted(files []File) []File {
	f := append([]File(nil), files...)
	sort.Slice(f, func(i, j int) bool { return f[i].Path < f[j].Path })
	return f
}

// plan checks the paths and lists the directories to make, parents first.
func plan(files []File) ([]string, error) {
	seen := map[string]bool{}
	var dirs []string
	for _, f := range files {
		if f.Src == "" {
			return nil, fmt.Errorf("file %q has no source", f.Path)
		}
		if f.Path == "" || path.Clean(f.Path) != f.Path || strings.HasPrefix(f.Path, "/") || strings.HasPrefix(f.Path, "..") {
			return nil, fmt.Errorf("path %q is not a clean relative path", f.Path)
		}
		// FAT compares names without case.
		key := strings.ToUpper(f.Path)
		if seen[key] {
			return nil, fmt.Errorf("path %q given twice (FAT names ignore case)", f.Path)
		}
		for _, c := range strings.Split(f.Path, "/") {
			if !portableName(c) {
				return nil, fmt.Errorf("path %q: %q is not a name of at most %d letters, digits, '.', '_', '-' or '+' (not starting with '.')", f.Path, c, maxName)
			}
		}
		seen[key] = true
		for d := path.Dir(f.Path); d != "."; d = path.Dir(d) {
			if seen[strings.ToUpper(d)] {
				continue
			}
			seen[strings.ToUpper(d)] = true
			dirs = append(dirs, d)
		}
	}
	// Parents sort before their children.
	sort.Strings(dirs)
	return dirs, nil
}

// maxName bounds one path component: far below VFAT's 255, and enough
// for a UKI's versioned name with its boot counter.
const maxName = 100

func portableName(c string) bool {
	if c == "" || len(c) > maxName || c[0] == '.' {
		return false
	}
	for _, r := range c {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune("._-+", r)) {
			return false
		}
	}
	return true
}
