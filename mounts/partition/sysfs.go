package partition

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// ClassBlock is sysfs's directory of block devices, where FindNamed and
// WaitNamed look on a node.
const ClassBlock = "/sys/class/block"

// ueventPartition returns the /dev path of the partition a uevent file
// describes when its PARTNAME is name.
func ueventPartition(uevent, name string) (string, bool) {
	var devname, partname string
	sc := bufio.NewScanner(strings.NewReader(uevent))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		switch k {
		case "DEVNAME":
			devname = v
		case "PARTNAME":
			partname = v
		}
	}
	if devname == "" || partname != name {
		return "", false
	}
	return "/dev/" + devname, true
}

// namedEntry is a partition found by name: its /dev path and its entry
// in class/block.
type namedEntry struct{ dev, entry string }

// findNamed lists the partitions whose GPT name is name under classBlock,
// sorted by /dev path.
func findNamed(classBlock, name string) ([]namedEntry, error) {
	ents, err := os.ReadDir(classBlock)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", classBlock, err)
	}
	var found []namedEntry
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(classBlock, e.Name(), "uevent"))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("reading %s uevent: %w", e.Name(), err)
		}
		if dev, ok := ueventPartition(string(data), name); ok {
			found = append(found, namedEntry{dev: dev, entry: e.Name()})
		}
	}
	sort.Slice(found, func(i, j int) bool { return found[i].dev < found[j].dev })
	return found, nil
}

// FindNamed lists the /dev paths of the partitions whose GPT name is name
// under a sysfs class/block directory (ClassBlock on a node), sorted.
func FindNamed(classBlock, name string) ([]string, error) {
	found, err := findNamed(classBlock, name)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range found {
		out = append(out, f.dev)
	}
	return out, nil
}

// Candidate is a partition found by name, and the disk it is on.
type Candidate struct {
	Partition string // its /dev path, e.g. /dev/nvme1n1p3
	Disk      string // its disk's /dev path, e.g. /dev/nvme1n1
}

// FindNamedDisks is FindNamed with each partition's disk (see DiskOf), so
// that a caller can tell a partition on the boot disk from a look-alike on
// another attached volume. A partition that vanished while it was looked
// at is left out.
func FindNamedDisks(classBlock, name string) ([]Candidate, error) {
	found, err := findNamed(classBlock, name)
	if err != nil {
		return nil, err
	}
	var out []Candidate
	for _, f := range found {
		disk, err := entryDisk(classBlock, f.entry)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("partition %s: %w", f.dev, err)
		}
		out = append(out, Candidate{Partition: f.dev, Disk: disk})
	}
	return out, nil
}

// DiskOf returns the /dev path of the disk that holds partition part (a
// /dev path such as /dev/nvme0n1p2), from sysfs: class/block/<part> links
// to .../block/<disk>/<part>, a partition's directory lying in its disk's.
func DiskOf(classBlock, part string) (string, error) {
	disk, err := entryDisk(classBlock, filepath.Base(part))
	if err != nil {
		return "", fmt.Errorf("finding the disk of %s: %w", part, err)
	}
	return disk, nil
}

func entryDisk(classBlock, entry string) (string, error) {
	real, err := filepath.EvalSymlinks(filepath.Join(classBlock, entry))
	if err != nil {
		return "", err
	}
	// Only a partition has a "partition" file (its number); a whole disk's
	// parent directory is its controller, not a disk.
	if _, err := os.Stat(filepath.Join(real, "partition")); err != nil {
		return "", fmt.Errorf("%s is not a partition (%v)", real, err)
	}
	return "/dev/" + filepath.Base(filepath.Dir(real)), nil
}

// WaitNamed waits up to wait until exactly one partition named name exists
// and its device node is there, and returns its /dev path. Two of them (a
// second berth disk attached) is an error: booting the wrong root would be
// worse than not booting.
func WaitNamed(ctx context.Context, classBlock, name string, wait time.Duration) (string, error) {
	return WaitOne(ctx, func() ([]string, error) { return FindNamed(classBlock, name) }, wait, Sought{
		One:     "partition named " + name,
		Many:    "partitions named " + name,
		TooMany: "attach only one berth disk",
		Missing: " (is the disk attached, and its driver (nvme) in the image?)",
	})
}

// Sought names what WaitOne looks for, in its errors.
type Sought struct {
	// One and Many name one device and several ("partition named X",
	// "partitions named X").
	One, Many string
	// TooMany says what to do when several are found.
	TooMany string
	// Missing follows "no <One> appeared within <wait>": what to check or
	// how to attach it.
	Missing string
}

// WaitOne polls find until it returns exactly one device whose node
// exists, and returns it; several at once is an error at once (the boot
// must not pick one), and none by wait is an error naming what was sought.
func WaitOne(ctx context.Context, find func() ([]string, error), wait time.Duration, s Sought) (string, error) {
	deadline := time.Now().Add(wait)
	for {
		found, err := find()
		if err != nil {
			return "", err
		}
		switch {
		case len(found) > 1:
			return "", fmt.Errorf("%d %s (%s): %s", len(found), s.Many, strings.Join(found, ", "), s.TooMany)
		case len(found) == 1:
			if _, err := os.Stat(found[0]); err == nil {
				return found[0], nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no %s appeared within %s%s", s.One, wait, s.Missing)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("waiting for the %s: %w", s.One, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
