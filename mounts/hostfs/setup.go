package hostfs

import (
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
}

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
// propagation: Start, then its Finish. Each step's failure is recorded
// and the others still run: a node without bpffs still runs pods that
// need no BPF. The error joins every failure; the Result is never nil.
func Run(ctx context.Context, log *slog.Logger, o Options) (*Result, error) {
	return Start(ctx, log, o).Finish(ctx)
}

// Started is a layout whose quick steps are done (directories, the
// /var/run link, the overlays, shared propagation) and whose slow ones
// are not: the pseudo-filesystem mounts and the verification. The bpffs
// mount is the slow one, as the kernel (6.1) asks for bpf_preload on
// every bpffs mount, which runs berth as /sbin/modprobe (about 1 s under
// TCG at boot); Finish may run beside other work. Its Result is complete
// only once Finish returns.
type Started struct {
	log   *slog.Logger
	o     Options
	plan  Plan
	res   *Result
	errs  []error
	start time.Time
	step  time.Time
	// stopped: ctx ended before the steps ran; Finish does nothing more.
	stopped bool
}

// Start gathers the facts, builds the plan and does its quick steps.
// Mounts made later under a shared mount (bpffs under /sys) are shared
// from the start, so propagation can be set before them.
func Start(ctx context.Context, log *slog.Logger, o Options) *Started {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := time.Now()
	s := &Started{log: log, o: o, start: now, step: now,
		res: &Result{Dirs: []string{}, Overlays: []OverlayResult{}, Mounts: []MountResult{}, Propagation: []PathPropagation{}}}
	res := s.res
	facts, err := Gather(o)
	if err != nil {
		// Build still decides from what was gathered: a missing mount
		// table means every SharedPaths mount is made shared blindly.
		s.fail(err)
	}
	p := Build(facts)
	s.plan = p
	for _, pr := range p.Problems {
		s.fail(errors.New(pr))
	}
	if err := ctx.Err(); err != nil {
		s.fail(fmt.Errorf("shaping the host filesystem: %w", err))
		s.stopped = true
		return s
	}
	// Step times go to the debug log.
	s.lap("plan")
	for _, d := range p.Dirs {
		if err := mkdir(d); err != nil {
			s.fail(err)
			continue
		}
		res.Dirs = append(res.Dirs, d.Path)
	}
	res.VarRun = LinkResult{Link: p.Link}
	if err := makeLink(p.Link); err != nil {
		res.VarRun.Error = err.Error()
		s.fail(err)
	} else if p.Link.Action == LinkMoveAside {
		log.Warn("moved what was at /var/run aside to make it a link to /run", "found", p.Link.Found.String(), "saved_to", p.Link.SaveTo)
	}
	s.lap("dirs and link")
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
				s.fail(err)
			} else {
				r.Status = "mounted"
			}
		}
		res.Overlays = append(res.Overlays, r)
	}
	s.lap("overlays")
	for _, sh := range p.MakeShared {
		if err := unix.Mount("", sh, "", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
			s.fail(fmt.Errorf("making the mount at %s rshared: %w", sh, err))
			continue
		}
		res.MadeShared = append(res.MadeShared, sh)
	}
	s.lap("propagation")
	return s
}

// Err joins the failures so far: after Start, those of the quick steps.
func (s *Started) Err() error { return errors.Join(s.errs...) }

// Result is the Result so far: complete once Finish has returned. The
// caller may publish the pointer at once; Finish fills in the rest.
func (s *Started) Result() *Result { return s.res }

// Finish makes the pseudo-filesystem mounts (bpffs), verifies the
// propagation and returns the whole Result, with every failure of both
// halves joined in the error.
func (s *Started) Finish(ctx context.Context) (*Result, error) {
	res, p := s.res, s.plan
	if s.stopped {
		return res, errors.Join(s.errs...)
	}
	for _, m := range p.Mounts {
		r := MountResult{Target: m.Target, FSType: m.FSType, Status: "mounted"}
		if err := mountFS(m); err != nil {
			r.Status, r.Error = "failed", err.Error()
			s.fail(err)
		}
		res.Mounts = append(res.Mounts, r)
	}
	if len(p.Mounts) == 0 {
		res.Mounts = append(res.Mounts, MountResult{Target: filepath.Join(rootOf(s.o), BPFDir), FSType: "bpf", Status: "present"})
	}
	s.lap("mounts")
	ms, err := mounts.ReadMountInfo()
	if err != nil {
		s.fail(fmt.Errorf("verifying mount propagation: %w", err))
	} else {
		pp, err := Verify(ms, p.Check, p.MustShare)
		res.Propagation = pp
		if err != nil {
			s.fail(err)
		}
	}
	s.lap("verify")
	res.DurationMs = time.Since(s.start).Milliseconds()
	return res, errors.Join(s.errs...)
}

func (s *Started) fail(err error) {
	s.errs = append(s.errs, err)
	s.res.Errors = append(s.res.Errors, err.Error())
}

func (s *Started) lap(name string) {
	s.log.Debug("host step done", "step", name, "ms", time.Since(s.step).Milliseconds())
	s.step = time.Now()
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
	_, f.VarRun.MountPoint = top(ms, vr)
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
