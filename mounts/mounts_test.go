package mounts

import (
	"encoding/binary"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/berth-node/berth/internal/golden"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name)
	golden.Check(t, p, []byte(got), *update)
}

func flagNames(f uintptr) string {
	var out []string
	for _, n := range []struct {
		bit  uintptr
		name string
	}{
		{unix.MS_RDONLY, "ro"}, {unix.MS_NOSUID, "nosuid"}, {unix.MS_NODEV, "nodev"}, {unix.MS_NOEXEC, "noexec"},
		{unix.MS_BIND, "bind"}, {unix.MS_REC, "rec"},
	} {
		if f&n.bit != 0 {
			out = append(out, n.name)
			f &^= n.bit
		}
	}
	if f != 0 {
		out = append(out, fmt.Sprintf("%#x", f))
	}
	return strings.Join(out, ",")
}

func render(ms []Mount) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "%s %s type=%s flags=%s data=%q mode=%v\n", m.Source, m.Target, m.FSType, flagNames(m.Flags), m.Data, m.Mode)
	}
	return b.String()
}

func TestEarlyTable(t *testing.T) {
	table := EarlyTable()
	checkGolden(t, "early-table.golden", render(table))

	// Every mount comes after the mount its target sits on.
	seen := map[string]bool{}
	for i, m := range table {
		for j, other := range table {
			if strings.HasPrefix(m.Target, other.Target+"/") && j > i {
				t.Errorf("%s comes before %s, which it sits on", m.Target, other.Target)
			}
		}
		seen[m.Target] = true
	}
	for _, target := range []string{"/proc", "/sys", "/dev", "/dev/pts", "/dev/shm", "/run", "/tmp", "/sys/fs/cgroup"} {
		if !seen[target] {
			t.Errorf("early table lacks %s", target)
		}
	}
}

