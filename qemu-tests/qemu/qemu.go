// Package qemu boots a berth image under qemu-system-x86_64, or for an
// arm64 image qemu-system-aarch64's virt machine (TCG: there is no KVM here) for integration tests and `make demo`: it captures the serial console line by
// line, waits for lines with deadlines, parses the BERTH-REPORT line, talks
// QMP (system_powerdown), runs commands in the test image's debug shell on a
// second serial port, and kills QEMU at a hard deadline and at test cleanup.
// Every wait has a deadline, and a failed test gets the console tail.
package qemu

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-node/berth/config/manifest"
)

// Config describes one VM.
type Config struct {
	// Name tells apart the VMs of a test that boots several: each
	// console log is then <test name>.<Name>.console.log.
	Name           string
	Kernel, Initrd string
	// Append is the kernel command line; "console=ttyS0" is added when absent,
	// and "berth.debugshell=ttyS1" when Shell is set (ttyAMA0 and hvc0 on
	// arm64).
	Append string
	// Arch is the image's architecture (its manifest's arch; ImageConfig
	// sets it): amd64 when empty, or arm64.
	Arch string
	// MemoryMB defaults to 1024, CPUs to 2.
	MemoryMB, CPUs int
	Disks          []Disk
	NICs           []NIC
	// Shell attaches a second serial port (ttyS1) for Shell.
	Shell bool
	// Timeout is the hard deadline after which QEMU is killed (default 5 min).
	Timeout time.Duration
	// Extra arguments for QEMU.
	Extra []string
	// UEFI boots the first disk through OVMF (Debian's ovmf) the way EC2
	// boots an AMI, instead of -kernel/-initrd: Kernel, Initrd and Append
	// are unused, the command line is the disk's UKI's.
	UEFI bool
	// SecureBoot (with UEFI) boots through firmware that enforces UEFI
	// Secure Boot once keys are enrolled: on amd64 OVMF's 4 MiB secboot
	// build on q35 with SMM, which keeps the variable store out of the
	// guest's reach, as on EC2; on arm64 AAVMF. The VM starts from a
	// copy of Vars, or of the firmware's empty store (setup mode: no
	// keys, nothing verified, systemd-boot may enroll the ESP's) when
	// Vars is empty; SaveVars keeps it, with what was enrolled.
	SecureBoot bool
	Vars       string
	// RootDisk is the image's root disk (root.erofs) on a direct-kernel
	// boot: attached read-only as a virtio disk with its Serial, after
	// the Disks and NICs so that their device names and PCI addresses
	// stay as they were. ImageConfig sets it when the image's manifest
	// names one. Unused with UEFI (the disk image carries its root).
	RootDisk *Disk
}

// OVMF firmware files (Debian's ovmf package); each VM gets its own copy
// of the variable store.
const (
	OVMFCode = "/usr/share/OVMF/OVMF_CODE.fd"
	OVMFVars = "/usr/share/OVMF/OVMF_VARS.fd"
)

// Disk is a raw disk image file attached to the guest.
type Disk struct {
	Path string
	// Interface is "nvme" (default), "virtio" (virtio-blk) or "cdrom"
	// (a read-only SCSI CD drive on its own virtio-scsi controller, as
	// virt-install and Proxmox attach a NoCloud seed's ISO).
	Interface string
	Serial    string
}

// NIC is a network card: by default on QEMU's user network (slirp),
// where the guest is 10.0.2.15, the host 10.0.2.2, DNS 10.0.2.3; with
// Stream, on a shared virtual network (package vnet).
type NIC struct {
	// Model is the QEMU device, "virtio-net-pci" by default.
	Model string
	MAC   string
	// Stream is the unix socket of a vnet switch to join (-netdev
	// stream); HostFwd and GuestFwd are then unused.
	Stream string
	// HostFwd are slirp hostfwd rules, e.g. "tcp:127.0.0.1:10250-:10250".
	HostFwd []string
	// GuestFwd are slirp guestfwd rules, e.g. "tcp:10.0.2.100:80-cmd:...".
	GuestFwd []string
}

