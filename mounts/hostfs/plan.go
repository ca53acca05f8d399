// Package hostfs shapes the node's filesystem the way EKS add-ons expect
// of an Amazon Linux or Bottlerocket host: a writable /opt/cni/bin (and
// /opt/csi) seeded with the image's plugins, /etc/cni/net.d, /var/run as a
// link to /run, bpffs on /sys/fs/bpf, shared mount propagation on /, /sys,
// /var and the instance-store mounts, and kubelet's plugin directories.
// DaemonSets such as aws-node, Cilium, Calico and the EBS CSI driver copy
// binaries into those directories and mount them Bidirectional; they run
// unchanged only when the host looks like this.
//
// Build decides everything from facts gathered first (the mount table,
// what /var/run is); it is pure and unit-tested. Setup does it with thin
// syscall code, and Verify reads the mount table again to say what
// propagation each path really has.
package hostfs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/berth-node/berth/mounts"
)

// The host paths add-ons expect.
const (
	CNIBinDir       = "/opt/cni/bin"
	CSIDir          = "/opt/csi"
	CNIConfDir      = "/etc/cni/net.d"
	VarRun          = "/var/run"
	RunDir          = "/run"
	BPFDir          = "/sys/fs/bpf"
	PluginsRegistry = "/var/lib/kubelet/plugins_registry"
	KubeletPlugins  = "/var/lib/kubelet/plugins"
	// OverlayState holds each overlay's upper and work directories.
	//
	// They are not emptied at boot, because they never need to be: /var is
	// a fresh tmpfs at every boot of every kind (the initramfs switch makes
	// it; a disk boot keeps only /var/lib/kubelet and /var/log on the data
	// partition, see mounts/diskboot.DataBinds), so the upper directories
	// start empty and the image's plugins show through until a DaemonSet
	// writes its own. Those DaemonSets (aws-node, Calico, Cilium) copy their
	// plugins again at every start, so losing the copies at reboot costs
	// nothing, and an image update can never be hidden by a stale copy.
	// Should /var ever persist, the same holds only if this moves to a
	// tmpfs; deleting files berth did not write is not this package's call.
	OverlayState = "/var/lib/berth/overlay"
)

// SharedPaths are the paths whose mounts must be shared so Bidirectional
// hostPath mounts and CSI node plugins work: kubelet refuses Bidirectional
// on a mount that is not shared, and a CSI driver's mounts made in its
// container must reach the host.
func SharedPaths() []string { return []string{"/", "/sys", "/var"} }

// Overlays are the directories made writable over the image's read-only
// copy, as Bottlerocket does: an add-on's installer writes there, the
// image's files stay untouched underneath.
func Overlays() []string { return []string{CNIBinDir, CSIDir} }

// Kinds of what is found at /var/run.
const (
	Absent  = "absent"
	Symlink = "symlink"
	Dir     = "dir"
	Other   = "other"
)

// Found is what a path held before berth touched it.
type Found struct {
	Kind string `json:"kind"`
	// Target is a symlink's target.
	Target string `json:"target,omitempty"`
	// Entries is how many entries a directory held.
	Entries int `json:"entries,omitempty"`
	// MountPoint says something is mounted on it.
	MountPoint bool `json:"mountPoint,omitempty"`
}

func (f Found) String() string {
	switch f.Kind {
	case Symlink:
		return "symlink to " + f.Target
	case Dir:
		if f.Entries < 0 {
			return "unreadable directory"
		}
		if f.Entries == 0 {
			return "empty directory"
		}
		return fmt.Sprintf("directory with %d entries", f.Entries)
	}
	return f.Kind
}

// Facts are what Build decides from, gathered from the machine first.
type Facts struct {
	// Root is the directory the layout is made under: "/" on a node, a
	// scratch directory in the host tests. Link targets stay absolute in
	// the node's own view ("/run"), whatever Root is.
	Root string
	// Mounts is the mount table (/proc/self/mountinfo), in file order.
	Mounts []mounts.MountInfo
	// VarRun is what Root/var/run is now.
	VarRun Found
	// SaveSuffix names where a /var/run that holds data is moved aside
	// (/var/run.berth-saved-SUFFIX): the boot ID's start, unique per boot.
	SaveSuffix string
	// Shared are more mount points that must be shared, besides
	// SharedPaths: the instance-store filesystems and binds, the data
	// partition and its binds. Paths in the node's view (Root is added).
	Shared []string
}

// Link actions.
const (
	LinkKeep      = "keep"              // the right link is there
	LinkCreate    = "create"            // nothing there
	LinkReplace   = "replace"           // another symlink (a relative one breaks when /var is bind-mounted)
	LinkRemoveDir = "replace-empty-dir" // an empty directory: removed
	LinkMoveAside = "move-aside"        // data there: renamed to SaveTo, never deleted
	LinkLeave     = "leave"             // a mount point: left alone, an error
)

// Link is a symlink to make.
type Link struct {
	Path   string `json:"path"`
	Target string `json:"target"`
	Found  Found  `json:"found"`
	Action string `json:"action"`
	SaveTo string `json:"savedTo,omitempty"`
}

