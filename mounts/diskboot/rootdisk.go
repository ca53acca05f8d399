package diskboot

import (
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

// RootDiskWait bounds the wait for a direct-kernel boot's root disk: a
// virtio disk appears within a second of virtio_blk's load, even under
// TCG, so a longer wait would only delay the error that it is missing.
const RootDiskWait = 30 * time.Second

// FindSerial returns the /dev paths of the whole disks in classBlock
// (sysfs's class/block) whose serial is serial, sorted. virtio-blk shows
// its serial as <disk>/serial, NVMe as <disk>/device/serial (the
// controller's); partitions are skipped, a root disk has none.
func FindSerial(classBlock, serial string) ([]string, error) {
	ents, err := os.ReadDir(classBlock)
	if err != nil {
		return nil, fmt.Errorf("listing block devices in %s: %w", classBlock, err)
	}
	var out []string
	for _, e := range ents {
		dir := filepath.Join(classBlock, e.Name())
		if _, err := os.Stat(filepath.Join(dir, "partition")); err == nil {
			continue
		}
		for _, f := range []string{"serial", "device/serial"} {
			b, err := os.ReadFile(filepath.Join(dir, f))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				// A disk going away while looked at, or an attribute
				// its driver refuses: not the root disk.
				break
			}
			if strings.TrimSpace(string(b)) == serial {
				out = append(out, "/dev/"+e.Name())
			}
			break
		}
	}
	sort.Strings(out)
	return out, nil
}

// WaitSerial waits up to wait until exactly one disk with serial exists
// and its device node is there, and returns its /dev path. Two of them is
// an error, as two berth-root partitions are: booting the wrong root would
// be worse than not booting.
func WaitSerial(ctx context.Context, classBlock, serial string, wait time.Duration) (string, error) {
	deadline := time.Now().Add(wait)
	for {
		found, err := FindSerial(classBlock, serial)
		if err != nil {
			return "", err
		}
		switch {
		case len(found) > 1:
			return "", fmt.Errorf("%d disks with serial %s (%s): attach only one root disk", len(found), serial, strings.Join(found, ", "))
		case len(found) == 1:
			if _, err := os.Stat(found[0]); err == nil {
				return found[0], nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no disk with serial %s appeared within %s: this image's root is root.erofs on a disk of its own; "+
				"attach it read-only with that serial (QEMU: -drive file=root.erofs,if=none,format=raw,readonly=on,id=root "+
				"-device virtio-blk-pci,drive=root,serial=%s), or boot with berth.root=none", serial, wait, serial)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("waiting for the disk with serial %s: %w", serial, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