// Line is one console line and when it arrived (since QEMU started).
type Line struct {
	At   time.Duration
	Text string
}

// VM is a running QEMU.
type VM struct {
	cfg     Config
	plat    platform
	dir     string
	cmd     *exec.Cmd
	start   time.Time
	done    chan struct{}
	exitErr error
	hard    *time.Timer

	closeOnce sync.Once
	closeErr  error
	// reset is set by Reset: the test went on with another boot, so a
	// later failure is not the hang's.
	reset atomic.Bool

	console *lineBuf
	// stall is what the console said about CPUs stuck in the guest
	// kernel; the console's and the shell's waits end on it.
	stall   *stallWatch
	shellMu sync.Mutex
	shell   net.Conn
	shBuf   *lineBuf
	shSeq   int
}

// lineBuf collects lines and wakes waiters when one arrives or input ends.
type lineBuf struct {
	mu      sync.Mutex
	lines   []Line
	changed chan struct{}
	closed  bool
	start   time.Time
	sink    io.Writer // optional copy of every line
	// stall ends waits once the guest kernel has a CPU stuck; the buffer
	// with watches set (the console) is the one whose lines feed it.
	stall   *stallWatch
	watches bool
}

func newLineBuf(start time.Time, sink io.Writer) *lineBuf {
	return &lineBuf{changed: make(chan struct{}), start: start, sink: sink}
}

// newConsole is the buffer of the guest's console, whose lines feed s.
func newConsole(start time.Time, sink io.Writer, s *stallWatch) *lineBuf {
	b := newLineBuf(start, sink)
	b.stall, b.watches = s, true
	return b
}

func (b *lineBuf) add(text string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	text = strings.TrimRight(text, "\r")
	b.lines = append(b.lines, Line{At: time.Since(b.start), Text: text})
	if b.watches {
		b.stall.see(text)
	}
	if b.sink != nil {
		fmt.Fprintf(b.sink, "%9.3f %s\n", time.Since(b.start).Seconds(), text)
	}
	// A line the harness adds after QEMU's output ended (its hard
	// deadline passing on a VM that exited without Close) is kept; the
	// waiters were woken for good by close.
	if !b.closed {
		close(b.changed)
		b.changed = make(chan struct{})
	}
}

func (b *lineBuf) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		close(b.changed)
	}
}

// feed reads r until EOF, splitting lines on '\n'.
func (b *lineBuf) feed(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		s, err := br.ReadString('\n')
		if s != "" {
			if strings.HasSuffix(s, "\n") {
				b.add(strings.TrimSuffix(s, "\n"))
			} else if err != nil {
				b.add(s)
			}
		}
		if err != nil {
			b.close()
			return
		}
	}
}

// snapshot returns lines[from:], the wake channel and whether input ended.
func (b *lineBuf) snapshot(from int) ([]Line, <-chan struct{}, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if from > len(b.lines) {
		from = len(b.lines)
	}
	return append([]Line(nil), b.lines[from:]...), b.changed, b.closed
}

// wait calls match on each line from index from on (old and new) until it
// returns true, input ends, the guest kernel has a CPU stuck (an error
// wrapping ErrGuestStalled), or the deadline passes. It returns the index
// of the matching line.
func (b *lineBuf) wait(from int, deadline time.Time, match func(Line) bool) (int, error) {
	i := from
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		lines, changed, closed := b.snapshot(i)
		for j, l := range lines {
			if match(l) {
				return i + j, nil
			}
		}
		i += len(lines)
		if err := b.stall.err(); err != nil {
			return -1, err
		}
		if closed {
			return -1, errClosed
		}
		select {
		case <-changed:
		case <-b.stall.hitC():
		case <-timer.C:
			return -1, errTimeout
		}
	}
}

func (b *lineBuf) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	start := len(b.lines) - n
	if start < 0 {
		start = 0
	}
	var sb strings.Builder
	for _, l := range b.lines[start:] {
		fmt.Fprintf(&sb, "%8.3fs | %s\n", l.At.Seconds(), l.Text)
	}
	return sb.String()
}

