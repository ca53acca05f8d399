package qemutests

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/qemu-tests/qemu"
)

// Budgets under TCG on a busy 2-core machine: boot to the report takes
// 10-30 s of wall time; these leave room for a loaded CI host.
const (
	bootTimeout  = 4 * time.Minute
	shellTimeout = time.Minute
	vmTimeout    = 8 * time.Minute
)

// berthLine matches berth's console log format: "[  1234ms] phase: message k=v".
var berthLine = regexp.MustCompile(`^\[\s*(\d+)ms\] (\S+): (.*)$`)

// field finds key in a report object ignoring case (the report's JSON
// naming belongs to report/, not to these tests).
func field(obj map[string]any, key string) (any, bool) {
	for k, v := range obj {
		if strings.EqualFold(k, key) {
			return v, true
		}
	}
	return nil, false
}

func reportModules(t *testing.T, rep map[string]any) []string {
	t.Helper()
	v, ok := field(rep, "modules")
	if !ok {
		t.Fatalf("report has no modules: %v", rep)
	}
	list, ok := v.([]any)
	if !ok {
		t.Fatalf("report modules is %T, want a list", v)
	}
	var out []string
	for _, x := range list {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

func reportOK(rep map[string]any) bool {
	v, _ := field(rep, "ok")
	b, _ := v.(bool)
	return b
}

// mount is one /proc/mounts line.
type mount struct{ source, target, fstype, opts string }

func parseMounts(text string) []mount {
	var out []mount
	for _, l := range strings.Split(text, "\n") {
		f := strings.Fields(l)
		if len(f) >= 4 {
			out = append(out, mount{f[0], f[1], f[2], f[3]})
		}
	}
	return out
}

// lastMount is the mount on top at target.
func lastMount(ms []mount, target string) (mount, bool) {
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].target == target {
			return ms[i], true
		}
	}
	return mount{}, false
}

// figure logs a measured number; `make test-qemu` shows these lines.
func figure(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Logf("figure: "+format, args...)
}

// firstBerthLine is berth's first console log line and its boot-clock ms.
func firstBerthLine(vm *qemu.VM) (qemu.Line, int, bool) {
	for _, l := range vm.Lines() {
		if m := berthLine.FindStringSubmatch(l.Text); m != nil {
			ms, _ := strconv.Atoi(m[1])
			return l, ms, true
		}
	}
	return qemu.Line{}, 0, false
}

func nvmeDisk(t *testing.T, serial string) qemu.Disk {
	t.Helper()
	p := filepath.Join(t.TempDir(), serial+".img")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return qemu.Disk{Path: p, Interface: "nvme", Serial: serial}
}

