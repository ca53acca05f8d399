package hostfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-node/berth/mounts"
)

// Options says where to shape the host.
type Options struct {
	// Root is "/" on a node (the default); a scratch directory in tests.
	Root string
	// Shared are more mount points that must be shared (Facts.Shared).
	Shared []string
	// SaveSuffix: Facts.SaveSuffix.
	SaveSuffix string
	// NoBPFPreload says the kernel has no bpf_preload module to load
	// (the module index does not know it). The kernel (6.1) asks for it
	// on every bpffs mount, which runs /sbin/modprobe, berth: a cold exec
	// of an 18 MB binary and an index load, about 1 s under TCG and most
	// of the host phase, to learn what the index already says. With it
	// set, bpffs is mounted with the kernel's module autoloading off for
	// that one mount (ModprobeKnob emptied, then put back), so the request
	// fails at once, as the missing module would have made it fail.
	NoBPFPreload bool
	// ModprobeKnob is DefaultModprobeKnob on a node; tests point it at a
	// scratch file.
	ModprobeKnob string
}

// DefaultModprobeKnob holds the program the kernel runs for a module
// request; empty, the kernel runs nothing and the request fails with
// ENOENT (kernel/kmod.c, since 5.7).
const DefaultModprobeKnob = "/proc/sys/kernel/modprobe"

// Result is the host phase's part of the boot report.
type Result struct {
	Overlays []OverlayResult `json:"overlays"`
	VarRun   LinkResult      `json:"varRun"`
	Dirs     []string        `json:"dirs"`
	Mounts   []MountResult   `json:"mounts"`
	// MadeShared are the mount points made rshared this boot (the rest
	// were shared already, by the switch root).
	MadeShared  []string          `json:"madeShared,omitempty"`
	Propagation []PathPropagation `json:"propagation"`
	Errors      []string          `json:"errors,omitempty"`
	DurationMs  int64             `json:"durationMs"`
}

// OverlayResult is one overlay and what became of it.
type OverlayResult struct {
	Overlay
	// Status: mounted, present (mounted already), dir (a plain directory
	// on a writable root) or failed.
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}

// LinkResult is the /var/run link.
type LinkResult struct {
	Link
	Error string `json:"error,omitempty"`
}

// MountResult is one pseudo-filesystem mount (bpffs).
type MountResult struct {
	Target string `json:"target"`
	FSType string `json:"fstype"`
	Status string `json:"status"` // mounted, present, failed
	Error  string `json:"error,omitempty"`
}

