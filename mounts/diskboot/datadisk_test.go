package diskboot

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/mounts/partition"
)

// sysfsDisks lays out a temporary directory like /sys: each disk a
// directory under its own fake NVMe controller in devices/, its partitions
// directories inside it (uevent with PARTNAME, and a "partition" number
// file), and class/block holding relative symlinks to all of them, as the
// kernel has it. disks maps a disk's name (nvme0n1) to its partitions' GPT
// names, p1 first. It returns the class/block directory.
func sysfsDisks(t *testing.T, disks map[string][]string) string {
	t.Helper()
	dir := t.TempDir()
	cb := filepath.Join(dir, "class", "block")
	write := func(p, body string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, name string) {
		if err := os.MkdirAll(cb, 0o755); err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(cb, target)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(rel, filepath.Join(cb, name)); err != nil {
			t.Fatal(err)
		}
	}
	for disk, names := range disks {
		ctrl := strings.TrimSuffix(disk, "n1")
		dd := filepath.Join(dir, "devices", "pci0000:00", "0000:00:"+ctrl, "nvme", ctrl, disk)
		write(filepath.Join(dd, "uevent"), "DEVNAME="+disk+"\nDEVTYPE=disk\n")
		link(dd, disk)
		for i, name := range names {
			n := strconv.Itoa(i + 1)
			part := disk + "p" + n
			write(filepath.Join(dd, part, "uevent"), "DEVNAME="+part+"\nDEVTYPE=partition\nPARTN="+n+"\nPARTNAME="+name+"\n")
			write(filepath.Join(dd, part, "partition"), n+"\n")
			link(filepath.Join(dd, part), part)
		}
	}
	return cb
}

func always(string) bool { return true }

var berthDisk = []string{partition.NameESP, partition.NameRoot, partition.NameData}

// The data partition is the root disk's: a berth-data partition on any
// other disk (an attached volume, another node's snapshot) is never
// chosen, and is listed as ignored.
func TestFindDataOnRootDisk(t *testing.T) {
	for _, tc := range []struct {
		name    string
		disks   map[string][]string
		want    string
		ignored []string
		wantErr []string // substrings of the error; nil: no error
	}{{
		name:    "root disk and another both have one",
		disks:   map[string][]string{"nvme0n1": berthDisk, "nvme1n1": {partition.NameData}},
		want:    "/dev/nvme0n1p3",
		ignored: []string{"/dev/nvme1n1p1"},
	}, {
		name:    "a snapshot of another berth node attached",
		disks:   map[string][]string{"nvme0n1": berthDisk, "nvme1n1": {partition.NameESP, "berth-root-b", partition.NameData}},
		want:    "/dev/nvme0n1p3",
		ignored: []string{"/dev/nvme1n1p3"},
	}, {
		name:    "only another disk has one",
		disks:   map[string][]string{"nvme0n1": {partition.NameESP, partition.NameRoot}, "nvme1n1": {partition.NameData}},
		ignored: []string{"/dev/nvme1n1p1"},
		wantErr: []string{"no partition named berth-data on the root disk /dev/nvme0n1", "refusing the berth-data on other disks (/dev/nvme1n1p1 on /dev/nvme1n1)"},
	}, {
		name:  "only the root disk has one",
		disks: map[string][]string{"nvme0n1": berthDisk, "nvme1n1": {"scratch"}},
		want:  "/dev/nvme0n1p3",
	}, {
		name:    "none anywhere",
		disks:   map[string][]string{"nvme0n1": {partition.NameESP, partition.NameRoot}},
		wantErr: []string{"no partition named berth-data on the root disk /dev/nvme0n1"},
	}, {
		name:    "two on the root disk",
		disks:   map[string][]string{"nvme0n1": append(slices.Clone(berthDisk), partition.NameData)},
		wantErr: []string{"2 partitions named berth-data on the root disk /dev/nvme0n1 (/dev/nvme0n1p3, /dev/nvme0n1p4)"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cb := sysfsDisks(t, tc.disks)
			rootDisk, err := partition.DiskOf(cb, "/dev/nvme0n1p2")
			if err != nil || rootDisk != "/dev/nvme0n1" {
				t.Fatalf("DiskOf(root) = %q, %v", rootDisk, err)
			}
			got, elsewhere, err := findData(context.Background(), cb, rootDisk, 100*time.Millisecond, always)
			var ign []string
			for _, c := range elsewhere {
				if c.Disk == rootDisk {
					t.Errorf("ignored %v, which is on the root disk", c)
				}
				ign = append(ign, c.Partition)
			}
			if got != tc.want || !slices.Equal(ign, tc.ignored) {
				t.Errorf("findData = %q, ignored %v; want %q, ignored %v", got, ign, tc.want, tc.ignored)
			}
			if tc.wantErr == nil && err != nil {
				t.Errorf("err = %v", err)
			}
			for _, w := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v; want it to say %q", err, w)
				}
			}
		})
	}
}

