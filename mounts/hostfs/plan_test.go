package hostfs

import (
	"flag"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berth-node/berth/internal/golden"
	"github.com/berth-node/berth/mounts"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// The mount tables of the boots berth knows, as mountinfo shows them when
// the host phase starts.
const (
	// The initramfs switch: SwitchRoot made the whole tree rshared.
	switchedRoot = `1 0 7:0 / / ro,nodev,relatime shared:1 - erofs /dev/loop0 ro
20 1 0:21 / /run rw,nosuid,nodev shared:2 - tmpfs tmpfs rw,mode=755
21 1 0:22 / /tmp rw,nosuid,nodev shared:3 - tmpfs tmpfs rw
22 1 0:23 / /var rw,relatime shared:4 - tmpfs tmpfs rw,mode=755
23 1 0:24 / /etc rw,nosuid,nodev shared:5 - tmpfs tmpfs rw,mode=755
24 1 0:25 / /mnt rw,nosuid,nodev shared:6 - tmpfs tmpfs rw,mode=755
26 1 0:5 / /dev rw,nosuid shared:8 - devtmpfs devtmpfs rw
28 1 0:4 / /proc rw,nosuid,nodev,noexec shared:10 - proc proc rw
29 1 0:20 / /sys rw,nosuid,nodev,noexec shared:11 - sysfs sysfs rw
30 29 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec shared:12 - cgroup2 cgroup2 rw,nsdelegate
`
	// berth.root=none: the initramfs's rootfs, writable, nothing shared.
	initramfsRoot = `1 1 0:2 / / rw - rootfs rootfs rw
17 1 0:4 / /proc rw,nosuid,nodev,noexec - proc proc rw
18 1 0:20 / /sys rw,nosuid,nodev,noexec - sysfs sysfs rw
19 1 0:5 / /dev rw,nosuid - devtmpfs devtmpfs rw
22 1 0:21 / /run rw,nosuid,nodev - tmpfs tmpfs rw,mode=755
24 18 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec - cgroup2 cgroup2 rw,nsdelegate
`
	// A disk boot with instance store: the data partition's binds and the
	// storage phase's mounts; bpffs and one overlay there already (a
	// second run); the instance-store bind made private by hand.
	diskRootStorage = `1 0 253:0 / / ro,nodev,relatime shared:1 - erofs /dev/dm-0 ro
22 1 0:23 / /var rw,relatime shared:4 - tmpfs tmpfs rw,mode=755
24 1 0:25 / /mnt rw,nosuid,nodev shared:6 - tmpfs tmpfs rw,mode=755
29 1 0:20 / /sys rw,nosuid,nodev,noexec shared:11 - sysfs sysfs rw
40 24 259:3 / /mnt/berth-data rw,nosuid,nodev shared:20 - ext4 /dev/nvme0n1p3 rw
41 22 259:3 /var/lib/kubelet /var/lib/kubelet rw,nosuid,nodev shared:20 - ext4 /dev/nvme0n1p3 rw
42 22 259:3 /var/log /var/log rw,nosuid,nodev shared:20 - ext4 /dev/nvme0n1p3 rw
50 24 253:1 / /mnt/k8s-disks/0 rw,relatime shared:30 - xfs /dev/dm-1 rw
51 22 253:1 /containerd /var/lib/containerd rw,relatime - xfs /dev/dm-1 rw
52 41 253:1 /kubelet /var/lib/kubelet rw,relatime shared:30 - xfs /dev/dm-1 rw
60 29 0:30 / /sys/fs/bpf rw,nosuid,nodev,noexec shared:40 - bpf bpf rw,mode=700
61 1 0:31 / /opt/cni/bin rw,nosuid,nodev shared:41 - overlay overlay rw,lowerdir=/opt/cni/bin
`
)

func table(t *testing.T, s string) []mounts.MountInfo {
	t.Helper()
	ms, err := mounts.ParseMountInfo(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// TestBuildGolden pins the whole plan for each kind of boot.
func TestBuildGolden(t *testing.T) {
	cases := []struct {
		name  string
		facts Facts
	}{
		{"switched-root", Facts{Root: "/", Mounts: table(t, switchedRoot), VarRun: Found{Kind: Absent}, SaveSuffix: "3f1c0e9a"}},
		{"initramfs-root-none", Facts{Root: "/", Mounts: table(t, initramfsRoot), VarRun: Found{Kind: Absent}, SaveSuffix: "3f1c0e9a"}},
		{"disk-instance-store", Facts{Root: "/", Mounts: table(t, diskRootStorage), VarRun: Found{Kind: Symlink, Target: "../run"},
			SaveSuffix: "3f1c0e9a", Shared: []string{"/mnt/berth-data", "/var/lib/kubelet", "/var/log", "/mnt/k8s-disks/0", "/var/lib/containerd", "/var/lib/kubelet"}}},
		{"no-mount-table", Facts{Root: "/", VarRun: Found{Kind: Dir, Entries: 2}, SaveSuffix: "3f1c0e9a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := []byte(Build(c.facts).Describe())
			goldenPath := filepath.Join("testdata", c.name+".golden")
			golden.Check(t, goldenPath, got, *update)
		})
	}
}

// The decisions the goldens encode, stated one by one.
func TestBuildDecisions(t *testing.T) {
	sw := Build(Facts{Root: "/", Mounts: table(t, switchedRoot), VarRun: Found{Kind: Absent}})
	if len(sw.Overlays) != 2 || sw.Overlays[0].Target != CNIBinDir || sw.Overlays[0].Lower != CNIBinDir ||
		sw.Overlays[0].Upper != "/var/lib/berth/overlay/opt-cni-bin/upper" || sw.Overlays[0].Work != "/var/lib/berth/overlay/opt-cni-bin/work" || sw.Overlays[0].Skip != "" {
		t.Errorf("read-only root: overlays = %+v, want /opt/cni/bin over itself with state under /var", sw.Overlays)
	}
	if sw.Overlays[1].Target != CSIDir || sw.Overlays[1].Upper != "/var/lib/berth/overlay/opt-csi/upper" {
		t.Errorf("/opt/csi overlay = %+v", sw.Overlays[1])
	}
	if got := sw.Overlays[0].Data(); got != "lowerdir=/opt/cni/bin,upperdir=/var/lib/berth/overlay/opt-cni-bin/upper,workdir=/var/lib/berth/overlay/opt-cni-bin/work" {
		t.Errorf("overlay data = %q", got)
	}
	if len(sw.MakeShared) != 0 {
		t.Errorf("switched root is rshared already; MakeShared = %q", sw.MakeShared)
	}
	if len(sw.Mounts) != 1 || sw.Mounts[0].FSType != "bpf" || sw.Mounts[0].Target != BPFDir || sw.Mounts[0].Data != "mode=700" {
		t.Errorf("bpffs mount = %+v", sw.Mounts)
	}
	if sw.Link.Action != LinkCreate || sw.Link.Target != "/run" || sw.Link.Path != "/var/run" {
		t.Errorf("link = %+v", sw.Link)
	}
	var dirs []string
	for _, d := range sw.Dirs {
		dirs = append(dirs, d.Path)
	}
	for _, want := range []string{CNIConfDir, PluginsRegistry, KubeletPlugins} {
		if !slices.Contains(dirs, want) {
			t.Errorf("dirs %q lack %s", dirs, want)
		}
	}

	none := Build(Facts{Root: "/", Mounts: table(t, initramfsRoot)})
	for _, o := range none.Overlays {
		if o.Skip == "" || o.Upper != "" {
			t.Errorf("writable root: overlay %+v, want a plain directory", o)
		}
	}
	if !slices.Equal(none.MakeShared, []string{"/", "/sys"}) {
		t.Errorf("private initramfs: MakeShared = %q, want / and /sys", none.MakeShared)
	}

	disk := Build(Facts{Root: "/", Mounts: table(t, diskRootStorage), Shared: []string{"/var/lib/containerd", "/var/lib/kubelet", "", "relative/path"}})
	if !slices.Equal(disk.MakeShared, []string{"/var/lib/containerd"}) {
		t.Errorf("disk: MakeShared = %q, want only the private bind /var/lib/containerd", disk.MakeShared)
	}
	if len(disk.Mounts) != 0 {
		t.Errorf("bpffs mounted already; mounts = %+v", disk.Mounts)
	}
	if disk.Overlays[0].Skip != "mounted already" || disk.Overlays[1].Skip != "" {
		t.Errorf("disk: overlays = %+v", disk.Overlays)
	}

	scratch := Build(Facts{Root: "/tmp/x", Mounts: table(t, "5 1 0:9 / /tmp/x ro - tmpfs tmpfs ro\n")})
	if scratch.Link.Path != "/tmp/x/var/run" || scratch.Link.Target != "/run" {
		t.Errorf("under a scratch root the link is %+v, want /tmp/x/var/run → /run (absolute in the node's view)", scratch.Link)
	}
	if !slices.Equal(scratch.MakeShared, []string{"/tmp/x"}) || scratch.Overlays[0].Upper != "/tmp/x/var/lib/berth/overlay/opt-cni-bin/upper" {
		t.Errorf("scratch root plan = %+v", scratch)
	}
}

func TestLinkActions(t *testing.T) {
	cases := []struct {
		found        Found
		action, save string
	}{
		{Found{Kind: Absent}, LinkCreate, ""},
		{Found{}, LinkCreate, ""},
		{Found{Kind: Symlink, Target: "/run"}, LinkKeep, ""},
		{Found{Kind: Symlink, Target: "../run"}, LinkReplace, ""},
		{Found{Kind: Symlink, Target: "/var/lib/run"}, LinkReplace, ""},
		{Found{Kind: Dir}, LinkRemoveDir, ""},
		{Found{Kind: Dir, Entries: 3}, LinkMoveAside, "/var/run.berth-saved-abcd"},
		{Found{Kind: Dir, Entries: -1}, LinkMoveAside, "/var/run.berth-saved-abcd"},
		{Found{Kind: Other}, LinkMoveAside, "/var/run.berth-saved-abcd"},
		{Found{Kind: Dir, MountPoint: true}, LinkLeave, ""},
	}
	for _, c := range cases {
		p := Build(Facts{Root: "/", VarRun: c.found, SaveSuffix: "abcd"})
		if p.Link.Action != c.action || p.Link.SaveTo != c.save {
			t.Errorf("found %s: action %q save %q, want %q %q", c.found, p.Link.Action, p.Link.SaveTo, c.action, c.save)
		}
		if (c.action == LinkLeave) != (len(p.Problems) > 0) {
			t.Errorf("found %s: problems %q", c.found, p.Problems)
		}
	}
	if p := Build(Facts{VarRun: Found{Kind: Other}}); p.Link.SaveTo != "/var/run.berth-saved-old" {
		t.Errorf("no suffix: SaveTo = %q", p.Link.SaveTo)
	}
}

func TestVerify(t *testing.T) {
	ms := table(t, diskRootStorage)
	pp, err := Verify(ms, []string{"/", "/var/lib/kubelet/plugins", "/var/lib/containerd", "/sys/fs/bpf"}, []string{"/", "/var/lib/kubelet"})
	if err != nil {
		t.Errorf("Verify: %v", err)
	}
	want := []PathPropagation{
		{Path: "/", MountPoint: "/", FSType: "erofs", Propagation: "shared:1", Shared: true},
		{Path: "/var/lib/kubelet/plugins", MountPoint: "/var/lib/kubelet", FSType: "xfs", Propagation: "shared:30", Shared: true},
		{Path: "/var/lib/containerd", MountPoint: "/var/lib/containerd", FSType: "xfs", Propagation: "private"},
		{Path: "/sys/fs/bpf", MountPoint: "/sys/fs/bpf", FSType: "bpf", Propagation: "shared:40", Shared: true},
	}
	if !slices.Equal(pp, want) {
		t.Errorf("Verify =\n%+v\nwant\n%+v", pp, want)
	}
	_, err = Verify(ms, nil, []string{"/var/lib/containerd/io", "/var"})
	if err == nil || !strings.Contains(err.Error(), "/var/lib/containerd/io (mount /var/lib/containerd: private)") || strings.Contains(err.Error(), "/var (") {
		t.Errorf("Verify of a private mount: err = %v", err)
	}
	if _, err := Verify(nil, nil, []string{"/"}); err == nil {
		t.Errorf("Verify with no mount table passed")
	}
}

func TestOverlayName(t *testing.T) {
	for in, want := range map[string]string{"/opt/cni/bin": "opt-cni-bin", "/opt/csi/": "opt-csi", "/a": "a"} {
		if got := overlayName(in); got != want {
			t.Errorf("overlayName(%q) = %q, want %q", in, got, want)
		}
	}
}

// The mount table is the kernel's, but a fuzzed one must not make Build or
// Verify panic, nor put anything outside the root.
func FuzzBuild(f *testing.F) {
	for _, s := range []string{switchedRoot, initramfsRoot, diskRootStorage} {
		f.Add(s, "/", "/var/lib/containerd")
	}
	f.Add("1 0 0:1 / /r ro shared:1 - tmpfs tmpfs ro\n", "/r", "")
	f.Fuzz(func(t *testing.T, mountinfo, root, shared string) {
		ms, err := mounts.ParseMountInfo(strings.NewReader(mountinfo))
		if err != nil {
			return
		}
		if !filepath.IsAbs(root) {
			return
		}
		p := Build(Facts{Root: root, Mounts: ms, Shared: []string{shared}})
		r := filepath.Clean(root)
		in := func(path string) bool { return under(r, path) }
		for _, d := range p.Dirs {
			if !in(d.Path) {
				t.Fatalf("dir %s outside root %s", d.Path, r)
			}
		}
		for _, o := range p.Overlays {
			if !in(o.Target) || (o.Upper != "" && !in(o.Upper)) {
				t.Fatalf("overlay %+v outside root %s", o, r)
			}
		}
		if !in(p.Link.Path) || p.Link.Target != RunDir {
			t.Fatalf("link %+v", p.Link)
		}
		for _, m := range p.MustShare {
			if !in(m) {
				t.Fatalf("must-share path %s outside root %s", m, r)
			}
		}
		_, _ = Verify(ms, p.Check, p.MustShare)
	})
}
