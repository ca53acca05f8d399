package partition

import (
	"context"
	"os"
	"path/filepath"
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
