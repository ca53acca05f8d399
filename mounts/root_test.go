package mounts

// Tests that mount for real. They need root (CI runs as root) and fail
// without it. Each runs in a child process (this test binary again) in its
// own mount namespace, so nothing it mounts, moves or chroots into touches
// the host; Go makes the child's mounts private before it runs.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const childEnv = "BERTH_MOUNTS_TEST_CHILD"

// childArgs is what the parent test passes to the child.
type childArgs struct {
	Case    string
	Dir     string
	Image   string
	NewRoot string
	Carry   string
}

var childCases = map[string]func(childArgs) error{
	"apply":      childApply,
	"switchroot": childSwitchRoot,
}

func TestMain(m *testing.M) {
	if v := os.Getenv(childEnv); v != "" {
		var a childArgs
		if err := json.Unmarshal([]byte(v), &a); err != nil {
			fmt.Println("CHILD FAIL: bad arguments:", err)
			os.Exit(1)
		}
		if err := childCases[a.Case](a); err != nil {
			fmt.Println("CHILD FAIL:", err)
			os.Exit(1)
		}
		fmt.Println("CHILD OK")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test mounts filesystems and needs root (CI runs as root)")
	}
}

// runChild runs a case in a new mount namespace and returns its output.
func runChild(t *testing.T, a childArgs) string {
	t.Helper()
	b, _ := json.Marshal(a)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(b))
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting child: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil || !strings.Contains(out.String(), "CHILD OK") {
			t.Fatalf("child case %s failed (%v):\n%s", a.Case, err, out.String())
		}
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("child case %s timed out:\n%s", a.Case, out.String())
	}
	if testing.Verbose() {
		t.Logf("child %s output:\n%s", a.Case, out.String())
	}
	return out.String()
}

func childLog() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func mountsAt(target string) ([]MountInfo, error) {
	ms, err := ReadMountInfo()
	if err != nil {
		return nil, err
	}
	var out []MountInfo
	for _, m := range ms {
		if m.Target == target {
			out = append(out, m)
		}
	}
	return out, nil
}

func TestApplyTwiceInMountNamespace(t *testing.T) {
	requireRoot(t)
	runChild(t, childArgs{Case: "apply", Dir: t.TempDir()})
}

func childApply(a childArgs) error {
	ctx := context.Background()
	log := childLog()
	table := []Mount{
		{Source: "tmpfs", Target: a.Dir + "/run", FSType: "tmpfs", Flags: nosuid | nodev, Data: "mode=0755", Mode: 0o755},
		{Source: "tmpfs", Target: a.Dir + "/run/inner", FSType: "tmpfs", Data: "mode=0700", Mode: 0o755},
	}
	if err := Apply(ctx, log, table); err != nil {
		return fmt.Errorf("first Apply: %w", err)
	}
	marker := a.Dir + "/run/inner/marker"
	if err := os.WriteFile(marker, []byte("x"), 0o644); err != nil {
		return err
	}
	if err := Apply(ctx, log, table); err != nil {
		return fmt.Errorf("second Apply (mounted already must not be an error): %w", err)
	}
	for _, m := range table {
		got, err := mountsAt(m.Target)
		if err != nil {
			return err
		}
		if len(got) != 1 || got[0].FSType != "tmpfs" {
			return fmt.Errorf("%s: %d mounts after two Applies, want exactly 1 tmpfs: %+v", m.Target, len(got), got)
		}
	}
	if _, err := os.Stat(marker); err != nil {
		return fmt.Errorf("second Apply hid what the first mount held: %w", err)
	}
	fi, err := os.Stat(a.Dir + "/run/inner")
	if err != nil || fi.Mode().Perm() != 0o700 {
		return fmt.Errorf("mount data (mode=0700) not applied: %v %v", fi.Mode(), err)
	}
	// A failing mount is named, and the ones after it are still made.
	bad := []Mount{
		{Source: "none", Target: a.Dir + "/bad", FSType: "nosuchfs", Mode: 0o755},
		{Source: "tmpfs", Target: a.Dir + "/after", FSType: "tmpfs", Mode: 0o755},
	}
	err = Apply(ctx, log, bad)
	if err == nil || !strings.Contains(err.Error(), a.Dir+"/bad type nosuchfs") || !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("Apply with an unknown fstype: err = %v, want ENODEV naming the mount", err)
	}
	if got, _ := mountsAt(a.Dir + "/after"); len(got) != 1 {
		return fmt.Errorf("the mount after a failed one was not made")
	}
	return nil
}