// DirSpec is a directory to create if missing, with the mode of the last
// element (parents get 0755).
type DirSpec struct {
	Path string
	Mode os.FileMode
}

// Overlay is one overlayfs mount whose lower layer is the image's
// directory at the same path.
type Overlay struct {
	Target string `json:"target"`
	Lower  string `json:"lower"`
	Upper  string `json:"upper,omitempty"`
	Work   string `json:"work,omitempty"`
	// Skip says why no overlay is mounted: it is mounted already, or the
	// root is writable (berth.root=none), where a plain directory does.
	Skip string `json:"skip,omitempty"`
}

// Data is the overlay's mount options.
func (o Overlay) Data() string {
	return "lowerdir=" + o.Lower + ",upperdir=" + o.Upper + ",workdir=" + o.Work
}

// Plan is what Setup does, in order: directories, the /var/run link,
// overlays, mounts, then propagation (last, so that MS_REC covers the new
// mounts too), then Check is verified.
type Plan struct {
	Dirs     []DirSpec
	Link     Link
	Overlays []Overlay
	Mounts   []mounts.Mount
	// MakeShared are mount points to make rshared (MS_SHARED|MS_REC).
	MakeShared []string
	// MustShare are the paths whose mounts must end up shared.
	MustShare []string
	// Check are the paths whose propagation the report shows.
	Check []string
	// Problems are what the plan cannot fix (a mount point on /var/run).
	Problems []string
}

// overlayFlags: CNI plugins and CSI binaries are executed, so no noexec;
// nothing there needs setuid or device files.
const overlayFlags = unix.MS_NOSUID | unix.MS_NODEV

// Build decides the host layout from the facts. It is pure.
func Build(f Facts) Plan {
	root := f.Root
	if root == "" {
		root = "/"
	}
	at := func(p string) string { return filepath.Join(root, p) }
	var p Plan
	for _, target := range Overlays() {
		t := at(target)
		o := Overlay{Target: t, Lower: t}
		m, ok := containing(f.Mounts, t)
		switch {
		case ok && m.Target == t && m.FSType == "overlay":
			o.Skip = "mounted already"
		case ok && !readOnly(m):
			// berth.root=none: the initramfs is writable, and overlayfs
			// over it buys nothing.
			o.Skip = "on the writable " + m.FSType + " mounted at " + m.Target + ": a plain directory"
			p.Dirs = append(p.Dirs, DirSpec{Path: t, Mode: 0o755})
		default:
			state := at(filepath.Join(OverlayState, overlayName(target)))
			o.Upper, o.Work = filepath.Join(state, "upper"), filepath.Join(state, "work")
			// The upper directory's mode becomes the merged directory's.
			p.Dirs = append(p.Dirs, DirSpec{Path: o.Upper, Mode: 0o755}, DirSpec{Path: o.Work, Mode: 0o700})
		}
		p.Overlays = append(p.Overlays, o)
	}
	// /etc is a tmpfs copy of the image's after the switch: the CNI
	// DaemonSet writes its conflist here. kubelet makes its plugin
	// directories with 0750; the storage phase may have bound instance
	// store over /var/lib/kubelet, which is why this runs after it.
	p.Dirs = append(p.Dirs,
		DirSpec{Path: at(CNIConfDir), Mode: 0o755},
		DirSpec{Path: at(PluginsRegistry), Mode: 0o750},
		DirSpec{Path: at(KubeletPlugins), Mode: 0o750},
	)
	p.Link = planLink(f, at)
	if p.Link.Action == LinkLeave {
		p.Problems = append(p.Problems, fmt.Sprintf("%s is a mount point (%s); not replacing it with a link to %s", p.Link.Path, f.VarRun, RunDir))
	}

	bpf := at(BPFDir)
	if m, ok := mounts.TopAt(f.Mounts, bpf); !ok || m.FSType != "bpf" {
		// As systemd mounts it: only root may pin BPF objects there.
		p.Mounts = append(p.Mounts, mounts.Mount{Source: "bpf", Target: bpf, FSType: "bpf",
			Flags: unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, Data: "mode=700", Mode: 0o700})
	}

	want := slices.Clone(SharedPaths())
	for _, s := range f.Shared {
		// Paths in the node's view, so absolute: a relative one would
		// resolve against Root's parent.
		if filepath.IsAbs(s) && !slices.Contains(want, filepath.Clean(s)) {
			want = append(want, filepath.Clean(s))
		}
	}
	for _, w := range want {
		pw := at(w)
		p.MustShare = append(p.MustShare, pw)
		m, ok := containing(f.Mounts, pw)
		if !ok {
			// No mount table: make the path's mount shared, whatever it is.
			m = mounts.MountInfo{Target: pw}
		} else if m.Shared() {
			continue
		}
		if !slices.Contains(p.MakeShared, m.Target) {
			p.MakeShared = append(p.MakeShared, m.Target)
		}
	}
	p.Check = slices.Clone(p.MustShare)
	for _, c := range []string{bpf, at(CNIBinDir), at(CSIDir), at("/var/lib/kubelet")} {
		if !slices.Contains(p.Check, c) {
			p.Check = append(p.Check, c)
		}
	}
	return p
}

