package cgroup

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestPlan(t *testing.T) {
	p, err := Plan("/sys/fs/cgroup", "/runtime.slice/kubelet")
	if err != nil {
		t.Fatal(err)
	}
	want := Placement{
		Group:   "/runtime.slice/kubelet",
		Dir:     "/sys/fs/cgroup/runtime.slice/kubelet",
		Parents: []string{"/sys/fs/cgroup", "/sys/fs/cgroup/runtime.slice"},
	}
	if p.Group != want.Group || p.Dir != want.Dir || !slices.Equal(p.Parents, want.Parents) {
		t.Errorf("Plan = %+v, want %+v", p, want)
	}
	p, err = Plan("/cg", "/containerd")
	if err != nil || p.Dir != "/cg/containerd" || !slices.Equal(p.Parents, []string{"/cg"}) {
		t.Errorf("Plan(/containerd) = %+v, %v", p, err)
	}
}

func TestPlanRejects(t *testing.T) {
	for _, g := range []string{"", "/", "runtime.slice/kubelet", "/a/../b", "/a//b", "/a/", "/a/cgroup.procs", "/./a"} {
		if p, err := Plan("/sys/fs/cgroup", g); err == nil {
			t.Errorf("Plan(%q) = %+v, want an error", g, p)
		} else if !strings.Contains(err.Error(), "cgroup") {
			t.Errorf("Plan(%q) error %q does not say it is about a cgroup", g, err)
		}
	}
}

func TestControllers(t *testing.T) {
	got := Controllers("cpuset cpu io memory hugetlb pids rdma misc\n", Wanted())
	if want := []string{"cpu", "cpuset", "io", "memory", "pids", "hugetlb"}; !slices.Equal(got, want) {
		t.Errorf("Controllers = %v, want %v", got, want)
	}
	if got := Controllers("", Wanted()); len(got) != 0 {
		t.Errorf("Controllers(none) = %v", got)
	}
	if got := Controllers("memory rdma", Wanted()); !slices.Equal(got, []string{"memory"}) {
		t.Errorf("Controllers(memory rdma) = %v", got)
	}
}

// cgroup2Root returns a writable cgroup2 mount: /sys/fs/cgroup when it is
// one, else a private mount of the hierarchy (a cgroup v1 host, like the
// development machine, still lets root mount cgroup2 beside it).
func cgroup2Root(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test creates cgroups and needs root (CI runs it as root)")
	}
	var st unix.Statfs_t
	if err := unix.Statfs(DefaultRoot, &st); err == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		return DefaultRoot
	}
	dir := t.TempDir()
	if err := unix.Mount("none", dir, "cgroup2", 0, ""); err != nil {
		t.Fatalf("mounting cgroup2 at %s: %v", dir, err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

func TestPrepare(t *testing.T) {
	root := cgroup2Root(t)
	slice := "/berth-test-" + strings.ReplaceAll(t.Name(), "/", "-")
	p, err := Plan(root, slice+"/svc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		Remove(p)
		os.Remove(filepath.Dir(p.Dir))
	})
	f, err := Prepare(slog.New(slog.DiscardHandler), p)
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	defer f.Close()
	if _, err := os.Stat(filepath.Join(p.Dir, "cgroup.procs")); err != nil {
		t.Errorf("group not created: %v", err)
	}
	// Every wanted controller the root offers is enabled for the slice.
	avail, _ := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
	sub, err := os.ReadFile(filepath.Join(root, slice, "cgroup.subtree_control"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range Controllers(string(avail), Wanted()) {
		if !slices.Contains(strings.Fields(string(sub)), c) {
			t.Errorf("controller %s offered by the root but not enabled in %s (subtree_control %q)", c, slice, sub)
		}
	}
	// Preparing again is fine: the service restarts into the same group.
	f2, err := Prepare(slog.New(slog.DiscardHandler), p)
	if err != nil {
		t.Fatalf("second Prepare: %v", err)
	}
	f2.Close()
	if err := Remove(p); err != nil {
		t.Errorf("Remove: %v", err)
	}
}

func TestPrepareNotCgroup(t *testing.T) {
	p, err := Plan(t.TempDir(), "/a/b")
	if err != nil {
		t.Fatal(err)
	}
	if f, err := Prepare(slog.New(slog.DiscardHandler), p); err == nil {
		f.Close()
		t.Fatal("Prepare on a plain directory succeeded")
	} else if !strings.Contains(err.Error(), "not a cgroup2 directory") {
		t.Errorf("error %q does not say the directory is not cgroup2", err)
	}
}