// erofsAvailable reports why the kernel cannot mount erofs from a loop
// device here, or "" if it can.
func erofsAvailable() string {
	_ = exec.Command("modprobe", "-q", "loop").Run()
	_ = exec.Command("modprobe", "-q", "erofs").Run()
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return "no loop driver (/dev/loop-control: " + err.Error() + "; modprobe loop failed)"
	}
	b, _ := os.ReadFile("/proc/filesystems")
	if !regexp.MustCompile(`(?m)\serofs$`).Match(b) {
		return "the kernel has no erofs (ENODEV; not in /proc/filesystems, modprobe erofs failed)"
	}
	return ""
}

func TestSwitchRootInMountNamespace(t *testing.T) {
	requireRoot(t)
	if _, err := exec.LookPath("mkfs.erofs"); err != nil {
		t.Fatalf("mkfs.erofs (erofs-utils, installed by make deps) is needed: %v", err)
	}
	if why := erofsAvailable(); why != "" {
		t.Skip("SKIPPED LOUDLY: cannot test the loop+erofs switch root on this machine: " + why)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	for _, d := range []string{"proc", "sys", "dev", "run", "tmp", "var", "mnt", "lib/modules", "sbin", "etc/ssl/certs"} {
		if err := os.MkdirAll(filepath.Join(src, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]struct {
		data string
		mode os.FileMode
	}{
		"etc/hostname":         {"berth-test\n", 0o644},
		"etc/secret":           {"s\n", 0o600},
		"etc/ssl/certs/ca.pem": {"PEM\n", 0o644},
		"sbin/berth":           {"#!berth\n", 0o755},
	}
	for p, f := range files {
		if err := os.WriteFile(filepath.Join(src, p), []byte(f.data), f.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(src, p), f.mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/proc/self/mounts", filepath.Join(src, "etc/mtab")); err != nil {
		t.Fatal(err)
	}
	image := filepath.Join(dir, "root.erofs")
	if out, err := exec.Command("mkfs.erofs", "-zlz4hc", "-T0", "--all-root", image, src).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.erofs: %v\n%s", err, out)
	}
	// The carried directory must exist at the same path in the old root; a
	// fresh directory under /var/tmp does (the new root's /var is a tmpfs,
	// so its mount point can be made there).
	// The new root must not lie under a mount that moves into it (/tmp may
	// be one), so it goes under /var/tmp too.
	base, err := os.MkdirTemp("/var/tmp", "berth-switch-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	carry := filepath.Join(base, "carry")
	if err := os.Mkdir(carry, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(carry, "modules.dep"), []byte("kernel/loop.ko:\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := runChild(t, childArgs{Case: "switchroot", Dir: dir, Image: image, NewRoot: filepath.Join(base, "newroot"), Carry: carry})
	if m := regexp.MustCompile(`LOOP=(/dev/loop\d+) DURATION_MS=(\d+)`).FindStringSubmatch(out); m != nil {
		t.Logf("SwitchRoot took %s ms (host, not TCG) on %s", m[2], m[1])
		// The loop device was set to autoclear: once the namespace and its
		// mount are gone, the kernel detaches it. It must not leak.
		backing := "/sys/block/" + filepath.Base(m[1]) + "/loop/backing_file"
		deadline := time.Now().Add(10 * time.Second)
		for {
			b, err := os.ReadFile(backing)
			if err != nil || !strings.Contains(string(b), image) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s still attached to %s after the child exited (autoclear not set?)", m[1], image)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	} else {
		t.Errorf("child did not report its loop device and duration:\n%s", out)
	}
}

func childSwitchRoot(a childArgs) error {
	ctx := context.Background()
	log := childLog()
	// The early mounts move over as they are (a container's /dev may be a
	// tmpfs rather than devtmpfs): note what they are before.
	before := map[string]string{}
	for _, p := range []string{"/proc", "/sys", "/dev"} {
		ms, err := mountsAt(p)
		if err != nil || len(ms) == 0 {
			return fmt.Errorf("the test needs %s mounted before the switch (%v)", p, err)
		}
		before[p] = ms[len(ms)-1].FSType
	}
	res, err := SwitchRoot(ctx, log, SwitchRootOptions{Image: a.Image, NewRoot: a.NewRoot, Carry: []string{a.Carry}})
	if err != nil {
		return err
	}
	fmt.Printf("LOOP=%s DURATION_MS=%d\n", res.LoopDevice, res.DurationMs)
	if res.FSType != "erofs" || !strings.HasPrefix(res.LoopDevice, "/dev/loop") || res.Image != a.Image ||
		strings.Join(res.Writable, " ") != "/etc /run /tmp /var" {
		return fmt.Errorf("result %+v", res)
	}
	if wd, _ := os.Getwd(); wd != "/" {
		return fmt.Errorf("working directory %q after the switch, want /", wd)
	}
	want := map[string]string{"/": "erofs", "/etc": "tmpfs", "/var": "tmpfs", "/run": "tmpfs", "/tmp": "tmpfs",
		"/proc": before["/proc"], "/sys": before["/sys"], "/dev": before["/dev"], a.Carry: ""}
	for target, fstype := range want {
		ms, err := mountsAt(target)
		if err != nil {
			return err
		}
		if len(ms) == 0 {
			return fmt.Errorf("%s is not a mount point after the switch", target)
		}
		top := ms[len(ms)-1]
		if fstype != "" && top.FSType != fstype {
			return fmt.Errorf("%s is %s, want %s", target, top.FSType, fstype)
		}
		if (target == "/" || target == a.Carry) && !strings.HasPrefix(top.Options, "ro") {
			return fmt.Errorf("%s is mounted %s, want read-only", target, top.Options)
		}
	}
	// /etc holds the image's /etc, with modes and links, and is writable.
	if b, err := os.ReadFile("/etc/hostname"); err != nil || string(b) != "berth-test\n" {
		return fmt.Errorf("/etc/hostname = %q, %v", b, err)
	}
	if b, err := os.ReadFile("/etc/ssl/certs/ca.pem"); err != nil || string(b) != "PEM\n" {
		return fmt.Errorf("/etc/ssl/certs/ca.pem = %q, %v", b, err)
	}
	if fi, err := os.Stat("/etc/secret"); err != nil || fi.Mode().Perm() != 0o600 {
		return fmt.Errorf("/etc/secret mode not kept: %v, %v", fi, err)
	}
	if l, err := os.Readlink("/etc/mtab"); err != nil || l != "/proc/self/mounts" {
		return fmt.Errorf("/etc/mtab link = %q, %v", l, err)
	}
	for _, p := range []string{"/etc/kubernetes/kubelet/config.json", "/var/lib/containerd/x", "/run/berth/boot.json", "/tmp/x"} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("%s not writable: %w", p, err)
		}
		if err := os.WriteFile(p, []byte("{}"), 0o644); err != nil {
			return fmt.Errorf("%s not writable: %w", p, err)
		}
	}
	if err := os.WriteFile("/sbin/x", nil, 0o644); !errors.Is(err, unix.EROFS) {
		return fmt.Errorf("writing into the root image: err = %v, want EROFS", err)
	}
	if b, err := os.ReadFile(filepath.Join(a.Carry, "modules.dep")); err != nil || string(b) != "kernel/loop.ko:\n" {
		return fmt.Errorf("carried file = %q, %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(a.Carry, "new"), nil, 0o644); !errors.Is(err, unix.EROFS) {
		return fmt.Errorf("writing into a carried path: err = %v, want EROFS", err)
	}
	if _, err := os.ReadFile("/proc/self/status"); err != nil {
		return fmt.Errorf("/proc did not move along: %w", err)
	}
	// Shutdown from the switched root: everything but / and the API
	// filesystems goes away.
	if err := UnmountAll(ctx, log); err != nil {
		return fmt.Errorf("UnmountAll: %w", err)
	}
	for _, target := range []string{"/etc", "/var", "/tmp", a.Carry} {
		if ms, _ := mountsAt(target); len(ms) != 0 {
			return fmt.Errorf("%s still mounted after UnmountAll: %+v", target, ms)
		}
	}
	if ms, _ := mountsAt("/proc"); len(ms) == 0 {
		return fmt.Errorf("UnmountAll unmounted /proc, which the shutdown still needs")
	}
	return nil
}
