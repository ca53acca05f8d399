package qemutests

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/qemu-tests/qemu"
)

// linkSerial resolves /dev/disk/by-id/<name> in the guest and returns the
// serial of the device it points at, or "" when the link is not there.
func linkSerial(t *testing.T, vm *qemu.VM, name string) string {
	t.Helper()
	out, err := vm.Shell(fmt.Sprintf(`t=$(readlink /dev/disk/by-id/%s) && cat /sys/class/block/${t##*/}/device/serial && echo "target=$t"; true`, name), shellTimeout)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(out, "\n") {
		if tgt, ok := strings.CutPrefix(strings.TrimSpace(l), "target="); ok && !strings.HasPrefix(tgt, "../../nvme") {
			t.Errorf("%s points at %q, want ../../nvme…", name, tgt)
		}
	}
	if !strings.Contains(out, "target=") {
		return "" // no link
	}
	serial, _, _ := strings.Cut(out, "\n")
	return strings.TrimSpace(serial)
}

// waitLink polls until the link resolves to a device with serial want
// (present true) or is gone (present false).
func waitLink(t *testing.T, vm *qemu.VM, name, want string, present bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		got := linkSerial(t, vm, name)
		if present && got == want || !present && got == "" {
			return
		}
		if time.Now().After(deadline) {
			ls, _ := vm.Shell("ls -l /dev/disk/by-id/ /dev/nvme*", shellTimeout)
			t.Fatalf("/dev/disk/by-id/%s: serial %q, want present=%v (%q); by-id:\n%s\nconsole:\n%s", name, got, present, want, ls, vm.ConsoleTail(40))
		}
		time.Sleep(time.Second)
	}
}

// TestDevLinks: udev's by-id link for an NVMe disk present at boot points
// at the right device; a disk hot-added through QMP gets its link, and
// loses it when it is unplugged. QEMU's model string differs from EBS's;
// the rule is the same (the unit tests hold EBS's names and the EC2
// block-device names, which need Amazon's identify data).
func TestDevLinks(t *testing.T) {
	cfg := qemu.ImageConfig(qemu.ImageDir(t), "")
	cfg.Shell = true
	cfg.Timeout = vmTimeout
	cfg.NICs = []qemu.NIC{{}}
	// Serials not matching berth-is-*: instance storage leaves them alone.
	cfg.Disks = []qemu.Disk{nvmeDisk(t, "devlinks-cold")}
	// q35's root bus takes no hotplug; a root port does.
	cfg.Extra = []string{"-device", "pcie-root-port,id=rp1,bus=pcie.0,chassis=1,slot=1"}
	vm := qemu.Start(t, cfg)
	rep, err := vm.Report(bootTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if !reportOK(rep) {
		t.Fatalf("boot report is not OK: %v", rep["error"])
	}
	var dl struct {
		Coldplug  []struct{ Name, Target string }
		Following bool
		Errors    []string
	}
	section(t, rep, "devlinks", &dl)
	if !dl.Following || len(dl.Errors) > 0 {
		t.Errorf("report's devlinks section: following=%v errors=%v", dl.Following, dl.Errors)
	}

	waitLink(t, vm, "nvme-QEMU_NVMe_Ctrl_devlinks-cold", "devlinks-cold", true)

	hot := nvmeDisk(t, "devlinks-hot")
	if _, err := vm.QMP("blockdev-add", map[string]any{
		"node-name": "hot0", "driver": "raw",
		"file": map[string]any{"driver": "file", "filename": hot.Path},
	}); err != nil {
		t.Fatal(err)
	}
	added := time.Now()
	if _, err := vm.QMP("device_add", map[string]any{
		"driver": "nvme", "id": "hotnvme", "bus": "rp1", "serial": "devlinks-hot", "drive": "hot0",
	}); err != nil {
		t.Fatal(err)
	}
	waitLink(t, vm, "nvme-QEMU_NVMe_Ctrl_devlinks-hot", "devlinks-hot", true)
	t.Logf("hot-added disk's link after %v", time.Since(added).Round(100*time.Millisecond))
	if _, err := vm.ExpectLine(regexp.MustCompile(`devlinks: link added .*nvme-QEMU_NVMe_Ctrl_devlinks-hot`), shellTimeout); err != nil {
		t.Errorf("no console line for the link added: %v", err)
	}

	removed := time.Now()
	if _, err := vm.QMP("device_del", map[string]any{"id": "hotnvme"}); err != nil {
		t.Fatal(err)
	}
	waitLink(t, vm, "nvme-QEMU_NVMe_Ctrl_devlinks-hot", "", false)
	t.Logf("unplugged disk's link gone after %v", time.Since(removed).Round(100*time.Millisecond))
	if l, err := vm.ExpectLine(regexp.MustCompile(`devlinks: link removed .*nvme-QEMU_NVMe_Ctrl_devlinks-hot `), shellTimeout); err != nil {
		t.Errorf("no console line for the link removed: %v", err)
	} else {
		t.Logf("console: %s", l.Text)
	}
	// The cold disk keeps its link.
	waitLink(t, vm, "nvme-QEMU_NVMe_Ctrl_devlinks-cold", "devlinks-cold", true)
}