// The image boots to the BERTH-REPORT line with every early mount present,
// on the erofs root, and the NIC's and the disk's drivers were loaded because
// the devices are there (modalias), not because the image preloads them.
// The root is root.erofs on the read-only virtio disk ImageConfig attaches
// (the initramfs no longer carries it), behind dm-verity with the manifest's
// parameters; TestRootDisk boots without that disk.
func TestBootReport(t *testing.T) {
	dir := qemu.ImageDir(t)
	man := qemu.ImageManifest(t, dir)
	if r := man.Root; r == nil || r.Serial == "" || r.Path != "" {
		t.Fatalf("the test image's manifest names no root disk (root %+v): rebuild it with make image-test", r)
	}
	for _, m := range []string{"virtio_net", "nvme"} {
		if slices.Contains(man.Preload, m) {
			t.Fatalf("image manifest preloads %s: the test could not tell modalias loading from preloading", m)
		}
		if !slices.Contains(man.Modules, m) {
			t.Fatalf("image manifest does not ship %s", m)
		}
	}
	cfg := qemu.ImageConfig(dir, "")
	cfg.Shell = true
	cfg.Timeout = vmTimeout
	cfg.NICs = []qemu.NIC{{}}
	cfg.Disks = []qemu.Disk{nvmeDisk(t, "berth-nvme-0")}
	vm := qemu.Start(t, cfg)

	rep, err := vm.Report(bootTimeout)
	if err != nil {
		t.Fatal(err)
	}
	reportAt := vm.Uptime()
	if !reportOK(rep) {
		t.Fatalf("boot report is not OK: %v", rep)
	}
	mods := reportModules(t, rep)
	for _, want := range []string{"virtio_net", "nvme"} {
		if !slices.Contains(mods, want) {
			t.Errorf("report's loaded modules lack %s (a device needing it is attached): %v", want, mods)
		}
	}
	// The root disk is the guest's only virtio-blk device (the other disk
	// is NVMe, the shell port a serial or virtio console), so it is
	// /dev/vda on both arches.
	var rootSec struct {
		Image, FSType string
		Verity        struct{ Partition, Device, RootHash string }
	}
	section(t, rep, "root", &rootSec)
	if rootSec.FSType != "erofs" || rootSec.Verity.Partition != "/dev/vda" || rootSec.Image != rootSec.Verity.Device || !strings.HasPrefix(rootSec.Image, "/dev/dm-") {
		t.Errorf("report's root %+v; want erofs on a dm-verity device over /dev/vda", rootSec)
	}

	out, err := vm.Shell("cat /proc/mounts", shellTimeout)
	if err != nil {
		t.Fatal(err)
	}
	ms := parseMounts(out)
	root, ok := lastMount(ms, "/")
	if !ok || root.fstype != "erofs" || root.source != rootSec.Image || !slices.Contains(strings.Split(root.opts, ","), "ro") {
		t.Errorf("root is %+v, want erofs mounted ro from the report's %s; /proc/mounts:\n%s", root, rootSec.Image, out)
	}
	if out, err := vm.Shell("cat /sys/block/vda/ro /sys/block/vda/serial; ls /root.erofs 2>&1; true", shellTimeout); err != nil {
		t.Error(err)
	} else if !strings.Contains(out, "1\n"+man.Root.Serial) || !strings.Contains(out, "No such file") {
		t.Errorf("guest says:\n%s\nwant vda read-only (1) with serial %s, and no /root.erofs", out, man.Root.Serial)
	}
	want := map[string]string{
		"/proc": "proc", "/sys": "sysfs", "/dev": "devtmpfs", "/dev/pts": "devpts",
		"/dev/shm": "tmpfs", "/run": "tmpfs", "/tmp": "tmpfs", "/sys/fs/cgroup": "cgroup2",
	}
	for target, fstype := range want {
		m, ok := lastMount(ms, target)
		if !ok || m.fstype != fstype {
			t.Errorf("%s: got %+v, want a %s mount; /proc/mounts:\n%s", target, m, fstype, out)
		}
	}
	// The guest runs the manifest's architecture: the suite that boots the
	// arm64 image (make test-qemu-arm64) cannot pass on the amd64 one.
	machine := map[string]string{"": "x86_64", "amd64": "x86_64", "arm64": "aarch64"}[man.Arch]
	if got, err := vm.Shell("uname -m", shellTimeout); err != nil || strings.TrimSpace(got) != machine {
		t.Errorf("guest uname -m = %q (%v), want %s for the manifest's arch %q", got, err, machine, man.Arch)
	}
	figure(t, "image arch %s", machine)
	// The cgroup root must hand its controllers to children (kubelet needs them).
	ctl, err := vm.Shell("cat /sys/fs/cgroup/cgroup.subtree_control", shellTimeout)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"cpu", "memory", "pids"} {
		if !slices.Contains(strings.Fields(ctl), c) {
			t.Errorf("cgroup.subtree_control = %q, lacks %s", ctl, c)
		}
	}
	// The initramfs carries the early modules only; every module is on the
	// root, which /lib/modules is after the switch, and the initramfs's
	// copies were released (their RAM freed).
	if len(man.EarlyModules) == 0 || len(man.EarlyModules) >= len(man.Modules) {
		t.Errorf("manifest early modules %d of %d: the initramfs should carry a part", len(man.EarlyModules), len(man.Modules))
	}
	// Released beside the next phases; the report's root section, or
	// boot.json's when it comes after the report, records it.
	if m, err := vm.Expect(regexp.MustCompile(`root: initramfs copies released paths=/lib/modules bytes=(\d+)`), 30*time.Second); err != nil {
		t.Error(err)
	} else if n, _ := strconv.ParseInt(m[1], 10, 64); n <= 0 {
		t.Errorf("released %s bytes of initramfs modules, want their size", m[1])
	} else {
		figure(t, "initramfs modules released after the switch: %.1f MiB", float64(n)/(1<<20))
		if out, err := vm.Shell("cat /run/berth/boot.json", shellTimeout); err != nil || !strings.Contains(out, `"released":["/lib/modules"],"releasedBytes":`+m[1]) {
			t.Errorf("boot.json's root section does not record the release (%v):\n%.2000s", err, out)
		}
	}
	late := ""
	for _, m := range man.Modules {
		if !slices.Contains(man.EarlyModules, m) && m == "xt_statistic" {
			late = m
		}
	}
	if late == "" {
		t.Errorf("xt_statistic is not a root-only module of this image")
	} else if out, err := vm.Shell("grep -c . /lib/modules/$(uname -r)/modules.dep; grep -q "+late+".ko /lib/modules/$(uname -r)/modules.dep && echo root-index; grep -q ' /lib/modules ' /proc/mounts && echo carried; true", shellTimeout); err != nil {
		t.Error(err)
	} else if !strings.Contains(out, "root-index") || strings.Contains(out, "carried") {
		t.Errorf("/lib/modules after the switch: %q; want the root's own (listing %s), not a bind from the initramfs", out, late)
	}
	boot, err := vm.Shell("cat /run/berth/boot.json", shellTimeout)
	if err != nil {
		t.Errorf("report not written to /run/berth/boot.json: %v", err)
	} else if !strings.Contains(boot, `"`) {
		t.Errorf("/run/berth/boot.json is not JSON: %q", boot)
	}

	// Figures for the note.
	if first, ms, ok := firstBerthLine(vm); ok {
		figure(t, "kernel start to berth's first line: %d ms guest boot clock (%.1f s after QEMU started)", ms, first.At.Seconds())
	} else {
		t.Errorf("no berth log line in the format [  1234ms] phase: message")
	}
	endMs, ok1 := field(rep, "endMs")
	initMs, ok2 := field(rep, "kernelToInitMs")
	if e, ok := endMs.(float64); ok && ok1 && ok2 {
		i, _ := initMs.(float64)
		figure(t, "berth start to report: %.0f ms guest clock (report endMs %.0f); QEMU start to report: %.1f s wall", e-i, e, reportAt.Seconds())
	} else {
		figure(t, "QEMU start to report: %.1f s wall", reportAt.Seconds())
	}
	if v, ok := field(rep, "rssKiB"); ok {
		figure(t, "berth RSS at report: %v KiB", v)
	}
	for _, f := range []string{"initramfs.img", "root.erofs"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err == nil {
			figure(t, "%s: %d bytes (%.1f MiB)", f, st.Size(), float64(st.Size())/(1<<20))
		}
	}
}

