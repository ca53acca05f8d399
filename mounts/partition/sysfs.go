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

// FindNamed lists the /dev paths of the partitions whose GPT name is name
// under a sysfs class/block directory (ClassBlock on a node), sorted.
func FindNamed(classBlock, name string) ([]string, error) {
	ents, err := os.ReadDir(classBlock)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", classBlock, err)
	}
	var found []string
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(classBlock, e.Name(), "uevent"))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("reading %s uevent: %w", e.Name(), err)
		}
		if dev, ok := ueventPartition(string(data), name); ok {
			found = append(found, dev)
		}
	}
	sort.Strings(found)
	return found, nil
}

// WaitNamed waits up to wait until exactly one partition named name exists
// and its device node is there, and returns its /dev path. Two of them (a
// second berth disk attached) is an error: booting the wrong root would be
// worse than not booting.
func WaitNamed(ctx context.Context, classBlock, name string, wait time.Duration) (string, error) {
	deadline := time.Now().Add(wait)
	for {
		found, err := FindNamed(classBlock, name)
		if err != nil {
			return "", err
		}
		switch {
		case len(found) > 1:
			return "", fmt.Errorf("%d partitions named %s (%s): attach only one berth disk", len(found), name, strings.Join(found, ", "))
		case len(found) == 1:
			if _, err := os.Stat(found[0]); err == nil {
				return found[0], nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no partition named %s appeared within %s (is the disk attached, and its driver (nvme) in the image?)", name, wait)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("waiting for partition %s: %w", name, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