// The console lines the harness adds itself, told apart from the guest's.
const (
	harnessPrefix = "qemu-harness: "
	stderrPrefix  = "qemu-stderr: "
)

var (
	errClosed  = errors.New("QEMU exited (console closed)")
	errTimeout = errors.New("deadline passed")
)

// BootOptions are what a program (rather than a test) gives Boot.
type BootOptions struct {
	// Logf receives the harness's own messages (QEMU's pid and command
	// line); nil discards them.
	Logf func(format string, args ...any)
	// ConsoleLog, when set, gets the QEMU command line as a "# " comment and
	// then a copy of every console line with its arrival time in seconds
	// since QEMU started. Boot does not close it.
	ConsoleLog io.Writer
}

// Start boots a VM and registers its cleanup with t: QEMU is killed when the
// test ends (or at cfg.Timeout, whichever is first), and when the test has
// failed the console tail is logged. With $BERTH_QEMU_LOGDIR set, the
// console is also copied to <dir>/<test name>[.<cfg.Name>].console.log. A config with
// no Arch (a disk made from the test image, booted by UEFI) runs on the
// test image's architecture.
func Start(t testing.TB, cfg Config) *VM {
	t.Helper()
	if cfg.Arch == "" {
		m, _ := manifest.Load(filepath.Join(ImageDir(t), "manifest.json"))
		cfg.Arch = imageArch(m)
	}
	var sink io.Writer
	if logDir := os.Getenv("BERTH_QEMU_LOGDIR"); logDir != "" {
		if err := os.MkdirAll(logDir, 0o755); err == nil {
			name := t.Name()
			if cfg.Name != "" {
				name += "." + cfg.Name
			}
			name = strings.NewReplacer("/", "_", " ", "_").Replace(name)
			if f, err := os.Create(filepath.Join(logDir, name+".console.log")); err == nil {
				sink = f
				t.Cleanup(func() { f.Close() })
			}
		}
	}
	vm, err := Boot(context.Background(), cfg, BootOptions{Logf: t.Logf, ConsoleLog: sink})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := vm.Close(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("qemu: console tail:\n%s", vm.ConsoleTail(80))
			if note := vm.stallNote(); note != "" {
				t.Logf("qemu: %s", note)
			}
		}
	})
	return vm
}

