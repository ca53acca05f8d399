package qemutests

import (
	"regexp"
	"strings"
	"testing"

	"github.com/berth-node/berth/qemu-tests/qemu"
)

// A direct-kernel boot takes its root from root.erofs on a read-only
// virtio disk (TestBootReport checks it there, on its boot); without that
// disk the boot stops with an error naming the serial and saying how to
// attach it.
func TestRootDisk(t *testing.T) {
	dir := qemu.ImageDir(t)
	if r := qemu.ImageManifest(t, dir).Root; r == nil || r.Serial == "" || r.Path != "" {
		t.Fatalf("the test image's manifest names no root disk (root %+v): rebuild it with make image-test", r)
	}
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