// QMP system_powerdown presses the ACPI power button: berth shuts down in
// order and powers off, and QEMU exits by itself within 30 s.
func TestPowerDown(t *testing.T) {
	dir := qemu.ImageDir(t)
	cfg := qemu.ImageConfig(dir, "")
	cfg.Timeout = vmTimeout
	vm := qemu.Start(t, cfg)
	if _, err := vm.Report(bootTimeout); err != nil {
		t.Fatal(err)
	}
	pressed := time.Now()
	if err := vm.PowerDown(); err != nil {
		t.Fatal(err)
	}
	if err := vm.WaitExit(30 * time.Second); err != nil {
		t.Fatalf("after system_powerdown: %v", err)
	}
	figure(t, "system_powerdown to QEMU exit: %.1f s", time.Since(pressed).Seconds())
	// berth logged its shutdown steps, and the kernel powered off (not a
	// panic, not a reboot: -no-reboot would also exit QEMU on those).
	if _, err := vm.Expect(regexp.MustCompile(`^\[\s*\d+ms\] shutdown: `), time.Second); err != nil {
		t.Errorf("no shutdown phase lines from berth: %v", err)
	}
	if _, err := vm.Expect(regexp.MustCompile(`reboot: Power down`), time.Second); err != nil {
		t.Errorf("the kernel did not power off: %v", err)
	}
	if _, err := vm.Expect(regexp.MustCompile(`Kernel panic`), 0); err == nil {
		t.Errorf("kernel panicked during shutdown")
	}
}