// Boot starts QEMU for cfg and returns once it runs; the console is read in
// the background. QEMU is killed at cfg.Timeout, when ctx ends, or by Close,
// whichever comes first. The caller must call Close.
func Boot(ctx context.Context, cfg Config, opts BootOptions) (*VM, error) {
	if cfg.MemoryMB == 0 {
		cfg.MemoryMB = 1024
	}
	if cfg.CPUs == 0 {
		cfg.CPUs = 2
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Minute
	}
	plat, err := platformFor(cfg.Arch)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(cfg.Append, "console=") {
		cfg.Append = strings.TrimSpace("console=" + plat.console + " " + cfg.Append)
	}
	if cfg.Shell && !strings.Contains(cfg.Append, "berth.debugshell=") {
		cfg.Append += " berth.debugshell=" + plat.shellTTY
	}
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	need := []string{cfg.Kernel, cfg.Initrd}
	if cfg.RootDisk != nil {
		need = append(need, cfg.RootDisk.Path)
	}
	if plat.kernelViaUEFI {
		need = append(need, plat.fwCode, plat.fwVars)
	}
	if cfg.SecureBoot {
		if !cfg.UEFI {
			return nil, fmt.Errorf("qemu: Secure Boot needs a UEFI boot")
		}
		plat = plat.secure()
		if cfg.Vars != "" {
			plat.fwVars = cfg.Vars
		}
	}
	if cfg.UEFI {
		need = []string{plat.fwCode, plat.fwVars}
		if len(cfg.Disks) == 0 {
			return nil, fmt.Errorf("qemu: a UEFI boot needs a disk to boot from")
		}
	}
	for _, f := range need {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("qemu: %w (build the test image first: make image-test; UEFI needs the %s package)", err, plat.fwPackage)
		}
	}
	// Unix socket paths must stay under 108 bytes; t.TempDir() can be long.
	dir, err := os.MkdirTemp("", "bq")
	if err != nil {
		return nil, fmt.Errorf("qemu: %w", err)
	}
	if cfg.UEFI || plat.kernelViaUEFI {
		vars, err := os.ReadFile(plat.fwVars)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "vars.fd"), vars, 0o644)
		}
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("qemu: copying the UEFI variable store %s: %w", plat.fwVars, err)
		}
	}
	vm := &VM{cfg: cfg, plat: plat, dir: dir, done: make(chan struct{})}
	args := vm.args()
	vm.cmd = exec.Command(plat.binary, args...)
	stdout, err := vm.cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("qemu: %w", err)
	}
	stderr, err := vm.cmd.StderrPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("qemu: %w", err)
	}
	if opts.ConsoleLog != nil {
		fmt.Fprintf(opts.ConsoleLog, "# %s %s\n", plat.binary, strings.Join(args, " "))
	}
	vm.start = time.Now()
	vm.stall = newStallWatch()
	vm.console = newConsole(vm.start, opts.ConsoleLog, vm.stall)
	if err := vm.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("qemu: starting %s: %w", plat.binary, err)
	}
	logf("qemu: pid %d: %s %s", vm.cmd.Process.Pid, plat.binary, strings.Join(args, " "))
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); vm.console.feed(stdout) }()
	go func() {
		defer readers.Done()
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			vm.console.add(stderrPrefix + sc.Text())
		}
	}()
	stopSilent := func() bool { return false }
	if plat.silentFor > 0 {
		stopSilent = time.AfterFunc(plat.silentFor, func() { vm.stall.silent(plat.silentFor) }).Stop
	}
	go func() {
		readers.Wait() // the pipes must be drained before Wait closes them
		vm.exitErr = vm.cmd.Wait()
		stopSilent() // a QEMU that exited says so itself
		close(vm.done)
	}()
	vm.hard = time.AfterFunc(cfg.Timeout, func() {
		vm.console.add(fmt.Sprintf(harnessPrefix+"hard deadline %s reached, killing QEMU", cfg.Timeout))
		vm.kill()
	})
	go func() {
		select {
		case <-ctx.Done():
			vm.console.add(fmt.Sprintf(harnessPrefix+"%v, killing QEMU", context.Cause(ctx)))
			vm.kill()
		case <-vm.done:
		}
	}()
	return vm, nil
}

// Close kills QEMU if it still runs, waits (bounded) for it to exit and
// removes its sockets. It is safe to call more than once; the error says
// QEMU outlived SIGKILL.
func (vm *VM) Close() error {
	vm.closeOnce.Do(func() {
		vm.hard.Stop()
		vm.kill()
		select {
		case <-vm.done:
		case <-time.After(10 * time.Second):
			vm.closeErr = fmt.Errorf("qemu: pid %d did not exit 10 s after SIGKILL", vm.cmd.Process.Pid)
		}
		vm.shellMu.Lock()
		if vm.shell != nil {
			vm.shell.Close()
		}
		vm.shellMu.Unlock()
		os.RemoveAll(vm.dir)
	})
	return vm.closeErr
}

// SaveVars copies the VM's UEFI variable store to dst, for a later VM's
// Config.Vars: after systemd-boot enrolled the ESP's keys, the store has
// them. Call it once QEMU has exited (WaitExit), before Close.
func (vm *VM) SaveVars(dst string) error {
	select {
	case <-vm.done:
	default:
		return fmt.Errorf("qemu: saving the UEFI variable store while QEMU runs")
	}
	b, err := os.ReadFile(filepath.Join(vm.dir, "vars.fd"))
	if err != nil {
		return fmt.Errorf("qemu: saving the UEFI variable store: %w", err)
	}
	return os.WriteFile(dst, b, 0o644)
}

