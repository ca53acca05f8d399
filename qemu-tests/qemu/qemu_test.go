package qemu

import (
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/config/manifest"
)

// These tests cover the harness's own logic without booting anything.

func fakeVM(lines ...string) (*VM, *io.PipeWriter) {
	r, w := io.Pipe()
	vm := &VM{done: make(chan struct{}), stall: newStallWatch()}
	vm.console = newConsole(time.Now(), nil, vm.stall)
	go vm.console.feed(r)
	for _, l := range lines {
		io.WriteString(w, l+"\r\n")
	}
	return vm, w
}

func TestExpectOldAndNewLines(t *testing.T) {
	vm, w := fakeVM("[  12ms] early: berth starting", "noise")
	m, err := vm.Expect(regexp.MustCompile(`^\[\s*(\d+)ms\] early`), time.Second)
	if err != nil || m[1] != "12" {
		t.Fatalf("Expect on an old line: %v %v", m, err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		io.WriteString(w, "[  99ms] hooks: hook exited cmd=/x code=7 signal=0\n")
	}()
	m, err = vm.Expect(regexp.MustCompile(`hook exited.*\bcode=(\d+)`), 5*time.Second)
	if err != nil || m[1] != "7" {
		t.Fatalf("Expect on a later line: %v %v", m, err)
	}
	_, err = vm.Expect(regexp.MustCompile(`never`), 100*time.Millisecond)
	if !errors.Is(err, errTimeout) || !strings.Contains(err.Error(), "hook exited") {
		t.Fatalf("timeout error must wrap errTimeout and show the console tail: %v", err)
	}
	w.Close()
	_, err = vm.Expect(regexp.MustCompile(`never`), 5*time.Second)
	if !errors.Is(err, errClosed) {
		t.Fatalf("closed console: %v", err)
	}
	// The hard deadline passing after QEMU exited on its own adds a
	// harness line to the ended console (errClosed above says it ended):
	// kept, and waits still end.
	vm.console.add(harnessPrefix + "hard deadline 3m0s reached, killing QEMU")
	if l := vm.Lines(); len(l) == 0 || !strings.Contains(l[len(l)-1].Text, "hard deadline") {
		t.Fatalf("a line added after the console ended was not kept: %v", l)
	}
	if _, err := vm.Expect(regexp.MustCompile(`never`), 5*time.Second); !errors.Is(err, errClosed) {
		t.Fatalf("closed console after a late line: %v", err)
	}
}

// The lines are CI's of 2026-11-30 (TestStorageRAID0AndReboot): an RCU
// stall and a short soft lockup, which a starved host can cause and the
// guest outlive, leave the waits running; a CPU stuck for 104 s ends them
// all at once, each with an error that quotes the kernel.
func TestStalledGuestEndsWaits(t *testing.T) {
	rcu := "[   99.272629] rcu: INFO: rcu_preempt self-detected stall on CPU"
	vm, w := fakeVM(
		"[ 11861ms] services: service ready service=kubelet",
		rcu,
		"[   99.272629] rcu: \t1-...!: (1 GPs behind) idle=1dcc/1/0x4000000000000000 softirq=1488/1489 fqs=0",
		"[   44.530489] watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [containerd:162]",
	)
	defer w.Close()
	_, err := vm.Expect(regexp.MustCompile(`never`), 300*time.Millisecond)
	if !errors.Is(err, errTimeout) {
		t.Fatalf("a 22 s soft lockup must not end a wait: %v", err)
	}
	if err := vm.Stalled(); err != nil {
		t.Errorf("Stalled after a 22 s soft lockup: %v", err)
	}
	if got := vm.stall.earlier(); got != rcu {
		t.Errorf("earlier stall line = %q, want the RCU line", got)
	}
	io.WriteString(w, "[  124.530489] watchdog: BUG: soft lockup - CPU#0 stuck for 104s! [berth:292]\n")
	_, err = vm.Expect(regexp.MustCompile(`never`), time.Minute)
	if !errors.Is(err, ErrGuestStalled) {
		t.Fatalf("Expect after a 104 s soft lockup: %v", err)
	}
	for _, want := range []string{"stuck for 104s! [berth:292]", "after \"" + rcu, ErrGuestStalled.Error()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if vm.stall.earlier() != "" {
		t.Errorf("earlier() must be empty once a CPU counts as stuck: %q", vm.stall.earlier())
	}
	if err := vm.Stalled(); !errors.Is(err, ErrGuestStalled) {
		t.Errorf("Stalled: %v", err)
	}
	// A failed test's note names the hang for make test-qemu's rerun,
	// unless the test reset the machine (Reset) and went on.
	if n := vm.stallNote(); !strings.Contains(n, ErrGuestStalled.Error()) {
		t.Errorf("note before a reset lacks %q: %s", ErrGuestStalled, n)
	}
	vm.reset.Store(true)
	if n := vm.stallNote(); strings.Contains(n, ErrGuestStalled.Error()) || !strings.Contains(n, "reset from outside") || !strings.Contains(n, "stuck for 104s!") {
		t.Errorf("note after a reset: %s", n)
	}
	if _, err := vm.Report(time.Minute); !errors.Is(err, ErrGuestStalled) {
		t.Errorf("Report: %v", err)
	}
	if err := vm.WaitExit(time.Minute); !errors.Is(err, ErrGuestStalled) {
		t.Errorf("WaitExit: %v", err)
	}
	// A line that came before the stall is still found.
	if _, err := vm.Expect(regexp.MustCompile(`service ready`), time.Minute); err != nil {
		t.Errorf("Expect of a line already there: %v", err)
	}
	// The shell's buffer shares the watch but is not fed by it: a command
	// printing the kernel's words (dmesg) is not a stall.
	sh := newLineBuf(time.Now(), nil)
	sh.stall = newStallWatch()
	sh.add("[  124.530489] watchdog: BUG: soft lockup - CPU#0 stuck for 104s! [berth:292]")
	if err := sh.stall.err(); err != nil {
		t.Errorf("a shell line fed the watch: %v", err)
	}
}

// With softlockup_panic=1 (the image's command line; a trial boot until
// blessed) the kernel panics at the watchdog's first report, 20 s in: a
// hang all the same, which the waits end on (the boot that follows is a
// reboot's, not the test's subject).
func TestSoftLockupPanicIsAHang(t *testing.T) {
	s := newStallWatch()
	lockup := "[   32.734927] watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [init:98]"
	s.see(lockup)
	if err := s.err(); err != nil {
		t.Fatalf("a 22 s soft lockup alone: %v", err)
	}
	s.see("[   32.735001] Kernel panic - not syncing: softlockup: hung tasks")
	err := s.err()
	if !errors.Is(err, ErrGuestStalled) || !strings.Contains(err.Error(), "panicked on a soft lockup") || !strings.Contains(err.Error(), "stuck for 22s!") {
		t.Fatalf("softlockup panic: %v", err)
	}
	// Another panic (1.0.3's missing init in TestUpdate) is no hang.
	s = newStallWatch()
	s.see("[    3.1] Kernel panic - not syncing: No working init found.")
	if err := s.err(); err != nil {
		t.Errorf("a panic that is not a soft lockup's: %v", err)
	}
}

// A guest that prints nothing at all, not even a failing kernel's error,
// hung before berth's first line (TestJoinFailureSaysWhy here,
// 2026-11-30); QEMU's own lines and the harness's are not the guest's.
func TestSilentGuestHung(t *testing.T) {
	s := newStallWatch()
	s.see(stderrPrefix + "qemu-system-x86_64: warning: host doesn't support requested feature")
	s.see(harnessPrefix + "hard deadline 8m0s reached, killing QEMU")
	s.silent(silentFor)
	err := s.err()
	if !errors.Is(err, ErrGuestStalled) || !strings.Contains(err.Error(), "not one console line") {
		t.Fatalf("silent guest: %v", err)
	}
	select {
	case <-s.hitC():
	default:
		t.Error("waits are not woken")
	}
	s = newStallWatch()
	s.see("[ 2993ms] early: berth starting version=v1")
	s.silent(silentFor)
	if err := s.err(); err != nil {
		t.Errorf("a guest that spoke: %v", err)
	}
}

func TestReportSkipsBrokenCopies(t *testing.T) {
	vm, w := fakeVM(
		`[    5.1] berth: BERTH-REPORT {"version":"v1","ok":tr`, // a truncated kmsg copy
		`BERTH-REPORT {"version":"v1","ok":true,"modules":["nvme"]}`,
	)
	defer w.Close()
	rep, err := vm.Report(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if rep["ok"] != true || rep["version"] != "v1" {
		t.Errorf("report %v", rep)
	}
}

// A report line cut by a kernel line never decodes: the wait's error must
// say so, and where, rather than only that the deadline passed.
func TestReportNamesBrokenLines(t *testing.T) {
	vm, w := fakeVM(
		`BERTH-REPORT {"version":"v1","ok":tr[   41.200000] clocksource: timekeeping watchdog on CPU1: Marking clocksource 'tsc' as unstable`,
		`ue,"modules":["nvme"]}`,
	)
	defer w.Close()
	_, err := vm.Report(200 * time.Millisecond)
	if !errors.Is(err, errTimeout) {
		t.Fatalf("want a timeout, got %v", err)
	}
	for _, want := range []string{"did not decode", "no complete {json}", "Marking clocksource"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	vm2, w2 := fakeVM(`BERTH-REPORT {"version":"v1","ok":tr[ 1.2] x: y}`)
	defer w2.Close()
	_, err = vm2.Report(200 * time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "around offset") || !strings.Contains(err.Error(), `tr[ 1.2] x`) {
		t.Errorf("a syntax error must show the text around its offset: %v", err)
	}
}

func TestArgs(t *testing.T) {
	amd64, err := platformFor("")
	if err != nil {
		t.Fatal(err)
	}
	vm := &VM{dir: "/tmp/bqX", plat: amd64, cfg: Config{
		Kernel: "k", Initrd: "i", Append: "console=ttyS0", MemoryMB: 512, CPUs: 1, Shell: true,
		Disks: []Disk{{Path: "/d0.img", Serial: "s0"}, {Path: "/d1.img", Interface: "virtio"}, {Path: "/seed.iso", Interface: "cdrom"}},
		NICs:  []NIC{{HostFwd: []string{"tcp:127.0.0.1:10250-:10250"}, MAC: "52:54:00:12:34:56"}},
		Extra: []string{"-device", "virtio-rng-pci"},
	}}
	got := strings.Join(vm.args(), " ")
	for _, want := range []string{
		"-accel tcg -machine q35 -cpu max -m 512 -smp 1 -nodefaults -display none -no-reboot",
		"-kernel k -initrd i -append console=ttyS0",
		"-serial chardev:con0",
		"-qmp unix:/tmp/bqX/qmp.sock,server=on,wait=off",
		"-chardev socket,id=sh0,path=/tmp/bqX/sh.sock,server=on,wait=off -serial chardev:sh0",
		"-drive file=/d0.img,if=none,id=disk0,format=raw -device nvme,drive=disk0,serial=s0",
		"-device virtio-blk-pci,drive=disk1,serial=berth-disk-1",
		"-drive file=/seed.iso,if=none,id=disk2,format=raw,media=cdrom,readonly=on -device virtio-scsi-pci,id=scsi2 -device scsi-cd,drive=disk2,bus=scsi2.0,serial=berth-disk-2",
		"-netdev user,id=net0,hostfwd=tcp:127.0.0.1:10250-:10250 -device virtio-net-pci,netdev=net0,mac=52:54:00:12:34:56",
		"-device virtio-rng-pci",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("args lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "id=root") {
		t.Errorf("a root disk attached without RootDisk:\n%s", got)
	}
}

// A direct-kernel boot attaches the image's root disk read-only, with its
// serial, after the other disks and the NICs (their names and PCI
// addresses stay as they were); a UEFI boot, whose disk carries the root,
// does not.
func TestArgsRootDisk(t *testing.T) {
	for _, arch := range []string{"", "arm64"} {
		plat, err := platformFor(arch)
		if err != nil {
			t.Fatal(err)
		}
		vm := &VM{dir: "/tmp/bqX", plat: plat, cfg: Config{Arch: arch, Kernel: "k", Initrd: "i", Append: "console=ttyS0",
			Disks: []Disk{{Path: "/d0.img", Serial: "s0"}}, NICs: []NIC{{}}, Extra: []string{"-device", "virtio-rng-pci"},
			RootDisk: &Disk{Path: "/img/root.erofs", Serial: "berth-root"}}}
		got := strings.Join(vm.args(), " ")
		want := "-drive file=/img/root.erofs,if=none,id=root,format=raw,readonly=on -device virtio-blk-pci,drive=root,serial=berth-root"
		i, nvme, nic, extra := strings.Index(got, want), strings.Index(got, "-device nvme,drive=disk0"),
			strings.Index(got, "-device virtio-net-pci"), strings.Index(got, "-device virtio-rng-pci")
		if i < 0 || nvme < 0 || nic < 0 || nvme > i || nic > i || extra < i {
			t.Errorf("%s: want %q after the disks and NICs, before Extra:\n%s", plat.binary, want, got)
		}
		vm.cfg.UEFI = true
		if got := strings.Join(vm.args(), " "); strings.Contains(got, "root.erofs") {
			t.Errorf("%s: a UEFI boot attached the root disk:\n%s", plat.binary, got)
		}
	}
}

// An arm64 image boots on the virt machine, its shell on a virtio console
// (virt has one UART), its UEFI firmware AAVMF.
func TestArgsArm64(t *testing.T) {
	arm64, err := platformFor("arm64")
	if err != nil {
		t.Fatal(err)
	}
	vm := &VM{dir: "/tmp/bqX", plat: arm64, cfg: Config{Arch: "arm64", Kernel: "k", Initrd: "i", Append: "console=ttyAMA0",
		MemoryMB: 512, CPUs: 1, Shell: true, Disks: []Disk{{Path: "/d0.img", Serial: "s0"}}}}
	got := strings.Join(vm.args(), " ")
	for _, want := range []string{
		"-accel tcg -machine virt -cpu max -m 512 -smp 1",
		// The firmware loads the kernel, so that the guest has ACPI.
		"-drive if=pflash,format=raw,unit=0,readonly=on,file=" + AAVMFCode + " -drive if=pflash,format=raw,unit=1,file=/tmp/bqX/vars.fd -kernel k -initrd i -append console=ttyAMA0",
		"-chardev socket,id=sh0,path=/tmp/bqX/sh.sock,server=on,wait=off -device virtio-serial-pci,id=vser0 -device virtconsole,bus=vser0.0,chardev=sh0",
		"-device nvme,drive=disk0,serial=s0",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("args lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "q35") || strings.Contains(got, "-serial chardev:sh0") {
		t.Errorf("arm64 args carry amd64's machine or shell port:\n%s", got)
	}
	vm.cfg.UEFI = true
	if got := strings.Join(vm.args(), " "); !strings.Contains(got, "file="+AAVMFCode) || strings.Contains(got, "-kernel") {
		t.Errorf("arm64 UEFI disk boot: want AAVMF and no -kernel:\n%s", got)
	}
	if arm64.binary != "qemu-system-aarch64" || arm64.console != "ttyAMA0" || arm64.shellTTY != "hvc0" {
		t.Errorf("arm64 platform %+v", arm64)
	}
	if _, err := platformFor("riscv64"); err == nil {
		t.Error("platformFor(riscv64) = nil error")
	}
}

// A disk made from an arm64 image names virt's console and shell devices;
// amd64's command line is unchanged.
func TestArchCmdline(t *testing.T) {
	in := "console=ttyS0 quiet berth.debugshell=ttyS1 berth.imds=off"
	for arch, want := range map[string]string{
		"":      in,
		"amd64": in,
		"arm64": "console=ttyAMA0 quiet berth.debugshell=hvc0 berth.imds=off",
	} {
		if got, err := ArchCmdline(in, arch); err != nil || got != want {
			t.Errorf("ArchCmdline(%s) = %q, %v; want %q", arch, got, err, want)
		}
	}
	if _, err := ArchCmdline(in, "riscv64"); err == nil {
		t.Error("ArchCmdline(riscv64): no error")
	}
}

// A boot gets the image's kernel arguments before its own, and a word the
// boot sets by key wins over the image's.
func TestWithImageArgs(t *testing.T) {
	m := &manifest.Manifest{KernelArgs: []string{"cryptomgr.notests", "initcall_blacklist=crypto_kdf108_init"}}
	tests := []struct{ in, want string }{
		{"console=ttyS0 quiet", "cryptomgr.notests initcall_blacklist=crypto_kdf108_init console=ttyS0 quiet"},
		{"", "cryptomgr.notests initcall_blacklist=crypto_kdf108_init"},
		{"initcall_blacklist=other quiet", "cryptomgr.notests initcall_blacklist=other quiet"},
		{"cryptomgr.notests=0", "initcall_blacklist=crypto_kdf108_init cryptomgr.notests=0"},
	}
	for _, tt := range tests {
		if got := WithImageArgs(tt.in, m); got != tt.want {
			t.Errorf("WithImageArgs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := WithImageArgs("quiet", nil); got != "quiet" {
		t.Errorf("no manifest: %q", got)
	}
}
