package qemutests

import (
	"bytes"
	"crypto/sha256"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/mounts/localstorage"
	"github.com/berth-node/berth/qemu-tests/qemu"
)

// sparseDisk makes a sparse disk image of size bytes in dir.
func sparseDisk(t *testing.T, dir, name string, size int64) string {
	t.Helper()
	p := filepath.Join(dir, name+".img")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	return p
}

func fileSum(t *testing.T, p string) [32]byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

func allZero(t *testing.T, p string) bool {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		n, err := f.Read(buf)
		if n > 0 && !bytes.Equal(buf[:n], make([]byte, n)) {
			return false
		}
		if err == io.EOF {
			return true
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// storageNode is one boot with instance-store disks (NVMe with serials
// berth-is-N) and an "EBS" disk berth must never touch.
type storageNode struct {
	disks []string
	ebs   string
}

func newStorageNode(t *testing.T, n int) *storageNode {
	dir := t.TempDir()
	s := &storageNode{ebs: sparseDisk(t, dir, "ebs", 256<<20)}
	for i := range n {
		s.disks = append(s.disks, sparseDisk(t, dir, "is"+string(rune('0'+i)), 1<<30))
	}
	return s
}

// boot boots the node with the given localStorage strategy and returns its
// report's storage section.
func (s *storageNode) boot(t *testing.T, strategy string) (*qemu.VM, localstorage.Result) {
	t.Helper()
	extra := ""
	if strategy != "" {
		extra = "  instance:\n    localStorage:\n      strategy: " + strategy + "\n"
	}
	_, imdsURL := startIMDS(t, []byte(nodeConfigYAML(t, extra)))
	cfg := qemu.ImageConfig(qemu.ImageDir(t), "berth.imds="+imdsURL)
	cfg.Shell = true
	cfg.MemoryMB = 1536
	cfg.Timeout = vmTimeout
	cfg.NICs = []qemu.NIC{{}}
	cfg.Disks = append(cfg.Disks, qemu.Disk{Path: s.ebs, Interface: "nvme", Serial: "vol0ebsstandin"})
	for i, d := range s.disks {
		cfg.Disks = append(cfg.Disks, qemu.Disk{Path: d, Interface: "nvme", Serial: "berth-is-" + string(rune('0'+i))})
	}
	vm := qemu.Start(t, cfg)
	rep, err := vm.Report(bootTimeout)
	if err != nil {
		t.Fatal(err)
	}
	var res localstorage.Result
	section(t, rep, "storage", &res)
	return vm, res
}

func (s *storageNode) powerOff(t *testing.T, vm *qemu.VM) {
	t.Helper()
	if err := vm.PowerDown(); err != nil {
		t.Fatal(err)
	}
	if err := vm.WaitExit(powerOffBound); err != nil {
		t.Fatalf("no clean power-off: %v", err)
	}
	if !allZero(t, s.ebs) {
		t.Error("the EBS stand-in disk was written to")
	}
}

// cutPower cuts the node's power (cutPower) and checks the EBS stand-in
// was never written.
func (s *storageNode) cutPower(t *testing.T, vm *qemu.VM) {
	t.Helper()
	cutPower(t, vm)
	if !allZero(t, s.ebs) {
		t.Error("the EBS stand-in disk was written to")
	}
}

func stepMs(r localstorage.Result) map[string]float64 {
	out := map[string]float64{}
	for _, s := range r.Steps {
		out[s.Name] += s.DurationMs
	}
	return out
}

// RAID0 over two disks: an array, an XFS filesystem, the binds, a file
// written (and synced) through /var/lib/containerd lands on the array.
// Then the power is cut, no clean stop: the next boot finds the array and
// mounts the same filesystem (XFS replays its log) without mkfs, and the
// file is still there.
func TestStorageRAID0AndReboot(t *testing.T) {
	node := newStorageNode(t, 2)
	vm, res := node.boot(t, "RAID0")
	if res.Status != localstorage.StatusReady || res.Array == nil || res.Array.Level != "raid0" || len(res.Array.Members) != 2 {
		t.Fatalf("storage: %+v", res)
	}
	if len(res.Filesystems) != 1 || !res.Filesystems[0].Created || res.Filesystems[0].Type != "xfs" || res.Filesystems[0].Mount != "/mnt/k8s-disks/0" {
		t.Fatalf("filesystems: %+v", res.Filesystems)
	}
	if len(res.Binds) != 3 {
		t.Errorf("binds: %+v", res.Binds)
	}
	if len(res.Skipped) == 0 {
		t.Errorf("the EBS stand-in is not listed as skipped: %+v", res)
	}
	st := stepMs(res)
	figure(t, "storage RAID0 2x1GiB first boot: discover %.0f ms, partition %.0f ms, array %.0f ms, mkfs %.0f ms, mount %.0f ms",
		st["discover"], st["partition"], st["array"], st["mkfs"], st["mount"])
	out, err := vm.Shell("echo kept > /var/lib/containerd/berth-test && sync && cat /mnt/k8s-disks/0/containerd/berth-test && grep -c ' /var/lib/kubelet .*shared:' /proc/self/mountinfo", shellTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "kept") {
		t.Errorf("file written to /var/lib/containerd is not on the array: %q", out)
	}
	node.cutPower(t, vm)

	vm, res = node.boot(t, "RAID0")
	if res.Status != localstorage.StatusReady || len(res.Filesystems) != 1 || res.Filesystems[0].Created {
		t.Fatalf("boot after the power cut: %+v", res)
	}
	if lines, _ := vm.Expect(regexp.MustCompile(`making filesystem`), time.Second); lines != nil {
		t.Error("mkfs ran on the boot after the power cut")
	}
	out, err = vm.Shell("cat /var/lib/containerd/berth-test", shellTimeout)
	if err != nil || !strings.Contains(out, "kept") {
		t.Errorf("file synced before the power cut: %q %v", out, err)
	}
	node.powerOff(t, vm)
}

// RAID10 over four disks: device-mapper's raid target with the raid10
// personality.
func TestStorageRAID10(t *testing.T) {
	node := newStorageNode(t, 4)
	vm, res := node.boot(t, "RAID10")
	if res.Status != localstorage.StatusReady || res.Array == nil || res.Array.Level != "raid10" || len(res.Array.Members) != 4 {
		t.Fatalf("storage: %+v", res)
	}
	node.powerOff(t, vm)
}

// The Mount strategy: one filesystem per disk, no array, no binds.
func TestStorageMount(t *testing.T) {
	node := newStorageNode(t, 2)
	vm, res := node.boot(t, "Mount")
	if res.Status != localstorage.StatusReady || res.Array != nil || len(res.Filesystems) != 2 || len(res.Binds) != 0 {
		t.Fatalf("storage: %+v", res)
	}
	mounts := []string{res.Filesystems[0].Mount, res.Filesystems[1].Mount}
	if mounts[0] != "/mnt/k8s-disks/0" || mounts[1] != "/mnt/k8s-disks/1" {
		t.Errorf("mount points %v", mounts)
	}
	node.powerOff(t, vm)
}

// No instance-store disk (RAID0 asked, only an EBS disk attached) is
// TestConfigFromIMDS's boot: the phase is skipped and the report says why.

// A matched disk holding a filesystem berth did not make is left alone:
// the error names the disk and what it found, and the node falls back to
// the root disk.
func TestStorageForeignFilesystem(t *testing.T) {
	node := newStorageNode(t, 2)
	if out, err := exec.Command("/sbin/mkfs.ext4", "-q", "-F", "-L", "precious", node.disks[1]).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v %s", err, out)
	}
	before := fileSum(t, node.disks[1])
	vm, res := node.boot(t, "RAID0")
	if res.Status != localstorage.StatusFailed || res.Fallback != "root disk" ||
		!strings.Contains(res.Error, "serial berth-is-1") || !strings.Contains(res.Error, `ext4 filesystem (label "precious"`) {
		t.Fatalf("storage: %+v", res)
	}
	node.powerOff(t, vm)
	if fileSum(t, node.disks[1]) != before {
		t.Error("the foreign disk was modified")
	}
	if !allZero(t, node.disks[0]) {
		t.Error("the other disk was written although berth refused the set")
	}
}