func (vm *VM) args() []string {
	c := vm.cfg
	a := append([]string{"-accel", "tcg"}, vm.plat.machine...)
	a = append(a, "-cpu", "max",
		"-m", fmt.Sprint(c.MemoryMB), "-smp", fmt.Sprint(c.CPUs),
		"-nodefaults", "-display", "none", "-no-reboot",
	)
	if c.UEFI || vm.plat.kernelViaUEFI {
		a = append(a, "-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+vm.plat.fwCode,
			"-drive", "if=pflash,format=raw,unit=1,file="+filepath.Join(vm.dir, "vars.fd"))
	}
	if !c.UEFI {
		a = append(a, "-kernel", c.Kernel, "-initrd", c.Initrd, "-append", c.Append)
	}
	a = append(a,
		"-chardev", "stdio,id=con0,signal=off", "-serial", "chardev:con0",
		"-qmp", "unix:"+vm.qmpPath()+",server=on,wait=off",
	)
	if c.Shell {
		a = append(a, "-chardev", "socket,id=sh0,path="+vm.shellPath()+",server=on,wait=off")
		a = append(a, vm.plat.shellArgs...)
	}
	for i, d := range c.Disks {
		id := fmt.Sprintf("disk%d", i)
		serial := d.Serial
		if serial == "" {
			serial = fmt.Sprintf("berth-disk-%d", i)
		}
		if d.Interface == "cdrom" {
			a = append(a, "-drive", fmt.Sprintf("file=%s,if=none,id=%s,format=raw,media=cdrom,readonly=on", d.Path, id),
				"-device", fmt.Sprintf("virtio-scsi-pci,id=scsi%d", i),
				"-device", fmt.Sprintf("scsi-cd,drive=%s,bus=scsi%d.0,serial=%s", id, i, serial))
			continue
		}
		a = append(a, "-drive", fmt.Sprintf("file=%s,if=none,id=%s,format=raw", d.Path, id))
		switch d.Interface {
		case "virtio":
			a = append(a, "-device", fmt.Sprintf("virtio-blk-pci,drive=%s,serial=%s", id, serial))
		default:
			a = append(a, "-device", fmt.Sprintf("nvme,drive=%s,serial=%s", id, serial))
		}
	}
	for i, n := range c.NICs {
		id := fmt.Sprintf("net%d", i)
		nd := "user,id=" + id
		for _, h := range n.HostFwd {
			nd += ",hostfwd=" + h
		}
		for _, g := range n.GuestFwd {
			nd += ",guestfwd=" + g
		}
		if n.Stream != "" {
			nd = "stream,id=" + id + ",server=off,addr.type=unix,addr.path=" + n.Stream
		}
		model := n.Model
		if model == "" {
			model = "virtio-net-pci"
		}
		dev := model + ",netdev=" + id
		if n.MAC != "" {
			dev += ",mac=" + n.MAC
		}
		a = append(a, "-netdev", nd, "-device", dev)
	}
	if r := c.RootDisk; r != nil && !c.UEFI {
		a = append(a, "-drive", fmt.Sprintf("file=%s,if=none,id=root,format=raw,readonly=on", r.Path),
			"-device", fmt.Sprintf("virtio-blk-pci,drive=root,serial=%s", r.Serial))
	}
	return append(a, c.Extra...)
}

func (vm *VM) qmpPath() string   { return filepath.Join(vm.dir, "qmp.sock") }
func (vm *VM) shellPath() string { return filepath.Join(vm.dir, "sh.sock") }

func (vm *VM) kill() {
	if vm.cmd.Process != nil {
		_ = vm.cmd.Process.Kill()
	}
}

// Uptime is how long QEMU has run.
func (vm *VM) Uptime() time.Duration { return time.Since(vm.start) }

// Pid is QEMU's process ID, for reading its resource use from /proc.
func (vm *VM) Pid() int { return vm.cmd.Process.Pid }

