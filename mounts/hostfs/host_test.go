package hostfs

// Host tests: the real overlay, bpffs and propagation. They need root (CI
// runs as root) and fail without it. Each case runs in a child process
// (this test binary again) in its own mount namespace, whose mounts Go
// makes private before the child runs, so nothing touches the host.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-node/berth/mounts"
)

const childEnv = "BERTH_HOSTFS_TEST_CHILD"

type childArgs struct {
	Case string
	Dir  string
}

var childCases = map[string]func(string) error{
	"readonly-root": childReadOnlyRoot,
	"writable-root": childWritableRoot,
}

func TestMain(m *testing.M) {
	if v := os.Getenv(childEnv); v != "" {
		var a childArgs
		if err := json.Unmarshal([]byte(v), &a); err != nil {
			fmt.Println("CHILD FAIL: bad arguments:", err)
			os.Exit(1)
		}
		if err := childCases[a.Case](a.Dir); err != nil {
			fmt.Println("CHILD FAIL:", err)
			os.Exit(1)
		}
		fmt.Println("CHILD OK")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runChild(t *testing.T, name string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test mounts overlayfs and bpffs and needs root (CI runs as root)")
	}
	b, _ := json.Marshal(childArgs{Case: name, Dir: t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(b))
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("child output:\n%s", out.String())
	if err != nil || !strings.Contains(out.String(), "CHILD OK") {
		t.Fatalf("child %s failed: %v", name, err)
	}
}

// A read-only root like the erofs image: the plugins are written and run
// through the overlay, the image's copy stays as it was, bpffs is there,
// /var/run's old contents are kept aside, and a mount made under
// /var/lib/kubelet reaches a peer of /var (what Bidirectional needs).
func TestHostReadOnlyRoot(t *testing.T) { runChild(t, "readonly-root") }

// berth.root=none: a writable root gets plain directories, and its
// private mounts are made shared.
func TestHostWritableRoot(t *testing.T) { runChild(t, "writable-root") }

const imagePlugin = "#!/bin/sh\necho image-plugin\n"

// fakeRoot mounts a tmpfs at dir/root holding an image's /opt/cni/bin,
// with tmpfs stand-ins for /var, /etc, /run and /sys, and makes the root
// read-only when ro is set. It returns the root.
func fakeRoot(dir string, ro bool) (string, error) {
	r := filepath.Join(dir, "root")
	if err := os.MkdirAll(r, 0o755); err != nil {
		return "", err
	}
	if err := unix.Mount("tmpfs", r, "tmpfs", 0, "mode=0755"); err != nil {
		return "", fmt.Errorf("mounting the fake root: %w", err)
	}
	for _, d := range []string{"opt/cni/bin", "opt/csi", "var", "etc", "run", "sys"} {
		if err := os.MkdirAll(filepath.Join(r, d), 0o755); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(filepath.Join(r, "opt/cni/bin/bridge"), []byte(imagePlugin), 0o755); err != nil {
		return "", err
	}
	if ro {
		if err := unix.Mount("", r, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			return "", fmt.Errorf("making the fake root read-only: %w", err)
		}
	}
	for _, d := range []string{"var", "etc", "run", "sys"} {
		if err := unix.Mount("tmpfs", filepath.Join(r, d), "tmpfs", 0, "mode=0755"); err != nil {
			return "", fmt.Errorf("mounting the fake /%s: %w", d, err)
		}
	}
	return r, os.MkdirAll(filepath.Join(r, "sys/fs/bpf"), 0o755)
}

func run(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func childReadOnlyRoot(dir string) error {
	r, err := fakeRoot(dir, true)
	if err != nil {
		return err
	}
	// A view of the root's own filesystem (no submounts): the image's copy.
	image := filepath.Join(dir, "image")
	if err := os.Mkdir(image, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(r, image, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("binding the image view: %w", err)
	}
	// Something ran before the link existed: its files must survive.
	if err := os.MkdirAll(filepath.Join(r, "var/run"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r, "var/run/old.pid"), []byte("42\n"), 0o644); err != nil {
		return err
	}

	start := time.Now()
	res, err := Run(context.Background(), nil, Options{Root: r, SaveSuffix: "test"})
	fmt.Printf("figure: host setup took %s\n", time.Since(start))
	if err != nil {
		return fmt.Errorf("Run: %w", err)
	}
	for _, o := range res.Overlays {
		if o.Status != "mounted" {
			return fmt.Errorf("overlay %s: status %s, want mounted (%s)", o.Target, o.Status, o.Error)
		}
	}
	if len(res.Mounts) != 1 || res.Mounts[0].Status != "mounted" {
		return fmt.Errorf("bpffs: %+v", res.Mounts)
	}

	// The image's plugin runs through the overlay; a new one is written and
	// run; overwriting the image's copies it up and leaves the image alone.
	bin := filepath.Join(r, CNIBinDir)
	if out, err := run(filepath.Join(bin, "bridge")); err != nil || out != "image-plugin" {
		return fmt.Errorf("running the image's plugin through the overlay: %q %v", out, err)
	}
	if err := os.WriteFile(filepath.Join(bin, "aws-cni"), []byte("#!/bin/sh\necho installed\n"), 0o755); err != nil {
		return fmt.Errorf("writing a plugin through the overlay: %w", err)
	}
	if out, err := run(filepath.Join(bin, "aws-cni")); err != nil || out != "installed" {
		return fmt.Errorf("running a written plugin: %q %v", out, err)
	}
	if err := os.WriteFile(filepath.Join(bin, "bridge"), []byte("#!/bin/sh\necho replaced\n"), 0o755); err != nil {
		return fmt.Errorf("replacing the image's plugin: %w", err)
	}
	if out, _ := run(filepath.Join(bin, "bridge")); out != "replaced" {
		return fmt.Errorf("replaced plugin ran as %q", out)
	}
	if b, err := os.ReadFile(filepath.Join(image, CNIBinDir, "bridge")); err != nil || string(b) != imagePlugin {
		return fmt.Errorf("the image's copy changed: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(image, CNIBinDir, "aws-cni")); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("the written plugin reached the image's copy: %v", err)
	}
	if _, err := os.Stat(filepath.Join(r, OverlayState, "opt-cni-bin/upper/aws-cni")); err != nil {
		return fmt.Errorf("the written plugin is not in the upper dir: %w", err)
	}
	if err := os.WriteFile(filepath.Join(r, CSIDir, "driver"), []byte("x"), 0o644); err != nil {
		return fmt.Errorf("writing through the /opt/csi overlay: %w", err)
	}
	if err := os.WriteFile(filepath.Join(r, CNIConfDir, "10-aws.conflist"), []byte("{}"), 0o644); err != nil {
		return fmt.Errorf("writing a CNI config: %w", err)
	}

	if t, err := os.Readlink(filepath.Join(r, VarRun)); err != nil || t != "/run" {
		return fmt.Errorf("/var/run links to %q (%v), want /run", t, err)
	}
	if res.VarRun.Action != LinkMoveAside {
		return fmt.Errorf("/var/run action %q, want %s", res.VarRun.Action, LinkMoveAside)
	}
	if b, err := os.ReadFile(filepath.Join(r, "var/run.berth-saved-test/old.pid")); err != nil || string(b) != "42\n" {
		return fmt.Errorf("the old /var/run's file was not kept: %q %v", b, err)
	}
	for _, d := range []string{PluginsRegistry, KubeletPlugins} {
		fi, err := os.Stat(filepath.Join(r, d))
		if err != nil || fi.Mode().Perm() != 0o750 {
			return fmt.Errorf("%s: %v %v, want a 0750 directory", d, fi, err)
		}
	}

	ms, err := mounts.ReadMountInfo()
	if err != nil {
		return err
	}
	bpf, ok := mounts.TopAt(ms, filepath.Join(r, BPFDir))
	if !ok || bpf.FSType != "bpf" || !strings.Contains(bpf.SuperOptions, "mode=700") {
		return fmt.Errorf("bpffs at %s: %+v", filepath.Join(r, BPFDir), bpf)
	}
	for _, pp := range res.Propagation {
		if !pp.Shared {
			return fmt.Errorf("%s is on %s with propagation %s, want shared", pp.Path, pp.MountPoint, pp.Propagation)
		}
	}
	// Real propagation: a peer of /var sees a mount made under it later,
	// as a Bidirectional hostPath mount in a pod would.
	peer := filepath.Join(dir, "peer")
	if err := os.Mkdir(peer, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(filepath.Join(r, "var"), peer, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("binding a peer of /var: %w", err)
	}
	vol := filepath.Join(r, KubeletPlugins, "vol")
	if err := os.Mkdir(vol, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", vol, "tmpfs", 0, ""); err != nil {
		return fmt.Errorf("mounting under the kubelet plugins dir: %w", err)
	}
	if err := os.WriteFile(filepath.Join(vol, "seen"), nil, 0o644); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(peer, "lib/kubelet/plugins/vol/seen")); err != nil {
		return fmt.Errorf("a mount under /var did not propagate to its peer: %w", err)
	}

	// Again, as after a crash of the phase: nothing is redone.
	res2, err := Run(context.Background(), nil, Options{Root: r, SaveSuffix: "test2"})
	if err != nil {
		return fmt.Errorf("second Run: %w", err)
	}
	if res2.VarRun.Action != LinkKeep || res2.Mounts[0].Status != "present" || len(res2.MadeShared) != 0 {
		return fmt.Errorf("second Run redid work: %+v", res2)
	}
	for _, o := range res2.Overlays {
		if o.Status != "present" {
			return fmt.Errorf("second Run: overlay %s %s", o.Target, o.Status)
		}
	}
	if out, _ := run(filepath.Join(bin, "aws-cni")); out != "installed" {
		return fmt.Errorf("after the second Run the plugin runs as %q", out)
	}
	return nil
}

func childWritableRoot(dir string) error {
	r, err := fakeRoot(dir, false)
	if err != nil {
		return err
	}
	// An empty /var/run directory is simply replaced.
	if err := os.MkdirAll(filepath.Join(r, "var/run"), 0o755); err != nil {
		return err
	}
	// bpffs mounted with the kernel's module requests off, through a
	// scratch knob: the real one is the whole host's.
	knob := filepath.Join(r, "modprobe-knob")
	if err := os.WriteFile(knob, []byte("/sbin/modprobe\n"), 0o644); err != nil {
		return err
	}
	res, err := Run(context.Background(), nil, Options{Root: r, NoBPFPreload: true, ModprobeKnob: knob})
	if err != nil {
		return fmt.Errorf("Run: %w", err)
	}
	if b, err := os.ReadFile(knob); err != nil || string(b) != "/sbin/modprobe\n" {
		return fmt.Errorf("the modprobe knob holds %q (%v) after Run, want /sbin/modprobe put back", b, err)
	}
	if len(res.Mounts) != 1 || res.Mounts[0].FSType != "bpf" || res.Mounts[0].Status != "mounted" {
		return fmt.Errorf("mounts %+v, want bpffs mounted", res.Mounts)
	}
	for _, o := range res.Overlays {
		if o.Status != "dir" {
			return fmt.Errorf("overlay %s on a writable root: status %s, want dir", o.Target, o.Status)
		}
	}
	if res.VarRun.Action != LinkRemoveDir {
		return fmt.Errorf("/var/run action %q, want %s", res.VarRun.Action, LinkRemoveDir)
	}
	if t, err := os.Readlink(filepath.Join(r, VarRun)); err != nil || t != "/run" {
		return fmt.Errorf("/var/run links to %q (%v), want /run", t, err)
	}
	if len(res.MadeShared) == 0 || res.MadeShared[0] != r {
		return fmt.Errorf("the private root was not made shared: %q", res.MadeShared)
	}
	if err := os.WriteFile(filepath.Join(r, CNIBinDir, "x"), []byte("#!/bin/sh\necho ok\n"), 0o755); err != nil {
		return err
	}
	if out, err := run(filepath.Join(r, CNIBinDir, "x")); err != nil || out != "ok" {
		return fmt.Errorf("running a plugin on the writable root: %q %v", out, err)
	}
	for _, pp := range res.Propagation {
		if !pp.Shared {
			return fmt.Errorf("%s: propagation %s, want shared", pp.Path, pp.Propagation)
		}
	}
	return nil
}