func TestParseMountInfo(t *testing.T) {
	f, err := os.Open("testdata/mountinfo-node")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ms, err := ParseMountInfo(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 15 {
		t.Fatalf("parsed %d mounts, want 15", len(ms))
	}
	want := MountInfo{ID: 1, Parent: 0, Root: "/", Target: "/", Options: "ro,nodev,relatime", FSType: "erofs",
		Source: "/dev/loop0", SuperOptions: "ro,user_xattr,acl,cache_strategy=readaround", Propagation: "shared:1"}
	if ms[0] != want {
		t.Errorf("first mount = %+v, want %+v", ms[0], want)
	}
	if got := ms[14].Target; got != "/var/lib/kubelet/pods/x/volumes/kubernetes.io~empty-dir/my vol" {
		t.Errorf("octal escape not undone: %q", got)
	}
	if !ms[0].Shared() {
		t.Errorf("first mount (shared:1) not Shared()")
	}
	if m := (MountInfo{Propagation: "master:3"}); m.Shared() {
		t.Errorf("a slave mount is not shared")
	}
	if m := (MountInfo{Propagation: "shared:2 master:1"}); !m.Shared() {
		t.Errorf("a shared slave is shared")
	}
	if ms[6].Root != "/etc/berth" || ms[6].FSType != "rootfs" {
		t.Errorf("bind mount = %+v", ms[6])
	}
	for _, bad := range []string{"1 0 0:1 / /x rw tmpfs tmpfs\n", "a b 0:1 / /x rw - tmpfs tmpfs\n", "1 0 0:1 / - tmpfs tmpfs\n"} {
		if _, err := ParseMountInfo(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("ParseMountInfo(%q) err = %v, want one naming line 1", bad, err)
		}
	}
}

func TestUnmountPlan(t *testing.T) {
	f, err := os.Open("testdata/mountinfo-node")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ms, err := ParseMountInfo(f)
	if err != nil {
		t.Fatal(err)
	}
	plan, remount := UnmountPlan(ms)
	var got []string
	for _, m := range plan {
		got = append(got, m.Target)
	}
	want := []string{
		"/var/lib/kubelet/pods/x/volumes/kubernetes.io~empty-dir/my vol", "/var/lib/containerd",
		"/etc/berth", "/lib/modules", "/etc", "/var", "/tmp", "/run",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("unmount order\n got %q\nwant %q", got, want)
	}
	if remount {
		t.Errorf("/ is read-only already; no remount wanted")
	}
	ms[0].Options = "rw,relatime"
	if _, remount := UnmountPlan(ms); !remount {
		t.Errorf("a read-write / must be remounted read-only")
	}
}

func TestPlanSwitch(t *testing.T) {
	o := SwitchRootOptions{Image: "/root.erofs", NewRoot: "/newroot/", Carry: []string{"/etc/berth/"}, Release: []string{"/lib/modules/"}}
	early := map[string]bool{"/": true, "/proc": true, "/sys": true, "/dev": true, "/dev/pts": true, "/run": true, "/sys/fs/cgroup": true}
	p, err := planSwitch(o, early)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "move: %s\n", strings.Join(p.Move, " "))
	fmt.Fprintf(&b, "fresh:\n%s", render(p.Fresh))
	fmt.Fprintf(&b, "etc:\n%s", render([]Mount{p.Etc}))
	fmt.Fprintf(&b, "carry:\n%s", render(p.Carry))
	fmt.Fprintf(&b, "writable: %s\n", strings.Join(p.Writable, " "))
	fmt.Fprintf(&b, "release: %s\n", strings.Join(p.Release, " "))
	checkGolden(t, "switch-plan.golden", b.String())

	for _, c := range []struct {
		o    SwitchRootOptions
		want string
	}{
		{SwitchRootOptions{Image: "root.erofs", NewRoot: "/newroot"}, `image path "root.erofs" is not absolute`},
		{SwitchRootOptions{Image: "/root.erofs", NewRoot: "/"}, `new root "/" must be`},
		{SwitchRootOptions{Image: "/root.erofs", NewRoot: "newroot"}, `new root "newroot" must be`},
		{SwitchRootOptions{Image: "/root.erofs", NewRoot: "/newroot", Carry: []string{"/run/berth"}}, "carried path /run/berth lies under /run"},
		{SwitchRootOptions{Image: "/root.erofs", NewRoot: "/newroot", Carry: []string{"lib"}}, `carried path "lib" must be`},
		{SwitchRootOptions{Image: "/root.erofs", NewRoot: "/run/newroot"}, "new root /run/newroot lies under /run"},
		{SwitchRootOptions{Image: "/root.erofs", NewRoot: "/newroot", Release: []string{"/"}}, `released path "/" must be`},
		{SwitchRootOptions{Image: "/root.erofs", NewRoot: "/newroot", Release: []string{"lib/modules"}}, `released path "lib/modules" must be`},
		{SwitchRootOptions{Image: "/root.erofs", NewRoot: "/newroot", Carry: []string{"/lib/modules"}, Release: []string{"/lib"}}, "released path /lib overlaps /lib/modules"},
		{SwitchRootOptions{Image: "/root.erofs", NewRoot: "/newroot", Carry: []string{"/etc/berth"}, Release: []string{"/etc/berth/x"}}, "overlaps /etc/berth"},
		{SwitchRootOptions{Image: "/root.erofs", NewRoot: "/newroot", Release: []string{"/run/x"}}, "overlaps /run"},
	} {
		if _, err := planSwitch(c.o, early); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("planSwitch(%+v) err = %v, want one containing %q", c.o, err, c.want)
		}
	}
}