// A berth.exec hook (orphaner) leaves grandchildren behind and exits 7:
// berth reports the hook's own status right and reaps the orphans, leaving
// no zombie.
func TestReapOrphans(t *testing.T) {
	dir := qemu.ImageDir(t)
	cfg := qemu.ImageConfig(dir, `berth.exec="/usr/bin/orphaner -code 7 -orphans 3 -linger 3s"`)
	cfg.Shell = true
	cfg.Timeout = vmTimeout
	vm := qemu.Start(t, cfg)
	if _, err := vm.Report(bootTimeout); err != nil {
		t.Fatal(err)
	}
	if _, err := vm.Expect(regexp.MustCompile(`hook exited.*\bcode=7\b`), 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, l := range vm.Lines() {
		if m := regexp.MustCompile(`orphaner: left grandchild pid (\d+)`).FindStringSubmatch(l.Text); m != nil {
			pids = append(pids, m[1])
		}
	}
	if len(pids) != 3 {
		t.Fatalf("want 3 grandchildren announced on the console, got %v", pids)
	}
	// Each grandchild lingers 3 s and then exits; once reaped, /proc/<pid>
	// is gone (a zombie keeps it, with State: Z).
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := vm.Shell("for p in "+strings.Join(pids, " ")+"; do [ -e /proc/$p ] && grep -H '^State:' /proc/$p/status; done; true", shellTimeout)
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(out) == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("orphans not reaped a minute after they exited:\n%s", out)
		}
		time.Sleep(2 * time.Second)
	}
	out, err := vm.Shell("grep -H '^State:' /proc/[0-9]*/status 2>/dev/null; true", shellTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "/proc/1/status:State:") {
		t.Fatalf("process list looks wrong (no PID 1):\n%s", out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "State:\tZ") || strings.Contains(l, "State: Z") {
			t.Errorf("zombie left: %s", l)
		}
	}
}

// A fatal boot error (the root image is missing) is printed naming what
// failed, then berth.onfail=halt halts the machine: no OK report, no reboot.
func TestFatalErrorHalts(t *testing.T) {
	dir := qemu.ImageDir(t)
	cfg := qemu.ImageConfig(dir, "berth.root=/missing.erofs berth.onfail=halt")
	cfg.Timeout = vmTimeout
	vm := qemu.Start(t, cfg)
	if _, err := vm.Expect(regexp.MustCompile(`FATAL.*missing\.erofs`), bootTimeout); err != nil {
		t.Fatal(err)
	}
	if _, err := vm.Expect(regexp.MustCompile(`^\[\s*\d+ms\] \S+: .*\b(policy|onfail)\b.*\bhalt`), time.Minute); err != nil {
		t.Errorf("no line naming the halt policy: %v", err)
	}
	if _, err := vm.Expect(regexp.MustCompile(`reboot: System halted`), time.Minute); err != nil {
		t.Errorf("the kernel did not halt: %v", err)
	}
	if rep, err := vm.Report(5 * time.Second); err == nil && reportOK(rep) {
		t.Errorf("report says OK after a fatal error: %v", rep)
	}
	// Halted, not rebooted: with -no-reboot a reboot (or panic) would end QEMU.
	time.Sleep(3 * time.Second)
	if vm.Exited() {
		t.Errorf("QEMU exited: the guest rebooted or powered off instead of halting")
	}
}
