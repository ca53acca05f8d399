package qemutests

import (
	"strings"
	"testing"

	"github.com/berth-node/berth/qemu-tests/qemu"
)

// The image's host programs run in the guest with the libraries mkimage
// copied beside them: the builder's own on amd64, Debian's arm64 packages
// (the sysroot) on arm64. A library left out, a loader at another path or
// an extensions directory iptables does not look in would otherwise fail
// only on a node, when kubelet or berth first runs the program. The nat
// rule makes iptables dlopen its comment and MASQUERADE extensions.
func TestHostPrograms(t *testing.T) {
	dir := qemu.ImageDir(t)
	cfg := qemu.ImageConfig(dir, "")
	cfg.Shell = true
	cfg.Timeout = vmTimeout
	vm := qemu.Start(t, cfg)
	if _, err := vm.Report(bootTimeout); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ cmd, want string }{
		{"/usr/sbin/iptables --version", "nf_tables"},
		{"/usr/sbin/iptables-legacy --version", "legacy"},
		{"/usr/sbin/iptables -t nat -A POSTROUTING -m comment --comment berth-host-programs -j MASQUERADE && /usr/sbin/iptables-save -t nat",
			`-A POSTROUTING -m comment --comment berth-host-programs -j MASQUERADE`},
		{"/usr/sbin/nft --version", "nftables"},
		{"/usr/sbin/ipset --version", "ipset"},
		{"/usr/sbin/mkfs.xfs -V", "mkfs.xfs version"},
		{"/usr/sbin/mkfs.ext4 -V 2>&1", "mke2fs"},
		{"/usr/bin/mount --version", "util-linux"},
	} {
		out, err := vm.Shell(c.cmd, shellTimeout)
		if err != nil {
			t.Errorf("%s: %v", c.cmd, err)
			continue
		}
		if !strings.Contains(out, c.want) {
			t.Errorf("%s: output %q lacks %q", c.cmd, out, c.want)
		}
	}
}
