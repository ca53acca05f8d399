package localstorage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-node/berth/mounts/instancestore"
	"github.com/berth-node/berth/mounts/sigprobe"
)

// Host tests: real loop devices (with partition scanning), real mkfs and
// mount, as root. They cover everything but device-mapper arrays, which
// need dm_mod (the CI container has none; the QEMU tests cover arrays).

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("host test needs root (loop devices, mount)")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Fatalf("host test needs /dev/loop-control: %v", err)
	}
}

// loopDisk attaches a sparse file of size bytes to a free loop device with
// partition scanning on, and returns it as a discovered disk.
func loopDisk(t *testing.T, serial string, size int64) instancestore.Disk {
	t.Helper()
	img := filepath.Join(t.TempDir(), serial+".img")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	var loop *os.File
	var name string
	for range 10 { // another process may take the free device first
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			t.Fatalf("LOOP_CTL_GET_FREE: %v", err)
		}
		name = fmt.Sprintf("loop%d", n)
		loop, err = openLoop(name, n)
		if err != nil {
			t.Fatal(err)
		}
		cfg := unix.LoopConfig{Fd: uint32(f.Fd()), Info: unix.LoopInfo64{Flags: unix.LO_FLAGS_PARTSCAN}}
		err = unix.IoctlLoopConfigure(int(loop.Fd()), &cfg)
		if err == nil {
			break
		}
		loop.Close()
		loop = nil
		if !errors.Is(err, unix.EBUSY) {
			t.Fatalf("LOOP_CONFIGURE %s: %v", name, err)
		}
	}
	if loop == nil {
		t.Fatal("no free loop device")
	}
	t.Cleanup(func() {
		if err := unix.IoctlSetInt(int(loop.Fd()), unix.LOOP_CLR_FD, 0); err != nil {
			t.Errorf("detaching %s: %v", name, err)
		}
		loop.Close()
	})
	return instancestore.Disk{Name: name, Path: "/dev/" + name, Model: "loop", Serial: serial, SizeBytes: size}
}

func openLoop(name string, n int) (*os.File, error) {
	p := "/dev/" + name
	if _, err := os.Stat(p); err != nil {
		if err := unix.Mknod(p, unix.S_IFBLK|0o600, int(unix.Mkdev(7, uint32(n)))); err != nil && !errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("making %s: %w", p, err)
		}
	}
	return os.OpenFile(p, os.O_RDWR, 0)
}

func hostEnv(t *testing.T, disks []instancestore.Disk) Env {
	t.Helper()
	tools := map[string]string{}
	for _, tool := range []string{"mkfs.xfs", "mkfs.ext4"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Fatalf("host test needs %s: %v", tool, err)
		}
		tools[tool] = p
	}
	root := t.TempDir()
	t.Cleanup(func() { unmountUnder(t, root) })
	return Env{
		SysRoot: "/sys", DevRoot: "/dev", DMControl: "/dev/mapper/control", Root: root, Tools: tools,
		Discover: func() ([]instancestore.Disk, []instancestore.Skipped, error) { return disks, nil, nil },
		Timeout:  2 * time.Minute,
	}
}

// mountsUnder lists mount points under root from mountinfo, with their
// optional fields (for propagation).
func mountsUnder(t *testing.T, root string) map[string]string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 7 || !strings.HasPrefix(f[4], root+"/") {
			continue
		}
		opt := strings.Join(f[6:slicesIndex(f, "-")], " ")
		out[strings.TrimPrefix(f[4], root)] = opt
	}
	return out
}

func slicesIndex(f []string, s string) int {
	for i, x := range f {
		if x == s {
			return i
		}
	}
	return len(f)
}

func unmountUnder(t *testing.T, root string) {
	for range 4 {
		ms := mountsUnder(t, root)
		if len(ms) == 0 {
			return
		}
		for m := range ms {
			_ = unix.Unmount(filepath.Join(root, m), unix.MNT_DETACH)
		}
	}
}

func logger(t *testing.T) (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return slog.New(slog.NewTextHandler(&buf, nil)), &buf
}

