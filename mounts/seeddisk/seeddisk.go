// Package seeddisk finds a NoCloud seed among the block devices and reads
// it: the acting side of config/sources and config/nocloud.
//
// Finding: the node has no udev or blkid, and the kernel shows no
// filesystem labels under /sys, so each block device's first bytes are
// read and mounts/sigprobe reads the label from the vfat boot sector and
// root directory, or the iso9660 primary volume descriptor. A seed is a
// few kilobytes on a device of a few megabytes, so reading 128 KiB of
// each device costs little, and it happens only on a machine that is not
// EC2 (config/sources decides).
//
// Reading: the seed is mounted read-only with the kernel's vfat or isofs
// (the image ships both, with vfat's code pages), read through os.DirFS
// by config/nocloud, and unmounted. The kernel's filesystems are the ones
// every Linux reads these volumes with (long names on vfat, Joliet and
// Rock Ridge names on iso9660, which genisoimage and xorriso write and
// cloud-localds asks for), and the image already carries vfat for the ESP.
// A reader in Go would be a new dependency and a new parser of outside
// input in PID 1, to fuzz and to keep up with every tool's layout, for a
// volume read once at boot.
package seeddisk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/berth-node/berth/config/nocloud"
	"github.com/berth-node/berth/config/sources"
	"github.com/berth-node/berth/mounts/partition"
	"github.com/berth-node/berth/mounts/sigprobe"
	"golang.org/x/sys/unix"
)

// MountDir is where the seed is mounted while it is read.
const MountDir = "/run/berth/seed"

// Modules are the kernel modules a seed's filesystem needs, to load
// before the mount (the kernel's own request would run /sbin/modprobe, a
// slow first exec, this early in boot).
func Modules(fs sigprobe.Kind) []string {
	switch fs {
	case sigprobe.VFAT:
		// The code pages of the image's FAT defaults (FAT_DEFAULT_CODEPAGE
		// 437, IOCHARSET ascii), as the ESP's mount needs.
		return []string{"vfat", "nls_cp437", "nls_ascii"}
	case sigprobe.ISO9660:
		return []string{"isofs"}
	}
	return nil
}

// Candidate reports whether a block device may hold a seed, from its
// name under /sys/class/block and its size in 512-byte sectors: not a
// RAM, loop, device-mapper, RAID or network block device (berth's own
// root is on loop and dm devices), and not empty (a CD drive without a
// disc has size 0).
func Candidate(name string, sectors int64) bool {
	for _, p := range []string{"ram", "loop", "zram", "dm-", "md", "nbd"} {
		if strings.HasPrefix(name, p) {
			return false
		}
	}
	return sectors > 0
}

// Find reads the label of every candidate device under classBlock
// (partition.ClassBlock on a node) through its node in devDir (/dev), and
// returns those labelled cidata in any case, for sources.Decide. It never
// fails: a device that cannot be read is listed as such.
func Find(ctx context.Context, log *slog.Logger, classBlock, devDir string) sources.Scan {
	var sc sources.Scan
	ents, err := os.ReadDir(classBlock)
	if err != nil {
		sc.Unreadable = append(sc.Unreadable, fmt.Sprintf("%s: %v", classBlock, err))
		return sc
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	for _, name := range names {
		if ctx.Err() != nil {
			sc.Unreadable = append(sc.Unreadable, fmt.Sprintf("%s: %v", name, ctx.Err()))
			break
		}
		sectors, err := readSize(filepath.Join(classBlock, name, "size"))
		if err != nil {
			log.Debug("seed: block device size unreadable; skipped", "device", name, "err", err)
			continue
		}
		if !Candidate(name, sectors) {
			continue
		}
		dev := filepath.Join(devDir, name)
		sc.Devices++
		sig, err := probe(dev)
		if err != nil {
			sc.Unreadable = append(sc.Unreadable, fmt.Sprintf("%s: %v", dev, errText(err)))
			continue
		}
		if strings.EqualFold(sig.Label, "cidata") {
			sc.Labelled = append(sc.Labelled, sources.Volume{Device: dev, FS: sig.Kind, Label: sig.Label})
		}
	}
	return sc
}

func readSize(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// probe reads the head of dev for sigprobe.
func probe(dev string) (sigprobe.Signature, error) {
	f, err := os.OpenFile(dev, os.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return sigprobe.Signature{}, err
	}
	defer f.Close()
	buf := make([]byte, sigprobe.ReadLen)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return sigprobe.Signature{}, err
	}
	return sigprobe.Probe(buf[:n]), nil
}

// Read mounts the seed v read-only on dir (MountDir on a node), inspects
// it as `berth check --seed` does (nocloud.Inspect: every file's
// problems at once), and unmounts it. The caller loads Modules(v.FS)
// first. The error is for the mount; what is wrong inside the seed is in
// the Inspection.
func Read(ctx context.Context, log *slog.Logger, v sources.Volume, dir string) (*nocloud.Inspection, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("reading the NoCloud seed %s: %w", v.Device, err)
	}
	fstype, data := "vfat", ""
	if v.FS == sigprobe.ISO9660 {
		// utf8: Joliet names without an NLS module (isofs would ask for
		// CONFIG_NLS_DEFAULT's).
		fstype, data = "iso9660", "utf8"
	}
	flags := uintptr(unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC)
	if err := unix.Mount(v.Device, dir, fstype, flags, data); err != nil {
		return nil, fmt.Errorf("mounting the NoCloud seed %s (%s labelled %s) read-only on %s: %w", v.Device, v.FS, v.Label, dir, err)
	}
	defer func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			log.Warn("seed: unmounting", "dir", dir, "device", v.Device, "err", err)
		}
	}()
	in := nocloud.Inspect(os.DirFS(dir), "")
	return in, nil
}

// Err is an Inspection's errors as one error naming the device, or nil;
// an empty user-data is one (Inspect's rule: a node booted from the seed
// would have no NodeConfig).
func Err(in *nocloud.Inspection, dev string) error {
	if len(in.Errors) == 0 {
		return nil
	}
	return fmt.Errorf("the NoCloud seed %s: %w", dev, nocloud.Problems(in.Errors))
}

// errText is an error without the path fs puts in it (the caller names
// the device).
func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// ClassBlock is where Find looks on a node.
const ClassBlock = partition.ClassBlock