// Run gathers the facts, builds the plan, does it and verifies the
// propagation. Each step's failure is recorded and the others still run:
// a node without bpffs still runs pods that need no BPF. The error joins
// every failure; the Result is never nil.
func Run(ctx context.Context, log *slog.Logger, o Options) (*Result, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	start := time.Now()
	res := &Result{Dirs: []string{}, Overlays: []OverlayResult{}, Mounts: []MountResult{}, Propagation: []PathPropagation{}}
	var errs []error
	fail := func(err error) {
		errs = append(errs, err)
		res.Errors = append(res.Errors, err.Error())
	}
	facts, err := Gather(o)
	if err != nil {
		// Build still decides from what was gathered: a missing mount
		// table means every SharedPaths mount is made shared blindly.
		fail(err)
	}
	p := Build(facts)
	for _, pr := range p.Problems {
		fail(errors.New(pr))
	}
	if err := ctx.Err(); err != nil {
		fail(fmt.Errorf("shaping the host filesystem: %w", err))
		return res, errors.Join(errs...)
	}
	// Step times go to the debug log: the bpffs mount was the slow one,
	// as the kernel (6.1) asks for bpf_preload on every bpffs mount, which
	// runs berth as /sbin/modprobe (about 1 s under TCG at boot), unless
	// NoBPFPreload says not to.
	step := time.Now()
	lap := func(name string) {
		log.Debug("host step done", "step", name, "ms", time.Since(step).Milliseconds())
		step = time.Now()
	}
	lap("plan")
	for _, d := range p.Dirs {
		if err := mkdir(d); err != nil {
			fail(err)
			continue
		}
		res.Dirs = append(res.Dirs, d.Path)
	}
	res.VarRun = LinkResult{Link: p.Link}
	if err := makeLink(p.Link); err != nil {
		res.VarRun.Error = err.Error()
		fail(err)
	} else if p.Link.Action == LinkMoveAside {
		log.Warn("moved what was at /var/run aside to make it a link to /run", "found", p.Link.Found.String(), "saved_to", p.Link.SaveTo)
	}
	lap("dirs and link")
	for _, ov := range p.Overlays {
		r := OverlayResult{Overlay: ov}
		switch {
		case strings.HasPrefix(ov.Skip, "mounted"):
			r.Status = "present"
		case ov.Skip != "":
			r.Status = "dir"
		default:
			if err := mountOverlay(ov); err != nil {
				r.Status, r.Error = "failed", err.Error()
				fail(err)
			} else {
				r.Status = "mounted"
			}
		}
		res.Overlays = append(res.Overlays, r)
	}
	lap("overlays")
	for _, m := range p.Mounts {
		r := MountResult{Target: m.Target, FSType: m.FSType, Status: "mounted"}
		mount := mountFS
		if o.NoBPFPreload && m.FSType == "bpf" {
			knob := o.ModprobeKnob
			if knob == "" {
				knob = DefaultModprobeKnob
			}
			mount = func(m mounts.Mount) error { return withoutModprobe(knob, m, mountFS) }
		}
		if err := mount(m); err != nil {
			r.Status, r.Error = "failed", err.Error()
			fail(err)
		}
		res.Mounts = append(res.Mounts, r)
	}
	if len(p.Mounts) == 0 {
		res.Mounts = append(res.Mounts, MountResult{Target: filepath.Join(rootOf(o), BPFDir), FSType: "bpf", Status: "present"})
	}
	lap("mounts")
	for _, s := range p.MakeShared {
		if err := unix.Mount("", s, "", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
			fail(fmt.Errorf("making the mount at %s rshared: %w", s, err))
			continue
		}
		res.MadeShared = append(res.MadeShared, s)
	}
	lap("propagation")
	ms, err := mounts.ReadMountInfo()
	if err != nil {
		fail(fmt.Errorf("verifying mount propagation: %w", err))
	} else {
		pp, err := Verify(ms, p.Check, p.MustShare)
		res.Propagation = pp
		if err != nil {
			fail(err)
		}
	}
	lap("verify")
	res.DurationMs = time.Since(start).Milliseconds()
	return res, errors.Join(errs...)
}

func rootOf(o Options) string {
	if o.Root == "" {
		return "/"
	}
	return o.Root
}

// Gather reads the facts Build needs. An error leaves the facts it could
// not read empty.
func Gather(o Options) (Facts, error) {
	f := Facts{Root: rootOf(o), Shared: o.Shared, SaveSuffix: o.SaveSuffix}
	var errs []error
	ms, err := mounts.ReadMountInfo()
	if err != nil {
		errs = append(errs, err)
	}
	f.Mounts = ms
	vr := filepath.Join(f.Root, VarRun)
	f.VarRun, err = inspect(vr)
	if err != nil {
		errs = append(errs, err)
	}
	_, f.VarRun.MountPoint = mounts.TopAt(ms, vr)
	return f, errors.Join(errs...)
}

// inspect says what is at p, without following a symlink.
func inspect(p string) (Found, error) {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return Found{Kind: Absent}, nil
	}
	if err != nil {
		return Found{Kind: Other}, fmt.Errorf("looking at %s: %w", p, err)
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		t, err := os.Readlink(p)
		if err != nil {
			return Found{Kind: Other}, fmt.Errorf("reading link %s: %w", p, err)
		}
		return Found{Kind: Symlink, Target: t}, nil
	case fi.IsDir():
		ents, err := os.ReadDir(p)
		if err != nil {
			// Unreadable: count it as holding data, so it is moved, not removed.
			return Found{Kind: Dir, Entries: -1}, fmt.Errorf("listing %s: %w", p, err)
		}
		return Found{Kind: Dir, Entries: len(ents)}, nil
	}
	return Found{Kind: Other}, nil
}

// mkdir makes d.Path with d.Mode (parents 0755); an existing directory
// keeps its mode, since whoever made it may rely on it.
func mkdir(d DirSpec) error {
	if err := os.MkdirAll(filepath.Dir(d.Path), 0o755); err != nil {
		return fmt.Errorf("creating the parents of %s: %w", d.Path, err)
	}
	if err := os.Mkdir(d.Path, d.Mode); err != nil {
		if errors.Is(err, fs.ErrExist) {
			if fi, serr := os.Stat(d.Path); serr == nil && fi.IsDir() {
				return nil
			}
		}
		return fmt.Errorf("creating %s: %w", d.Path, err)
	}
	// Mkdir's mode passes through the umask.
	if err := os.Chmod(d.Path, d.Mode); err != nil {
		return fmt.Errorf("setting the mode of %s: %w", d.Path, err)
	}
	return nil
}