func TestHostRAID0SingleDiskBindsAndReboot(t *testing.T) {
	requireRoot(t)
	disk := loopDisk(t, "berth-is-0", 400<<20)
	env := hostEnv(t, []instancestore.Disk{disk})
	log, _ := logger(t)
	opts := Options{Strategy: StrategyRAID0}

	res, err := Run(context.Background(), log, opts, env)
	if err != nil || res.Status != StatusReady {
		t.Fatalf("first boot: %v %+v", err, res)
	}
	if len(res.Filesystems) != 1 || !res.Filesystems[0].Created || res.Filesystems[0].Device != disk.Path+"p1" || res.Array != nil {
		t.Fatalf("first boot filesystems %+v array %+v", res.Filesystems, res.Array)
	}
	if res.Disks[0].Found != "blank" || !res.Disks[0].Partitioned {
		t.Fatalf("disk report %+v", res.Disks[0])
	}
	ms := mountsUnder(t, env.Root)
	for _, p := range []string{"/mnt/k8s-disks/0", "/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"} {
		if _, ok := ms[p]; !ok {
			t.Fatalf("%s not mounted; mounts %v", p, ms)
		}
	}
	if !strings.Contains(ms["/var/lib/kubelet"], "shared:") {
		t.Fatalf("/var/lib/kubelet not shared: %q", ms["/var/lib/kubelet"])
	}
	// A file written through the containerd bind lands on the instance store.
	if err := os.WriteFile(filepath.Join(env.Root, "var/lib/containerd/marker"), []byte("first boot"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(env.Root, "mnt/k8s-disks/0/containerd/marker")); err != nil || string(b) != "first boot" {
		t.Fatalf("file not on the filesystem: %q %v", b, err)
	}
	wantSteps := []string{"discover", "probe", "partition", "array", "mkfs", "mount"}
	var steps []string
	for _, s := range res.Steps {
		steps = append(steps, s.Name)
	}
	if strings.Join(steps, ",") != strings.Join(wantSteps, ",") {
		t.Fatalf("steps %v", steps)
	}

	// "Reboot": shut down as berth does, run again on the same disk.
	if err := Teardown(context.Background(), log, res, env); err != nil {
		t.Fatalf("teardown: %v", err)
	}
	if ms := mountsUnder(t, env.Root); len(ms) != 0 {
		t.Fatalf("teardown left mounts: %v", ms)
	}
	res2, err := Run(context.Background(), log, opts, env)
	if err != nil || res2.Status != StatusReady {
		t.Fatalf("second boot: %v %+v", err, res2)
	}
	if res2.Filesystems[0].Created || res2.Disks[0].Partitioned || res2.Disks[0].Found != "berth raid0 1/1" {
		t.Fatalf("second boot reformatted or repartitioned: %+v %+v", res2.Filesystems, res2.Disks)
	}
	if res2.Filesystems[0].UUID != res.Filesystems[0].UUID {
		t.Fatal("filesystem UUID changed across boots")
	}
	if b, err := os.ReadFile(filepath.Join(env.Root, "var/lib/containerd/marker")); err != nil || string(b) != "first boot" {
		t.Fatalf("file from the first boot lost: %q %v", b, err)
	}
}

func TestHostMountStrategy(t *testing.T) {
	requireRoot(t)
	disks := []instancestore.Disk{loopDisk(t, "berth-is-0", 320<<20), loopDisk(t, "berth-is-1", 320<<20)}
	env := hostEnv(t, disks)
	log, _ := logger(t)
	res, err := Run(context.Background(), log, Options{Strategy: StrategyMount, Filesystem: "ext4", MountPath: "/data"}, env)
	if err != nil || res.Status != StatusReady {
		t.Fatalf("%v %+v", err, res)
	}
	ms := mountsUnder(t, env.Root)
	for i, d := range disks {
		mnt := fmt.Sprintf("/data/%d", i)
		if _, ok := ms[mnt]; !ok {
			t.Fatalf("%s not mounted: %v", mnt, ms)
		}
		fs := res.Filesystems[i]
		if fs.Device != d.Path+"p1" || fs.Type != "ext4" || fs.Label != fmt.Sprintf("berth-is-%d", i) || fs.Mount != mnt {
			t.Fatalf("filesystem %d: %+v", i, fs)
		}
		sig, err := probePath(fs.Device)
		if err != nil || sig.Kind != sigprobe.Ext4 || sig.UUID != fs.UUID {
			t.Fatalf("probe of %s: %+v %v", fs.Device, sig, err)
		}
	}
	if len(res.Binds) != 0 || len(ms) != 2 {
		t.Fatalf("Mount strategy made binds: %+v %v", res.Binds, ms)
	}
}

// A disk holding someone else's filesystem is left alone: the phase fails
// with the disk and what it holds named, falls back to the root disk, and
// the filesystem is intact afterwards. With Fatal the error is returned.
func TestHostForeignFilesystemLeftAlone(t *testing.T) {
	requireRoot(t)
	disk := loopDisk(t, "berth-is-0", 64<<20)
	if out, err := exec.Command("mkfs.ext4", "-q", "-L", "precious", disk.Path).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v %s", err, out)
	}
	before, err := probePath(disk.Path)
	if err != nil || before.Kind != sigprobe.Ext4 {
		t.Fatalf("setup probe %+v %v", before, err)
	}
	env := hostEnv(t, []instancestore.Disk{disk})
	log, logs := logger(t)
	res, err := Run(context.Background(), log, Options{Strategy: StrategyRAID0}, env)
	if err != nil {
		t.Fatalf("non-fatal policy returned an error: %v", err)
	}
	want := fmt.Sprintf(`disk %s (serial berth-is-0) holds an ext4 filesystem (label "precious"`, disk.Path)
	if res.Status != StatusFailed || res.Step != "plan" || res.Fallback != "root disk" || !strings.Contains(res.Error, want) {
		t.Fatalf("result %+v", res)
	}
	if !strings.Contains(logs.String(), "stay on the root disk") {
		t.Fatalf("no console error: %s", logs)
	}
	after, err := probePath(disk.Path)
	if err != nil || after != before {
		t.Fatalf("disk changed: %+v -> %+v (%v)", before, after, err)
	}
	if ms := mountsUnder(t, env.Root); len(ms) != 0 {
		t.Fatalf("mounted something: %v", ms)
	}
	if _, err := Run(context.Background(), log, Options{Strategy: StrategyRAID0, Fatal: true}, env); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("fatal policy: %v", err)
	}
}

// A failing mkfs names the device and the step, and undoes nothing it did
// not do: no mounts are left.
func TestHostMkfsFailure(t *testing.T) {
	requireRoot(t)
	disk := loopDisk(t, "berth-is-0", 64<<20) // too small for mkfs.xfs (300 MB minimum)
	env := hostEnv(t, []instancestore.Disk{disk})
	log, _ := logger(t)
	res, err := Run(context.Background(), log, Options{Strategy: StrategyRAID0}, env)
	if err != nil || res.Status != StatusFailed || res.Step != "mkfs" || !strings.Contains(res.Error, disk.Path+"p1") || res.Fallback != "root disk" {
		t.Fatalf("%v %+v", err, res)
	}
	if ms := mountsUnder(t, env.Root); len(ms) != 0 {
		t.Fatalf("left mounts: %v", ms)
	}
}
