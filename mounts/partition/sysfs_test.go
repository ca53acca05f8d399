package partition

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func writeUevent(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name, "uevent"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestUeventPartition(t *testing.T) {
	for _, tc := range []struct {
		uevent, want string
		ok           bool
	}{
		{"MAJOR=259\nMINOR=2\nDEVNAME=nvme0n1p2\nDEVTYPE=partition\nDISKSEQ=1\nPARTN=2\nPARTNAME=berth-root\n", "/dev/nvme0n1p2", true},
		{"MAJOR=259\nDEVNAME=nvme0n1p3\nDEVTYPE=partition\nPARTNAME=berth-data\n", "", false},
		{"MAJOR=259\nDEVNAME=nvme0n1\nDEVTYPE=disk\n", "", false},
		{"PARTNAME=berth-root\n", "", false}, // no DEVNAME: nothing to open
		{"DEVNAME=sda1\nPARTNAME=berth-root-old\n", "", false},
	} {
		got, ok := ueventPartition(tc.uevent, NameRoot)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ueventPartition(%q) = %q, %v; want %q, %v", tc.uevent, got, ok, tc.want, tc.ok)
		}
	}
}

func TestFindNamed(t *testing.T) {
	dir := t.TempDir()
	writeUevent(t, dir, "nvme0n1", "DEVNAME=nvme0n1\nDEVTYPE=disk\n")
	writeUevent(t, dir, "nvme0n1p1", "DEVNAME=nvme0n1p1\nPARTNAME=esp\n")
	writeUevent(t, dir, "nvme0n1p2", "DEVNAME=nvme0n1p2\nPARTNAME=berth-root\n")
	writeUevent(t, dir, "nvme0n1p3", "DEVNAME=nvme0n1p3\nPARTNAME=berth-data\n")
	if err := os.MkdirAll(filepath.Join(dir, "loop0"), 0o755); err != nil { // no uevent: skipped
		t.Fatal(err)
	}
	got, err := FindNamed(dir, NameRoot)
	if err != nil || len(got) != 1 || got[0] != "/dev/nvme0n1p2" {
		t.Fatalf("FindNamed = %v, %v; want [/dev/nvme0n1p2]", got, err)
	}
	writeUevent(t, dir, "nvme1n1p2", "DEVNAME=nvme1n1p2\nPARTNAME=berth-root\n")
	// Two root partitions: WaitNamed must refuse rather than pick one.
	_, err = WaitNamed(context.Background(), dir, NameRoot, time.Second)
	if err == nil || !strings.Contains(err.Error(), "2 partitions named berth-root") {
		t.Fatalf("WaitNamed with two roots: err = %v; want a refusal naming both", err)
	}
}

func TestWaitNamedDeadline(t *testing.T) {
	dir := t.TempDir()
	writeUevent(t, dir, "vda", "DEVNAME=vda\nDEVTYPE=disk\n")
	start := time.Now()
	_, err := WaitNamed(context.Background(), dir, NameRoot, 200*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "no partition named berth-root appeared within") {
		t.Fatalf("err = %v; want the deadline error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("WaitNamed took %s past a 200ms deadline", d)
	}
}

// fakeSysfs lays out dir like /sys: each disk a directory under a fake
// PCI device in dir/devices, its partitions directories inside it (with a
// "partition" number file), and dir/class/block holding relative symlinks
// to all of them, as the kernel does. disks maps a disk's name to its
// partitions' GPT names, in order (p1, p2, ...). It returns class/block.
func fakeSysfs(t *testing.T, disks map[string][]string) string {
	t.Helper()
	dir := t.TempDir()
	classBlock := filepath.Join(dir, "class", "block")
	if err := os.MkdirAll(classBlock, 0o755); err != nil {
		t.Fatal(err)
	}
	link := func(target, name string) {
		rel, err := filepath.Rel(classBlock, target)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(rel, filepath.Join(classBlock, name)); err != nil {
			t.Fatal(err)
		}
	}
	i := 0
	for disk, names := range disks {
		i++
		ctrl := "nvme" + strings.TrimPrefix(strings.TrimSuffix(disk, "n1"), "nvme")
		dd := filepath.Join(dir, "devices", "pci0000:00", "0000:00:0"+strconv.Itoa(i)+".0", "nvme", ctrl, disk)
		writeUevent(t, filepath.Dir(dd), disk, "DEVNAME="+disk+"\nDEVTYPE=disk\n")
		link(dd, disk)
		for j, pn := range names {
			n := strconv.Itoa(j + 1)
			part := disk + "p" + n
			writeUevent(t, dd, part, "DEVNAME="+part+"\nDEVTYPE=partition\nPARTN="+n+"\nPARTNAME="+pn+"\n")
			if err := os.WriteFile(filepath.Join(dd, part, "partition"), []byte(n+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			link(filepath.Join(dd, part), part)
		}
	}
	return classBlock
}

// FindNamedDisks says which disk each partition of a name is on, from the
// class/block symlinks, so that a look-alike on another disk can be told
// from the boot disk's own.
func TestFindNamedDisks(t *testing.T) {
	cb := fakeSysfs(t, map[string][]string{
		"nvme0n1": {NameESP, NameRoot, NameData},
		"nvme1n1": {NameESP, NameRoot + "-old", NameData},
		"nvme2n1": {"scratch"},
	})
	got, err := FindNamedDisks(cb, NameData)
	if err != nil {
		t.Fatal(err)
	}
	want := []Candidate{{"/dev/nvme0n1p3", "/dev/nvme0n1"}, {"/dev/nvme1n1p3", "/dev/nvme1n1"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("FindNamedDisks = %v; want %v", got, want)
	}
	if disk, err := DiskOf(cb, "/dev/nvme0n1p2"); err != nil || disk != "/dev/nvme0n1" {
		t.Fatalf("DiskOf(root) = %q, %v; want /dev/nvme0n1", disk, err)
	}
	if disk, err := DiskOf(cb, "/dev/nvme1n1"); err == nil || !strings.Contains(err.Error(), "not a partition") {
		t.Fatalf("DiskOf(a whole disk) = %q, %v; want an error", disk, err)
	}
	if disk, err := DiskOf(cb, "/dev/nvme9n1p1"); err == nil {
		t.Fatalf("DiskOf(a missing partition) = %q; want an error", disk)
	}
	// FindNamed still lists both, by /dev path.
	if all, err := FindNamed(cb, NameData); err != nil || strings.Join(all, " ") != "/dev/nvme0n1p3 /dev/nvme1n1p3" {
		t.Fatalf("FindNamed = %v, %v", all, err)
	}
}