func planLink(f Facts, at func(string) string) Link {
	l := Link{Path: at(VarRun), Target: RunDir, Found: f.VarRun}
	switch {
	case f.VarRun.MountPoint:
		l.Action = LinkLeave
	case f.VarRun.Kind == Absent || f.VarRun.Kind == "":
		l.Action = LinkCreate
	case f.VarRun.Kind == Symlink && f.VarRun.Target == RunDir:
		l.Action = LinkKeep
	case f.VarRun.Kind == Symlink:
		l.Action = LinkReplace
	case f.VarRun.Kind == Dir && f.VarRun.Entries == 0:
		l.Action = LinkRemoveDir
	default:
		// A directory with files (something ran before the link existed,
		// on a /var that persists) or a stray file: keep it for the
		// operator, under a name that says where it came from.
		suffix := f.SaveSuffix
		if suffix == "" {
			suffix = "old"
		}
		l.Action = LinkMoveAside
		l.SaveTo = at(VarRun + ".berth-saved-" + suffix)
	}
	return l
}

// overlayName is a path as one directory name: /opt/cni/bin → opt-cni-bin.
func overlayName(p string) string {
	return strings.ReplaceAll(strings.Trim(filepath.Clean(p), "/"), "/", "-")
}

// containing is the mount a path lies on: the one with the longest target
// that is the path or a parent of it, the last listed (the top one) when
// mounts are stacked.
func containing(ms []mounts.MountInfo, p string) (mounts.MountInfo, bool) {
	var best mounts.MountInfo
	found := false
	for _, m := range ms {
		if !under(m.Target, p) {
			continue
		}
		if !found || len(m.Target) >= len(best.Target) {
			best, found = m, true
		}
	}
	return best, found
}

// under says p is dir or lies under it.
func under(dir, p string) bool {
	return dir == p || dir == "/" || strings.HasPrefix(p, dir+"/")
}

func readOnly(m mounts.MountInfo) bool {
	return slices.Contains(strings.Split(m.Options, ","), "ro")
}

// PathPropagation is one path's mount and its propagation, for the report.
type PathPropagation struct {
	Path        string `json:"path"`
	MountPoint  string `json:"mountPoint"`
	FSType      string `json:"fstype"`
	Propagation string `json:"propagation"`
	Shared      bool   `json:"shared"`
}

// Verify reads each path's propagation from a mount table, and returns an
// error naming each path of mustShare whose mount is not shared.
func Verify(ms []mounts.MountInfo, check, mustShare []string) ([]PathPropagation, error) {
	var out []PathPropagation
	var bad []string
	for _, c := range check {
		m, ok := containing(ms, c)
		pp := PathPropagation{Path: c}
		if ok {
			pp.MountPoint, pp.FSType, pp.Propagation, pp.Shared = m.Target, m.FSType, m.Propagation, m.Shared()
		}
		if pp.Propagation == "" {
			pp.Propagation = "private"
		}
		out = append(out, pp)
	}
	for _, s := range mustShare {
		m, ok := containing(ms, s)
		if !ok || !m.Shared() {
			bad = append(bad, fmt.Sprintf("%s (mount %s: %s)", s, m.Target, orPrivate(m.Propagation)))
		}
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("mounts not shared, so Bidirectional hostPath mounts and CSI will not work there: %s", strings.Join(bad, ", "))
	}
	return out, nil
}

func orPrivate(s string) string {
	if s == "" {
		return "private"
	}
	return s
}

// Describe is the plan as text, one action a line, for the debug log and
// the golden files.
func (p Plan) Describe() string {
	var b strings.Builder
	for _, d := range p.Dirs {
		fmt.Fprintf(&b, "dir %s %04o\n", d.Path, uint32(d.Mode.Perm()))
	}
	fmt.Fprintf(&b, "link %s -> %s: %s (found %s)", p.Link.Path, p.Link.Target, p.Link.Action, p.Link.Found)
	if p.Link.SaveTo != "" {
		fmt.Fprintf(&b, ", saved to %s", p.Link.SaveTo)
	}
	b.WriteString("\n")
	for _, o := range p.Overlays {
		if o.Skip != "" {
			fmt.Fprintf(&b, "overlay %s: none, %s\n", o.Target, o.Skip)
			continue
		}
		fmt.Fprintf(&b, "overlay %s: flags %#x %s\n", o.Target, overlayFlags, o.Data())
	}
	for _, m := range p.Mounts {
		fmt.Fprintf(&b, "mount %s: flags %#x mode %04o\n", m, m.Flags, uint32(m.Mode.Perm()))
	}
	for _, s := range p.MakeShared {
		fmt.Fprintf(&b, "make rshared %s\n", s)
	}
	fmt.Fprintf(&b, "must be shared: %s\n", strings.Join(p.MustShare, " "))
	fmt.Fprintf(&b, "check: %s\n", strings.Join(p.Check, " "))
	for _, pr := range p.Problems {
		fmt.Fprintf(&b, "problem: %s\n", pr)
	}
	return b.String()
}