// release deletes through the old root's handle, says what it freed, and
// skips a path the image does not have.
func TestRelease(t *testing.T) {
	dir := t.TempDir()
	for name, size := range map[string]int{"lib/modules/k/kernel/a.ko": 3000, "lib/modules/k/modules.dep": 40, "init": 7} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	done, n := release(slog.New(slog.DiscardHandler), old, []string{"lib/modules", "not/there"})
	if !slices.Equal(done, []string{"/lib/modules"}) || n != 3040 {
		t.Errorf("release = %v, %d bytes; want [/lib/modules], 3040", done, n)
	}
	if _, err := os.Stat(filepath.Join(dir, "lib/modules")); !os.IsNotExist(err) {
		t.Errorf("lib/modules still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "init")); err != nil {
		t.Errorf("release took more than it was given: %v", err)
	}
}

func TestDetectFSType(t *testing.T) {
	erofs := make([]byte, 2048)
	binary.LittleEndian.PutUint32(erofs[1024:], 0xE0F5E1E2)
	for _, c := range []struct {
		head []byte
		want string
	}{
		{erofs, "erofs"},
		{append([]byte("hsqs"), make([]byte, 100)...), "squashfs"},
		{make([]byte, 2048), ""},
		{erofs[:1027], ""},
		{nil, ""},
	} {
		if got := DetectFSType(c.head); got != c.want {
			t.Errorf("DetectFSType(%d bytes) = %q, want %q", len(c.head), got, c.want)
		}
	}
	p := filepath.Join(t.TempDir(), "junk.img")
	if err := os.WriteFile(p, []byte("not a filesystem"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := detectImage(p); err == nil || !strings.Contains(err.Error(), "junk.img is neither erofs nor squashfs") {
		t.Errorf("detectImage(junk) err = %v", err)
	}
}

func TestEnableControllers(t *testing.T) {
	if got := ControllersToEnable("cpuset cpu io memory hugetlb pids rdma misc\n"); !reflect.DeepEqual(got,
		[]string{"+cpuset", "+cpu", "+io", "+memory", "+hugetlb", "+pids", "+rdma", "+misc"}) {
		t.Errorf("ControllersToEnable = %q", got)
	}
	if got := ControllersToEnable("\n"); len(got) != 0 {
		t.Errorf("no controllers: got %q", got)
	}
	// A plain directory stands in for cgroupfs: each write appends here, where
	// the kernel would take each as one command.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.controllers"), []byte("cpu memory pids\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := EnableControllers(dir); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if string(b) != "+cpu+memory+pids" {
		t.Errorf("written %q, want one write per controller", b)
	}
	if err := EnableControllers(t.TempDir()); err == nil || !strings.Contains(err.Error(), "cgroup.controllers") {
		t.Errorf("missing cgroup.controllers: err = %v", err)
	}
}

func FuzzParseMountInfo(f *testing.F) {
	b, err := os.ReadFile("testdata/mountinfo-node")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(b))
	f.Fuzz(func(t *testing.T, data string) {
		ms, err := ParseMountInfo(strings.NewReader(data))
		if err != nil {
			return
		}
		plan, _ := UnmountPlan(ms)
		if len(plan) > len(ms) {
			t.Fatalf("plan has %d mounts, table %d", len(plan), len(ms))
		}
		for _, m := range plan {
			if m.Target == "/" {
				t.Fatalf("plan unmounts /")
			}
		}
	})
}

func TestTopAt(t *testing.T) {
	ms := []MountInfo{
		{Target: "/run", FSType: "tmpfs"},
		{Target: "/sys/fs/bpf", FSType: "tmpfs"},
		{Target: "/sys/fs/bpf", FSType: "bpf"},
		{Target: "/sys/fs/bpf/sub", FSType: "bpf"},
	}
	if m, ok := TopAt(ms, "/sys/fs/bpf"); !ok || m.FSType != "bpf" {
		t.Errorf("TopAt(/sys/fs/bpf) = %+v, %v: want the bpf mount listed last, which covers the tmpfs", m, ok)
	}
	if m, ok := TopAt(ms, "/sys/fs"); ok {
		t.Errorf("TopAt(/sys/fs) = %+v: want none (no mount at exactly that path)", m)
	}
}