// The root disk's data partition is waited for until its device node is
// there (devtmpfs may lag sysfs), and only for so long.
func TestFindDataWaitsForDeviceNode(t *testing.T) {
	cb := sysfsDisks(t, map[string][]string{"nvme0n1": berthDisk})
	calls := 0
	got, _, err := findData(context.Background(), cb, "/dev/nvme0n1", 5*time.Second, func(string) bool { calls++; return calls > 2 })
	if err != nil || got != "/dev/nvme0n1p3" || calls != 3 {
		t.Fatalf("findData = %q, %v after %d checks; want /dev/nvme0n1p3 on the third", got, err, calls)
	}
	_, _, err = findData(context.Background(), cb, "/dev/nvme0n1", 100*time.Millisecond, func(string) bool { return false })
	if err == nil || !strings.Contains(err.Error(), "has no device node") {
		t.Fatalf("err = %v; want the missing device node", err)
	}
}

// With berth-data only on another disk, setupDataPartition touches
// nothing (no module, no mkfs, no device opened: the fixture's /dev paths
// do not exist, so an open would fail with a different error), names the
// other disk's partition in the report's ignored list and in a log line,
// and fails, which SwitchRoot turns into a node on tmpfs.
func TestSetupDataPartitionRefusesOtherDisk(t *testing.T) {
	defer func(w time.Duration) { dataWait = w }(dataWait)
	dataWait = 100 * time.Millisecond
	cb := sysfsDisks(t, map[string][]string{
		"nvme0n1": {partition.NameESP, partition.NameRoot},
		"nvme1n1": {partition.NameESP, partition.NameRoot + "-x", partition.NameData},
	})
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	touched := false
	dp, err := setupDataPartition(context.Background(), log, Options{
		ClassBlock:  cb,
		LoadModules: func(context.Context, ...string) error { touched = true; return nil },
		Run:         func(context.Context, *exec.Cmd) ([]byte, error) { touched = true; return nil, nil },
	}, "/dev/nvme0n1p2")
	if err == nil || !strings.Contains(err.Error(), "no partition named berth-data on the root disk /dev/nvme0n1") {
		t.Fatalf("err = %v; want the root disk's missing data partition", err)
	}
	if dp == nil || dp.Partition != "" || dp.Disk != "" || dp.Mount != "" || dp.Formatted || dp.Grown || touched {
		t.Fatalf("data partition %+v (touched %v); want nothing chosen, nothing done", dp, touched)
	}
	want := []string{"/dev/nvme1n1p3 (not on the root disk /dev/nvme0n1)"}
	if !slices.Equal(dp.Ignored, want) {
		t.Fatalf("ignored %q; want %q", dp.Ignored, want)
	}
	if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "partition=/dev/nvme1n1p3") || !strings.Contains(l, "root_disk=/dev/nvme0n1") {
		t.Fatalf("log does not name the ignored partition:\n%s", l)
	}
}

// A root partition whose disk sysfs cannot tell is no reason to take any
// berth-data partition.
func TestSetupDataPartitionNeedsRootDisk(t *testing.T) {
	cb := sysfsDisks(t, map[string][]string{"nvme1n1": berthDisk})
	dp, err := setupDataPartition(context.Background(), slog.New(slog.DiscardHandler), Options{ClassBlock: cb}, "/dev/nvme0n1p2")
	if err == nil || dp == nil || dp.Partition != "" {
		t.Fatalf("setupDataPartition = %+v, %v; want an error and nothing chosen", dp, err)
	}
}