// Lines returns every console line so far.
func (vm *VM) Lines() []Line {
	l, _, _ := vm.console.snapshot(0)
	return l
}

// ConsoleTail returns the last n console lines, each with its arrival time.
func (vm *VM) ConsoleTail(n int) string { return vm.console.tail(n) }

// Expect waits until a console line (any line since boot, not only new
// ones) matches re, and returns its submatches.
func (vm *VM) Expect(re *regexp.Regexp, timeout time.Duration) ([]string, error) {
	var m []string
	_, err := vm.console.wait(0, time.Now().Add(timeout), func(l Line) bool {
		m = re.FindStringSubmatch(l.Text)
		return m != nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting %s for a console line matching %q: %w\nconsole tail:\n%s", timeout, re, err, vm.ConsoleTail(25))
	}
	return m, nil
}

// ExpectLine is Expect returning the whole Line.
func (vm *VM) ExpectLine(re *regexp.Regexp, timeout time.Duration) (Line, error) {
	var got Line
	_, err := vm.console.wait(0, time.Now().Add(timeout), func(l Line) bool {
		if re.MatchString(l.Text) {
			got = l
			return true
		}
		return false
	})
	if err != nil {
		return Line{}, fmt.Errorf("waiting %s for a console line matching %q: %w\nconsole tail:\n%s", timeout, re, err, vm.ConsoleTail(25))
	}
	return got, nil
}

var reportRE = regexp.MustCompile(`BERTH-REPORT (\{.*\})\s*$`)

// Report waits for the first `BERTH-REPORT {json}` line whose JSON decodes
// (a copy through /dev/kmsg may be truncated) and returns the object.
func (vm *VM) Report(timeout time.Duration) (map[string]any, error) {
	var rep map[string]any
	// A report line that came but did not decode (a kernel line cut into
	// it, say) would make the wait run out as a node that never reported
	// does, and the console tail alone hides which (the line is kilobytes
	// long).
	var broken []string
	_, err := vm.console.wait(0, time.Now().Add(timeout), func(l Line) bool {
		i := strings.Index(l.Text, "BERTH-REPORT ")
		if i < 0 {
			return false
		}
		m := reportRE.FindStringSubmatch(l.Text)
		if m == nil {
			broken = append(broken, fmt.Sprintf("at %.1fs: %d bytes, no complete {json} after the prefix; ends %q", l.At.Seconds(), len(l.Text)-i, lastBytes(l.Text, 120)))
			return false
		}
		rep = nil
		jerr := json.Unmarshal([]byte(m[1]), &rep)
		if jerr != nil {
			broken = append(broken, fmt.Sprintf("at %.1fs: %d bytes: %v", l.At.Seconds(), len(m[1]), describeJSONError(m[1], jerr)))
		}
		return jerr == nil
	})
	if err != nil {
		why := ""
		if len(broken) > 0 {
			why = "\nBERTH-REPORT lines that did not decode:\n  " + strings.Join(broken, "\n  ")
		}
		return nil, fmt.Errorf("waiting %s for the BERTH-REPORT line: %w%s\nconsole tail:\n%s", timeout, err, why, vm.ConsoleTail(25))
	}
	return rep, nil
}

// describeJSONError adds to a JSON syntax error the text around its
// offset, where a kernel line cutting into the report would show.
func describeJSONError(doc string, err error) string {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return err.Error()
	}
	lo, hi := max(0, int(se.Offset)-80), min(len(doc), int(se.Offset)+80)
	return fmt.Sprintf("%v; around offset %d: %q", err, se.Offset, doc[lo:hi])
}

