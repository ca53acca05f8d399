package qemutests

import (
	"regexp"
	"strings"
	"testing"

	"github.com/berth-node/berth/qemu-tests/qemu"
)

// A direct-kernel boot takes its root from root.erofs on a read-only
// virtio disk (the initramfs no longer carries it), behind dm-verity with
// the manifest's parameters; without that disk the boot stops with an
// error naming the serial and saying how to attach it.
func TestRootDisk(t *testing.T) {
	dir := qemu.ImageDir(t)
	if r := qemu.ImageManifest(t, dir).Root; r == nil || r.Serial == "" || r.Path != "" {
		t.Fatalf("the test image's manifest names no root disk (root %+v): rebuild it with make image-test", r)
	}
	t.Run("attached", func(t *testing.T) {
		cfg := qemu.ImageConfig(dir, "")
		cfg.Shell = true
		cfg.Timeout = vmTimeout
		vm := qemu.Start(t, cfg)
		rep, err := vm.Report(bootTimeout)
		if err != nil {
			t.Fatal(err)
		}
		if !reportOK(rep) {
			t.Fatalf("boot report is not OK: %v", rep["error"])
		}
		var root struct {
			Image, FSType string
			Verity        struct{ Partition, Device, RootHash string }
		}
		section(t, rep, "root", &root)
		if root.FSType != "erofs" || root.Verity.Partition != "/dev/vda" || root.Image != root.Verity.Device || !strings.HasPrefix(root.Image, "/dev/dm-") {
			t.Errorf("report's root %+v; want erofs on a dm-verity device over /dev/vda", root)
		}
		out, err := vm.Shell("cat /sys/block/vda/ro /sys/block/vda/serial; grep ' / ' /proc/mounts; ls /root.erofs 2>&1; true", shellTimeout)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"1\nberth-root", root.Image + " / erofs ro", "No such file"} {
			if !strings.Contains(out, want) {
				t.Errorf("guest says:\n%s\nwant %q", out, want)
			}
		}
	})
	t.Run("missing", func(t *testing.T) {
		cfg := qemu.ImageConfig(dir, "berth.onfail=halt")
		cfg.RootDisk = nil
		cfg.Timeout = vmTimeout
		vm := qemu.Start(t, cfg)
		l, err := vm.ExpectLine(regexp.MustCompile(`FATAL: root: .*no disk with serial berth-root`), bootTimeout)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"serial=berth-root", "readonly=on", "berth.root=none"} {
			if !strings.Contains(l.Text, want) {
				t.Errorf("the fatal error does not say %q: %s", want, l.Text)
			}
		}
	})
}