// makeLink does l.Action. The new link is made under a temporary name and
// renamed over the old path, so /var/run is never missing where it was a
// link; a directory cannot be renamed over, so it is moved or removed
// first.
func makeLink(l Link) error {
	switch l.Action {
	case LinkKeep:
		return nil
	case LinkLeave:
		return fmt.Errorf("%s is a mount point; not replacing it with a link to %s", l.Path, l.Target)
	case LinkRemoveDir:
		// Remove, not RemoveAll: only an empty directory goes, and one that
		// gained an entry since it was looked at makes this fail.
		if err := os.Remove(l.Path); err != nil {
			return fmt.Errorf("removing the empty directory %s to link it to %s: %w", l.Path, l.Target, err)
		}
	case LinkMoveAside:
		if _, err := os.Lstat(l.SaveTo); err == nil {
			return fmt.Errorf("%s holds %s and %s exists already; moving neither (make %s a link to %s by hand)", l.Path, l.Found, l.SaveTo, l.Path, l.Target)
		}
		if err := os.Rename(l.Path, l.SaveTo); err != nil {
			return fmt.Errorf("moving %s (%s) aside to %s: %w", l.Path, l.Found, l.SaveTo, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(l.Path), 0o755); err != nil {
		return fmt.Errorf("creating %s for the link %s: %w", filepath.Dir(l.Path), l.Path, err)
	}
	tmp := l.Path + ".berth-tmp"
	_ = os.Remove(tmp)
	if err := os.Symlink(l.Target, tmp); err != nil {
		return fmt.Errorf("linking %s to %s: %w", l.Path, l.Target, err)
	}
	if err := os.Rename(tmp, l.Path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("linking %s to %s: %w", l.Path, l.Target, err)
	}
	return nil
}

// mountOverlay mounts ov on its target. Its lower directory is the
// target itself: the kernel resolves it before the overlay covers it.
func mountOverlay(ov Overlay) error {
	if fi, err := os.Stat(ov.Target); err != nil || !fi.IsDir() {
		return fmt.Errorf("overlay on %s: the root image has no directory there (image/spec.yaml root.dirs): %v", ov.Target, err)
	}
	if err := unix.Mount("overlay", ov.Target, "overlay", overlayFlags, ov.Data()); err != nil {
		hint := ""
		if errors.Is(err, unix.ENODEV) {
			hint = " (is the overlay module loaded?)"
		}
		return fmt.Errorf("mounting overlay on %s (%s)%s: %w", ov.Target, ov.Data(), hint, err)
	}
	return nil
}

// withoutModprobe runs mount(m) with knob (the kernel's modprobe path)
// empty, then puts knob's value back. Nothing else in berth asks the
// kernel for a module meanwhile: the host phase runs after the modules
// phase's loads have ended, and the hotplug loop loads through
// finit_module, not the kernel's requests. When knob cannot be read or
// emptied, the mount goes on as usual, only slower.
func withoutModprobe(knob string, m mounts.Mount, mount func(mounts.Mount) error) error {
	old, err := os.ReadFile(knob)
	if err != nil || len(bytes.TrimSpace(old)) == 0 {
		// Unreadable, or autoloading already off: nothing to put back.
		return mount(m)
	}
	if err := os.WriteFile(knob, []byte("\n"), 0o644); err != nil {
		return mount(m)
	}
	merr := mount(m)
	if err := os.WriteFile(knob, old, 0o644); err != nil {
		return errors.Join(merr, fmt.Errorf("restoring %s to %q after mounting %s: %w; the kernel loads no module on demand (veth, netfilter) until it is",
			knob, strings.TrimSpace(string(old)), m.Target, err))
	}
	return merr
}

// mountFS mounts a pseudo-filesystem, creating its mount point if it can
// (sysfs provides /sys/fs/bpf itself when the kernel has BPF).
func mountFS(m mounts.Mount) error {
	if err := os.MkdirAll(m.Target, m.Mode); err != nil {
		return fmt.Errorf("creating mount point for %v: %w", m, err)
	}
	if err := unix.Mount(m.Source, m.Target, m.FSType, m.Flags, m.Data); err != nil {
		return fmt.Errorf("mounting %v: %w", m, err)
	}
	return nil
}