func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// WaitExit waits for QEMU to exit by itself and returns nil if it exited
// with status 0.
func (vm *VM) WaitExit(timeout time.Duration) error {
	exited := func() error {
		if vm.exitErr != nil {
			return fmt.Errorf("qemu exited: %w", vm.exitErr)
		}
		return nil
	}
	select {
	case <-vm.done:
		return exited()
	case <-vm.stall.hitC():
		if vm.Exited() {
			return exited()
		}
		return fmt.Errorf("qemu still running, and will not stop by itself: %w\nconsole tail:\n%s", vm.stall.err(), vm.ConsoleTail(25))
	case <-time.After(timeout):
		return fmt.Errorf("qemu still running %s later\nconsole tail:\n%s", timeout, vm.ConsoleTail(25))
	}
}

// stallNote is what a failed test's output says of the guest's stalls.
// Whichever wait failed, it names a stuck guest kernel (make test-qemu's
// rerun looks for ErrGuestStalled's words), unless the test reset the
// machine and went on: then the failure is not the hang's, and the note
// leaves those words out.
func (vm *VM) stallNote() string {
	if why := vm.stall.reason(); why != "" && vm.reset.Load() {
		return fmt.Sprintf("this machine was reset from outside after its kernel stopped (%s), and the test went on", why)
	}
	if err := vm.stall.err(); err != nil {
		return err.Error()
	}
	if l := vm.stall.earlier(); l != "" {
		return fmt.Sprintf("the guest kernel reported a stall that had not (yet) lasted %s: %q", hardStall, l)
	}
	return ""
}

// Stalled is nil until the guest kernel has hung; then ErrGuestStalled,
// saying what showed it.
func (vm *VM) Stalled() error { return vm.stall.err() }

// Reset ends a VM whose guest hung, as a reset from outside would (EC2's
// reboot action on a failed status check, a hypervisor's watchdog): QEMU
// is killed, and the caller boots the machine again from its disk. A
// failed test's output then says the machine was reset rather than
// ErrGuestStalled, since the test did not end on the hang.
func (vm *VM) Reset() error {
	vm.reset.Store(true)
	return vm.Close()
}

// Exited reports whether QEMU has exited.
func (vm *VM) Exited() bool {
	select {
	case <-vm.done:
		return true
	default:
		return false
	}
}

