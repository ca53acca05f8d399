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

	"github.com/berth-node/berth/mounts/partition"
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
	return partition.WaitOne(ctx, func() ([]string, error) { return FindSerial(classBlock, serial) }, wait, partition.Sought{
		One:     "disk with serial " + serial,
		Many:    "disks with serial " + serial,
		TooMany: "attach only one root disk",
		Missing: ": this image's root is root.erofs on a disk of its own; " +
			"attach it read-only with that serial (QEMU: -drive file=root.erofs,if=none,format=raw,readonly=on,id=root " +
			"-device virtio-blk-pci,drive=root,serial=" + serial + "), or boot with berth.root=none",
	})
}
