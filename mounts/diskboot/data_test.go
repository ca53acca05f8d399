package diskboot

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/berth-node/berth/mounts/partition"
	"github.com/berth-node/berth/mounts/sigprobe"
)

// Only a blank partition is formatted; berth's own ext4 is mounted as it
// is; anything else is refused, never formatted over.
func TestDataFSAction(t *testing.T) {
	for _, tc := range []struct {
		kind    sigprobe.Kind
		mkfs    bool
		wantErr bool
	}{
		{sigprobe.Blank, true, false},
		{sigprobe.Ext4, false, false},
		{sigprobe.XFS, false, true},
		{sigprobe.Unknown, false, true},
		{sigprobe.GPT, false, true},
	} {
		mkfs, err := dataFSAction(sigprobe.Signature{Kind: tc.kind})
		if mkfs != tc.mkfs || (err != nil) != tc.wantErr {
			t.Errorf("%s: mkfs=%v err=%v; want mkfs=%v err=%v", tc.kind, mkfs, err, tc.mkfs, tc.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), "not formatting") {
			t.Errorf("%s: error %q does not say it refuses to format", tc.kind, err)
		}
	}
}

// TestGrowDataLoop is the first-boot grow on a real block device: a loop
// device with partition scanning, holding a disk image's table, on a
// backing file that grew. growData must rewrite the table and tell the
// kernel (BLKPG) while the disk stays attached, then find nothing to do.
// Needs root and loop devices (CI runs as root).
func TestGrowDataLoop(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test attaches loop devices and needs root (CI runs as root)")
	}
	disk := partition.UUIDv5(partition.Namespace, "diskboot grow test")
	fs, _ := partition.ParseUUID(partition.TypeLinuxFS)
	l := partition.DiskLayout{DiskGUID: disk, Sectors: 5 * 2048, Parts: []partition.DiskPart{
		{Name: partition.NameESP, Type: fs, GUID: partition.UUIDv5(disk, "esp"), FirstLBA: 2048, LastLBA: 4095},
		{Name: partition.NameRoot, Type: fs, GUID: partition.UUIDv5(disk, "root"), FirstLBA: 4096, LastLBA: 6143},
		{Name: partition.NameData, Type: fs, GUID: partition.UUIDv5(disk, "data"), FirstLBA: 6144, LastLBA: 8191},
	}}
	img := filepath.Join(t.TempDir(), "disk.raw")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(l.Size()); err != nil {
		t.Fatal(err)
	}
	if err := partition.WriteDisk(f, l); err != nil {
		t.Fatal(err)
	}
	const big = 64 << 20
	if err := f.Truncate(big); err != nil { // the volume grew under the image
		t.Fatal(err)
	}
	dev := attachLoop(t, f)
	// A kernel without the GPT parser (CONFIG_EFI_PARTITION) found no
	// partitions: tell it where they are, as a node's kernel would have.
	lf, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	for i, p := range l.Parts {
		if err := partition.AddPartition(lf, i+1, p.Offset(), p.Size()); err != nil && !errors.Is(err, unix.EBUSY) {
			t.Fatalf("adding partition %d: %v", i+1, err)
		}
	}

	grown, size, err := growData(dev, 3)
	if err != nil {
		t.Fatal(err)
	}
	got, err := partition.ReadDisk(f, big)
	if err != nil {
		t.Fatal(err)
	}
	p, _, _ := got.Find(partition.NameData)
	if !grown || size != p.Size() || p.FirstLBA != 6144 || got.Sectors != big/partition.SectorSize {
		t.Fatalf("growData = %v, %d; table now %v", grown, size, got)
	}
	// The kernel was told: the partition's size in sysfs is the new one.
	sysSize, err := os.ReadFile(filepath.Join("/sys/class/block", filepath.Base(dev)+"p3", "size"))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprint(p.Size() / 512); strings.TrimSpace(string(sysSize)) != want {
		t.Fatalf("kernel sees %s sectors for partition 3, want %s", strings.TrimSpace(string(sysSize)), want)
	}
	grown, size2, err := growData(dev, 3)
	if err != nil || grown || size2 != size {
		t.Fatalf("second boot: growData = %v, %d, %v; want nothing to do, %d", grown, size2, err, size)
	}
}

// attachLoop attaches f to a free loop device with partition scanning and
// returns the device's path; the test's cleanup detaches it.
func attachLoop(t *testing.T, f *os.File) string {
	t.Helper()
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("loop devices: %v", err)
	}
	defer ctl.Close()
	for range 10 { // another process may take the free device first
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			t.Fatalf("LOOP_CTL_GET_FREE: %v", err)
		}
		path := fmt.Sprintf("/dev/loop%d", n)
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			if err := unix.Mknod(path, unix.S_IFBLK|0o600, int(unix.Mkdev(7, uint32(n)))); err != nil {
				t.Fatal(err)
			}
		}
		loop, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		cfg := unix.LoopConfig{Fd: uint32(f.Fd()), Info: unix.LoopInfo64{Flags: unix.LO_FLAGS_PARTSCAN}}
		if err := unix.IoctlLoopConfigure(int(loop.Fd()), &cfg); err != nil {
			loop.Close()
			if errors.Is(err, unix.EBUSY) {
				continue
			}
			t.Fatalf("LOOP_CONFIGURE %s: %v", path, err)
		}
		t.Cleanup(func() {
			_ = unix.IoctlSetInt(int(loop.Fd()), unix.LOOP_CLR_FD, 0)
			loop.Close()
		})
		return path
	}
	t.Fatal("no free loop device")
	return ""
}