// QMP runs one QMP command (e.g. "system_powerdown") and returns its "return".
func (vm *VM) QMP(command string, args map[string]any) (json.RawMessage, error) {
	conn, err := dialRetry(vm.qmpPath(), 10*time.Second)
	if err != nil {
		return nil, fmt.Errorf("connecting to QMP: %w", err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(15 * time.Second)); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(conn)
	var greeting map[string]any
	if err := dec.Decode(&greeting); err != nil {
		return nil, fmt.Errorf("reading QMP greeting: %w", err)
	}
	call := func(cmd string, a map[string]any) (json.RawMessage, error) {
		req := map[string]any{"execute": cmd}
		if a != nil {
			req["arguments"] = a
		}
		if err := json.NewEncoder(conn).Encode(req); err != nil {
			return nil, fmt.Errorf("sending QMP %s: %w", cmd, err)
		}
		for {
			var resp struct {
				Return json.RawMessage `json:"return"`
				Error  *struct {
					Class, Desc string
				} `json:"error"`
				Event string `json:"event"`
			}
			if err := dec.Decode(&resp); err != nil {
				return nil, fmt.Errorf("reading QMP %s reply: %w", cmd, err)
			}
			if resp.Event != "" {
				continue
			}
			if resp.Error != nil {
				return nil, fmt.Errorf("QMP %s: %s: %s", cmd, resp.Error.Class, resp.Error.Desc)
			}
			return resp.Return, nil
		}
	}
	if _, err := call("qmp_capabilities", nil); err != nil {
		return nil, err
	}
	return call(command, args)
}

// PowerDown presses the ACPI power button (QMP system_powerdown).
func (vm *VM) PowerDown() error {
	_, err := vm.QMP("system_powerdown", nil)
	return err
}

func dialRetry(path string, timeout time.Duration) (net.Conn, error) {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Shell runs cmd in the guest's debug shell (busybox sh on ttyS1, test
// images only; Config.Shell must be set) and returns its output once the
// command has finished. A non-zero exit status is an error that includes the
// output. The shell may start late in boot: Shell first waits for it to
// answer, within timeout.
func (vm *VM) Shell(cmd string, timeout time.Duration) (string, error) {
	if !vm.cfg.Shell {
		return "", errors.New("qemu: Shell needs Config.Shell")
	}
	vm.shellMu.Lock()
	defer vm.shellMu.Unlock()
	deadline := time.Now().Add(timeout)
	if vm.shell == nil {
		c, err := dialRetry(vm.shellPath(), time.Until(deadline))
		if err != nil {
			return "", fmt.Errorf("connecting to the shell serial port: %w", err)
		}
		vm.shell = c
		vm.shBuf = newLineBuf(vm.start, nil)
		vm.shBuf.stall = vm.stall
		go vm.shBuf.feed(c)
	}
	vm.shSeq++
	seq := vm.shSeq
	// Markers are split by '' in what is sent so that the tty's echo of the
	// command line never matches what echo prints.
	ready := fmt.Sprintf("BQR%d", seq)
	from := len(vm.shellLines())
	for {
		if _, err := fmt.Fprintf(vm.shell, "\necho BQR''%d\n", seq); err != nil {
			return "", fmt.Errorf("writing to the shell: %w", err)
		}
		wait := time.Now().Add(2 * time.Second)
		if wait.After(deadline) {
			wait = deadline
		}
		_, err := vm.shBuf.wait(from, wait, func(l Line) bool { return strings.TrimSpace(l.Text) == ready })
		if err == nil {
			break
		}
		if errors.Is(err, ErrGuestStalled) {
			return "", fmt.Errorf("waiting for the debug shell on ttyS1: %w", err)
		}
		if errors.Is(err, errClosed) || time.Now().After(deadline) {
			return "", fmt.Errorf("the debug shell on ttyS1 did not answer within %s (is berth.debugshell=ttyS1 working and /bin/sh in the image?): %w\nshell tail:\n%s",
				timeout, err, vm.shBuf.tail(10))
		}
	}
	begin, end := fmt.Sprintf("BQB%d", seq), regexp.MustCompile(fmt.Sprintf(`^BQE%d (\d+)$`, seq))
	from = len(vm.shellLines())
	// One input line: a second one would be echoed by the tty while cmd
	// runs, into the middle of its output.
	if _, err := fmt.Fprintf(vm.shell, "echo BQB''%d; %s; rc=$?; echo; echo BQE''%d $rc\n", seq, cmd, seq); err != nil {
		return "", fmt.Errorf("writing to the shell: %w", err)
	}
	bi, err := vm.shBuf.wait(from, deadline, func(l Line) bool { return strings.TrimSpace(l.Text) == begin })
	if err != nil {
		return "", fmt.Errorf("shell command %q: no start marker: %w\nshell tail:\n%s", cmd, err, vm.shBuf.tail(10))
	}
	var rc string
	ei, err := vm.shBuf.wait(bi+1, deadline, func(l Line) bool {
		if m := end.FindStringSubmatch(strings.TrimSpace(l.Text)); m != nil {
			rc = m[1]
			return true
		}
		return false
	})
	if err != nil {
		return "", fmt.Errorf("shell command %q did not finish within %s: %w\nshell tail:\n%s", cmd, timeout, err, vm.shBuf.tail(20))
	}
	lines := vm.shellLines()[bi+1 : ei]
	// The bare echo before the end marker ends a last line that had no
	// newline, or else leaves one empty line: drop that.
	if n := len(lines); n > 0 && lines[n-1].Text == "" {
		lines = lines[:n-1]
	}
	texts := make([]string, len(lines))
	for i, l := range lines {
		texts[i] = l.Text
	}
	out := strings.Join(texts, "\n")
	if rc != "0" {
		return out, fmt.Errorf("shell command %q exited %s:\n%s", cmd, rc, out)
	}
	return out, nil
}

func (vm *VM) shellLines() []Line {
	l, _, _ := vm.shBuf.snapshot(0)
	return l
}
