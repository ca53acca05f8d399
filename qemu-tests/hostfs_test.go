package qemutests

import (
	"strings"
	"testing"

	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/mounts"
	"github.com/berth-node/berth/mounts/hostfs"
	"github.com/berth-node/berth/qemu-tests/qemu"
)

// TestHostFS boots the test image, from the initramfs and from the disk
// image, and checks the host layout EKS add-ons rely on, from inside the
// guest: a plugin copied into /opt/cni/bin runs and lands in the overlay's
// upper directory, /opt/csi and /etc/cni/net.d take writes, /var/run is
// the absolute link to /run, bpffs is on /sys/fs/bpf, kubelet's plugin
// directories exist, and PID 1's mount table shows /, /sys and /var (and
// the data partition's binds on a disk boot) shared.
func TestHostFS(t *testing.T) {
	dir := qemu.ImageDir(t)
	t.Run("initramfs", func(t *testing.T) {
		cfg := qemu.ImageConfig(dir, "")
		cfg.Shell = true
		cfg.Timeout = vmTimeout
		cfg.NICs = []qemu.NIC{{}}
		vm := qemu.Start(t, cfg)
		checkHostFS(t, vm, []string{"/", "/sys", "/var"})
	})
	t.Run("disk", func(t *testing.T) {
		img, res := testDisk(t, dir)
		big := copyDisk(t, img, res.Layout.Size()+64<<20)
		vm := qemu.Start(t, uefiConfig(t, big))
		checkHostFS(t, vm, []string{"/", "/sys", "/var", "/var/lib/kubelet", "/var/log"})
	})
}

func checkHostFS(t *testing.T, vm *qemu.VM, shared []string) {
	t.Helper()
	rep, err := vm.Report(bootTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if !reportOK(rep) {
		t.Fatalf("boot report is not OK: %v", rep)
	}
	var host hostfs.Result
	section(t, rep, "host", &host)
	if len(host.Errors) > 0 {
		t.Errorf("host phase errors: %q", host.Errors)
	}
	for _, o := range host.Overlays {
		if o.Status != "mounted" {
			t.Errorf("report: overlay %s is %s, want mounted (%s)", o.Target, o.Status, o.Error)
		}
	}
	if host.VarRun.Action != hostfs.LinkCreate {
		t.Errorf("report: /var/run action %q on a fresh /var, want %s", host.VarRun.Action, hostfs.LinkCreate)
	}
	var phases []report.Phase
	section(t, rep, "phases", &phases)
	var names []string
	for _, p := range phases {
		names = append(names, p.Name)
		if p.Name == "host" {
			figure(t, "host phase: %d ms guest (setup %d ms)", p.DurationMs, host.DurationMs)
			if p.Error != "" {
				t.Errorf("host phase error: %s", p.Error)
			}
		}
	}
	if !strings.Contains(strings.Join(names, " "), "storage host apply") {
		t.Errorf("phases %q: want host between storage and apply", names)
	}

	sh := func(cmd string) string {
		t.Helper()
		out, err := vm.Shell(cmd, shellTimeout)
		if err != nil {
			t.Errorf("%s: %v", cmd, err)
		}
		return strings.TrimSpace(out)
	}
	// busybox's cp is reached through the busybox binary: the test image
	// links only some applets.
	if out := sh("busybox cp /opt/cni/bin/loopback /opt/cni/bin/copied && CNI_COMMAND=VERSION /opt/cni/bin/copied"); !strings.Contains(out, "cniVersion") {
		t.Errorf("a plugin copied into /opt/cni/bin did not run: %q", out)
	}
	if out := sh("ls /var/lib/berth/overlay/opt-cni-bin/upper"); out != "copied" {
		t.Errorf("the overlay's upper dir holds %q, want only the copied plugin", out)
	}
	if out := sh("CNI_COMMAND=VERSION /opt/cni/bin/bridge"); !strings.Contains(out, "cniVersion") {
		t.Errorf("the image's bridge plugin does not run through the overlay: %q", out)
	}
	if out := sh("echo x > /opt/csi/probe && cat /opt/csi/probe && echo '{}' > /etc/cni/net.d/99-probe.conflist && echo ok"); out != "x\nok" {
		t.Errorf("writing /opt/csi and /etc/cni/net.d: %q", out)
	}
	if out := sh("readlink /var/run"); out != "/run" {
		t.Errorf("readlink /var/run = %q, want /run", out)
	}
	if out := sh("test -d /var/run/berth && test -d /var/lib/kubelet/plugins_registry && test -d /var/lib/kubelet/plugins && echo ok"); out != "ok" {
		t.Errorf("kubelet plugin dirs or /var/run/berth missing: %q", out)
	}
	mi := sh("cat /proc/1/mountinfo")
	ms, err := mounts.ParseMountInfo(strings.NewReader(mi))
	if err != nil {
		t.Fatal(err)
	}
	top := func(target string) (mounts.MountInfo, bool) {
		for i := len(ms) - 1; i >= 0; i-- {
			if ms[i].Target == target {
				return ms[i], true
			}
		}
		return mounts.MountInfo{}, false
	}
	if m, ok := top("/sys/fs/bpf"); !ok || m.FSType != "bpf" || !strings.Contains(m.SuperOptions, "mode=700") {
		t.Errorf("/sys/fs/bpf: %+v, want bpf mode=700", m)
	}
	for _, p := range append(shared, "/opt/cni/bin", "/opt/csi", "/sys/fs/bpf") {
		m, ok := top(p)
		if !ok || !m.Shared() {
			t.Errorf("%s: %+v, want a shared mount", p, m)
		}
	}
	if t.Failed() {
		t.Logf("PID 1's mountinfo:\n%s", mi)
	}
}
