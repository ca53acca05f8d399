// Package seedimage writes NoCloud seed volumes as the platforms that
// hand them to VMs do: a vfat filesystem labelled cidata (mkfs.vfat and
// mtools' mcopy, as virt-install --cloud-init and Harvester write) or an
// iso9660 one with Joliet and Rock Ridge names (genisoimage, as Proxmox
// and OpenStack's config drive write). The rig's nodes boot from them in
// place of EC2's IMDS. It is test code: nothing that ships imports it.
package seedimage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// FS is a seed's filesystem.
type FS string

const (
	VFAT    FS = "vfat"
	ISO9660 FS = "iso9660"
)

// ParseFS reads a filesystem's name as a flag gives it.
func ParseFS(s string) (FS, error) {
	switch FS(s) {
	case VFAT, ISO9660:
		return FS(s), nil
	}
	return "", fmt.Errorf("seed filesystem %q: want %s or %s", s, VFAT, ISO9660)
}

// Label is cloud-init's NoCloud label; mkfs.vfat and genisoimage keep
// its case.
const Label = "cidata"

// Write makes a seed image at path holding files (name → content: a
// NoCloud seed has user-data, meta-data and, optionally,
// network-config). A file left out is not on the seed, as a platform
// that writes no network-config leaves it off.
func Write(ctx context.Context, path string, fs FS, files map[string][]byte) error {
	src, err := os.MkdirTemp(filepath.Dir(path), ".seed-")
	if err != nil {
		return fmt.Errorf("seed image %s: %w", path, err)
	}
	defer os.RemoveAll(src)
	names := make([]string, 0, len(files))
	for name, data := range files {
		if name == "" || strings.ContainsAny(name, "/\x00") {
			return fmt.Errorf("seed image %s: file name %q: want a plain name", path, name)
		}
		if err := os.WriteFile(filepath.Join(src, name), data, 0o644); err != nil {
			return fmt.Errorf("seed image %s: %w", path, err)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	paths := make([]string, len(names))
	for i, n := range names {
		paths[i] = filepath.Join(src, n)
	}
	tmp := path + ".tmp"
	os.Remove(tmp)
	switch fs {
	case VFAT:
		// 2 MiB: FAT12, as small seeds are; mkfs.vfat -C makes the file.
		if err := run(ctx, "mkfs.vfat", "-n", Label, "-C", tmp, "2048"); err != nil {
			return fmt.Errorf("seed image %s: %w", path, err)
		}
		if len(paths) > 0 {
			if err := run(ctx, "mcopy", append(append([]string{"-i", tmp}, paths...), "::")...); err != nil {
				return errors.Join(fmt.Errorf("seed image %s: %w", path, err), os.Remove(tmp))
			}
		}
	case ISO9660:
		if err := run(ctx, "genisoimage", append([]string{"-quiet", "-output", tmp, "-volid", Label, "-joliet", "-rock"}, paths...)...); err != nil {
			return errors.Join(fmt.Errorf("seed image %s: %w", path, err), os.Remove(tmp))
		}
	default:
		return fmt.Errorf("seed image %s: filesystem %q: want %s or %s", path, fs, VFAT, ISO9660)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("seed image %s: %w", path, err)
	}
	return nil
}

func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s (make deps installs it)", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
