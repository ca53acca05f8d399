package mounts

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/berth-node/berth/internal/fsutil"
	"golang.org/x/sys/unix"
)

// SwitchRootOptions says what to switch to.
type SwitchRootOptions struct {
	// Image is the root filesystem image (erofs), e.g. /root.erofs, or,
	// with BlockDevice, the block device holding it (e.g. /dev/dm-0).
	Image string
	// BlockDevice says Image is a block device (the dm-verity device of a
	// disk boot): it is mounted as it is, with no loop device.
	BlockDevice bool
	// NewRoot is the empty directory it is mounted on, e.g. /newroot.
	NewRoot string
	// Carry are directories of the initramfs that stay visible at the same
	// path in the new root, bind-mounted read-only (e.g. /lib/modules,
	// /etc/berth). Their mount points must exist in the image, or lie in a
	// writable part of it (/etc, /var, /tmp).
	Carry []string
	// Release are directories of the initramfs that the new root has its
	// own copy of (the kernel modules). The switch keeps a handle on the
	// old root in its result, and SwitchResult.ReleaseOld deletes them
	// through it, so that their memory goes back to the kernel: the
	// initramfs is RAM that nothing else ever frees. Deleting is left to
	// the caller, to run off boot's path.
	Release []string
}

// SwitchResult goes into the boot report.
type SwitchResult struct {
	Image      string `json:"image"`
	FSType     string `json:"fsType"`
	LoopDevice string `json:"loopDevice,omitempty"`
	// Verity is set when the root is a dm-verity device (a disk boot).
	Verity *VerityRoot `json:"verity,omitempty"`
	// Data is the disk image's data partition (a disk boot).
	Data     *DataPartition `json:"data,omitempty"`
	Writable []string       `json:"writable"`
	// Released are the initramfs directories deleted after the switch,
	// and ReleasedBytes the size of the files in them: ReleaseOld's
	// results, which its caller records here.
	Released      []string `json:"released,omitempty"`
	ReleasedBytes int64    `json:"releasedBytes,omitempty"`
	DurationMs    int64    `json:"durationMs"`

	// old is the handle on the initramfs and release what to delete
	// through it (ReleaseOld).
	old     *os.Root
	release []string
}

// ReleaseOld deletes SwitchRootOptions.Release from the old root and
// returns the paths it deleted with the bytes their files held; a path
// the image lacks is skipped and a failure is logged. It closes the
// handle on the old root, so a second call does nothing. It may run on any
// goroutine, but not beside another ReleaseOld of the same result.
func (r *SwitchResult) ReleaseOld(log *slog.Logger) ([]string, int64) {
	if r == nil || r.old == nil {
		return nil, 0
	}
	defer func() {
		r.old.Close()
		r.old = nil
	}()
	return release(orDiscard(log), r.old, r.release)
}

// VerityRoot describes a root mounted from a dm-verity device, for the
// boot report.
type VerityRoot struct {
	Partition string `json:"partition"` // e.g. /dev/nvme0n1p2
	// Slot is the disk image's root slot ("a" or "b") the partition is;
	// empty for a direct-kernel boot's root disk.
	Slot string `json:"slot,omitempty"`
	// SlotBy says how the slot was found: "hash" (its tree has the
	// sealed root hash) or "hint" (the command line's berth.slot=, which
	// older images seal, named it, and its tree has the root hash).
	SlotBy   string `json:"slotBy,omitempty"`
	Device   string `json:"device"` // e.g. /dev/dm-0
	RootHash string `json:"rootHash"`
	// Verified says the whole device was read once before the switch, so
	// every block matched the root hash.
	Verified  bool  `json:"verified"`
	SetupMs   int64 `json:"setupMs"`
	VerifyMs  int64 `json:"verifyMs"`
	DataBytes int64 `json:"dataBytes"`
}

// DataPartition is the disk image's persistent partition, as berth set
// it up at this boot, for the boot report.
type DataPartition struct {
	Partition string `json:"partition"`
	Disk      string `json:"disk"`
	// Grown says the partition was grown to the disk's end this boot.
	Grown bool `json:"grown"`
	// Formatted says mkfs ran this boot (a blank partition: first boot).
	Formatted  bool     `json:"formatted"`
	SizeBytes  int64    `json:"sizeBytes"`
	Mount      string   `json:"mount"`
	Binds      []string `json:"binds"`
	DurationMs int64    `json:"durationMs"`
	Error      string   `json:"error,omitempty"`
	// Ignored are berth-data partitions on other disks than the root's,
	// left untouched, e.g. "/dev/nvme1n1p3 (not on the root disk
	// /dev/nvme0n1)".
	Ignored []string `json:"ignored,omitempty"`
}

// movedEarly are the early mounts that move into the new root when the old
// root has them (their submounts, /dev/pts or /sys/fs/cgroup, move along).
// /run and /tmp move rather than being made afresh, so that what berth wrote
// there before the switch (/run/berth) stays.
func movedEarly() []string { return []string{"/run", "/tmp", "/dev", "/proc", "/sys"} }

// switchPlan is what SwitchRoot will do, decided from the options and the
// old root's mount points before anything is touched.
type switchPlan struct {
	// Move: old-root mount points moved to the same path under NewRoot.
	Move []string
	// Fresh: tmpfs mounts made under NewRoot.
	Fresh []Mount
	// Etc: the tmpfs mounted on NewRoot/etc, filled with the image's /etc.
	Etc Mount
	// Carry: read-only bind mounts from the old root into NewRoot.
	Carry []Mount
	// Writable: the paths in the new root that are writable.
	Writable []string
	// Release: old-root paths, relative to its /, deleted after the switch.
	Release []string
}

func planSwitch(o SwitchRootOptions, oldMounted map[string]bool) (switchPlan, error) {
	var p switchPlan
	if !filepath.IsAbs(o.Image) {
		return p, fmt.Errorf("switch root: image path %q is not absolute", o.Image)
	}
	nr := filepath.Clean(o.NewRoot)
	if !filepath.IsAbs(o.NewRoot) || nr == "/" {
		return p, fmt.Errorf("switch root: new root %q must be an absolute directory other than /", o.NewRoot)
	}
	under := func(p string) string { return filepath.Join(nr, p) }
	for _, m := range movedEarly() {
		if oldMounted[m] {
			if underAny(nr, m) {
				return p, fmt.Errorf("switch root: new root %s lies under %s, which has to move into it", nr, m)
			}
			p.Move = append(p.Move, m)
		}
	}
	// /var must be a tmpfs, not overlayfs: containerd's overlay snapshotter
	// puts its upper dirs there, and overlayfs refuses an upper dir that is
	// itself on overlayfs. That is also why / is erofs plus tmpfs mounts
	// rather than one overlay.
	// /mnt is where instance-store filesystems get their mount points
	// (nodeadm's /mnt/k8s-disks/N), so it must be writable too.
	for _, d := range []string{"/run", "/tmp", "/var", "/mnt"} {
		if slices.Contains(p.Move, d) {
			continue
		}
		m := Mount{Source: "tmpfs", Target: under(d), FSType: "tmpfs", Flags: nosuid | nodev, Data: "mode=0755", Mode: 0o755}
		switch d {
		case "/tmp":
			m.Data, m.Mode = "mode=1777", os.ModeSticky|0o777
		case "/var":
			// Container root filesystems are overlays with upper dirs in
			// /var: nosuid or nodev here would surprise images that need them.
			// Without instance store, /var holds images and pod data, and
			// kubelet refuses to start when its ephemeral-storage reservation
			// exceeds the filesystem: tmpfs's default half of memory is too
			// small on small nodes. The size is a limit, not an allocation.
			m.Flags = 0
			m.Data = "mode=0755,size=90%"
		case "/mnt":
			// Only mount points live here.
			m.Data = "mode=0755,size=1m"
		}
		p.Fresh = append(p.Fresh, m)
	}
	p.Etc = Mount{Source: "tmpfs", Target: under("/etc"), FSType: "tmpfs", Flags: nosuid | nodev, Mode: 0o755}
	for _, c := range o.Carry {
		cc := filepath.Clean(c)
		if !filepath.IsAbs(c) || cc == "/" {
			return p, fmt.Errorf("switch root: carried path %q must be an absolute path other than /", c)
		}
		for _, m := range p.Move {
			if cc == m || strings.HasPrefix(cc, m+"/") {
				return p, fmt.Errorf("switch root: carried path %s lies under %s, which moves into the new root whole", c, m)
			}
		}
		p.Carry = append(p.Carry, Mount{Source: cc, Target: under(cc), Flags: unix.MS_BIND | unix.MS_REC, Mode: 0o755})
	}
	for _, r := range o.Release {
		rc := filepath.Clean(r)
		if !filepath.IsAbs(r) || rc == "/" {
			return p, fmt.Errorf("switch root: released path %q must be an absolute path other than /", r)
		}
		for _, keep := range append(slices.Clone(p.Move), o.Carry...) {
			keep = filepath.Clean(keep)
			if underAny(rc, keep) || underAny(keep, rc) {
				return p, fmt.Errorf("switch root: released path %s overlaps %s, which the new root keeps using", r, keep)
			}
		}
		p.Release = append(p.Release, strings.TrimPrefix(rc, "/"))
	}
	p.Writable = []string{"/etc", "/run", "/tmp", "/var"}
	return p, nil
}

// SwitchRoot makes the root image the root of the system, as switch_root
// does, because runc cannot pivot_root out of the initramfs's rootfs
// ("pivot_root .: invalid argument") and so no container could start there.
//
// The image is attached read-only to a loop device and mounted (erofs) on
// NewRoot; /var, and /run and /tmp unless the old root has them, get fresh
// tmpfs mounts; /etc becomes a tmpfs holding a copy of the image's /etc (it
// is small) so that berth can write kubelet and containerd configs there;
// the Carry paths are bind-mounted read-only; the early mounts (/run, /tmp,
// /dev, /proc, /sys) move over; then NewRoot is moved onto / and chrooted
// into. The initramfs itself cannot be freed afterwards, unlike with
// switch_root: the loop device reads the root image from it.
//
// Each failure names its step and path. Before the early mounts move, a
// failure leaves the old root usable; if a move or the final switch fails,
// the mounts already moved are moved back. A call after a failed one starts
// over, detaching what the failed one left on NewRoot.
func SwitchRoot(ctx context.Context, log *slog.Logger, o SwitchRootOptions) (*SwitchResult, error) {
	log = orDiscard(log)
	start := time.Now()
	ms, err := ReadMountInfo()
	if err != nil {
		return nil, fmt.Errorf("switch root: %w", err)
	}
	plan, err := planSwitch(o, mountedTargets(ms))
	if err != nil {
		return nil, err
	}
	nr := filepath.Clean(o.NewRoot)
	fstype, err := detectImage(o.Image)
	if err != nil {
		return nil, fmt.Errorf("switch root: %w", err)
	}
	if mountedTargets(ms)[nr] {
		log.Warn("switch root: new root is mounted already (earlier attempt?); detaching it", "path", nr)
		if err := unix.Unmount(nr, unix.MNT_DETACH); err != nil {
			return nil, fmt.Errorf("switch root: detaching old mount on %s: %w", nr, err)
		}
	}
	if err := os.MkdirAll(nr, 0o755); err != nil {
		return nil, fmt.Errorf("switch root: creating %s: %w", nr, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("switch root: %w", err)
	}

	dev := o.Image
	loopPath := ""
	if !o.BlockDevice {
		loop, err := attachLoop(o.Image)
		if err != nil {
			return nil, fmt.Errorf("switch root: %w", err)
		}
		// The mount takes its own reference; autoclear detaches the loop
		// device when it is unmounted.
		defer loop.Close()
		dev, loopPath = loop.Path, loop.Path
	}
	if err := unix.Mount(dev, nr, fstype, unix.MS_RDONLY|unix.MS_NODEV, ""); err != nil {
		hint := ""
		if errors.Is(err, unix.ENODEV) {
			hint = " (is the " + fstype + " module loaded?)"
		}
		return nil, fmt.Errorf("switch root: mounting %s (%s on %s) on %s%s: %w", fstype, o.Image, dev, nr, hint, err)
	}
	res := &SwitchResult{Image: o.Image, FSType: fstype, LoopDevice: loopPath, Writable: plan.Writable}
	// From here on a failure leaves NewRoot mounted; a later call detaches it.

	for _, m := range plan.Fresh {
		if err := mountOn(m); err != nil {
			return nil, fmt.Errorf("switch root: %w", err)
		}
	}
	if err := writableEtc(plan.Etc); err != nil {
		return nil, fmt.Errorf("switch root: %w", err)
	}
	for _, m := range plan.Carry {
		if err := bindReadOnly(log, m); err != nil {
			return nil, fmt.Errorf("switch root: %w", err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("switch root: before moving the early mounts: %w", err)
	}

	var moved []string
	rollback := func() {
		for i := len(moved) - 1; i >= 0; i-- {
			if err := unix.Mount(filepath.Join(nr, moved[i]), moved[i], "", unix.MS_MOVE, ""); err != nil {
				log.Error("switch root: moving back failed", "path", moved[i], "err", err)
			}
		}
	}
	// The handle to the old root outlives the switch: releasing goes
	// through it once / is the new root.
	var old *os.Root
	if len(plan.Release) > 0 {
		if old, err = os.OpenRoot("/"); err != nil {
			log.Warn("switch root: the initramfs's copies stay in memory: opening the old root", "err", err)
		}
	}
	closeOld := func() {
		if old != nil {
			old.Close()
		}
	}
	for _, m := range plan.Move {
		dst := filepath.Join(nr, m)
		if err := unix.Mount(m, dst, "", unix.MS_MOVE, ""); err != nil {
			rollback()
			closeOld()
			return nil, fmt.Errorf("switch root: moving %s to %s (does the image have %s?): %w", m, dst, m, err)
		}
		moved = append(moved, m)
	}
	if err := enterRoot(nr); err != nil {
		rollback()
		closeOld()
		return nil, fmt.Errorf("switch root: %w", err)
	}
	// Like systemd, make the whole tree shared, so that mounts kubelet and
	// containerd make propagate into pods that ask for it.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SHARED, ""); err != nil {
		log.Warn("switch root: making / shared failed; mount propagation into pods will not work", "err", err)
	}
	res.old, res.release = old, plan.Release
	res.DurationMs = time.Since(start).Milliseconds()
	log.Info("switched root", "image", o.Image, "fstype", fstype, "loop", loopPath, "ms", res.DurationMs)
	return res, nil
}

// release deletes each path under old (the initramfs, no longer /) and
// returns those it deleted, with the bytes their files held.
func release(log *slog.Logger, old *os.Root, paths []string) (done []string, bytes int64) {
	for _, p := range paths {
		var n int64
		err := fs.WalkDir(old.FS(), p, func(_ string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Type().IsRegular() {
				if fi, err := d.Info(); err == nil {
					n += fi.Size()
				}
			}
			return nil
		})
		if errors.Is(err, fs.ErrNotExist) {
			continue // an image without it
		}
		if err == nil {
			err = old.RemoveAll(p)
		}
		if err != nil {
			log.Warn("switch root: releasing the initramfs's copy", "path", "/"+p, "err", err)
			continue
		}
		done, bytes = append(done, "/"+p), bytes+n
	}
	return done, bytes
}

// enterRoot is switch_root's core: the mount on dir becomes /.
func enterRoot(dir string) error {
	if err := unix.Chdir(dir); err != nil {
		return fmt.Errorf("chdir %s: %w", dir, err)
	}
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("moving %s onto /: %w", dir, err)
	}
	if err := unix.Chroot("."); err != nil {
		// The mount moved already: there is no undoing that; say so.
		return fmt.Errorf("chroot into %s after moving it onto / (the system is half switched): %w", dir, err)
	}
	if err := unix.Chdir("/"); err != nil {
		return fmt.Errorf("chdir / in the new root: %w", err)
	}
	return nil
}

// mountOn mounts m on a directory that must exist (the root image is
// read-only, so a missing one cannot be created: the image builder must).
func mountOn(m Mount) error {
	if fi, err := os.Stat(m.Target); err != nil || !fi.IsDir() {
		return fmt.Errorf("mounting %s on %s: the root image has no directory there: %v", m.FSType, m.Target, err)
	}
	if err := unix.Mount(m.Source, m.Target, m.FSType, m.Flags, m.Data); err != nil {
		return fmt.Errorf("mounting %v: %w", m, err)
	}
	return nil
}

// writableEtc mounts a tmpfs on the image's /etc and copies the image's
// /etc into it. The copy reads through a directory handle opened before the
// tmpfs hides the image's /etc.
func writableEtc(m Mount) error {
	src, err := os.OpenRoot(m.Target)
	if err != nil {
		return fmt.Errorf("making /etc writable: opening the image's /etc: %w", err)
	}
	defer src.Close()
	fi, err := src.Stat(".")
	if err != nil {
		return fmt.Errorf("making /etc writable: %w", err)
	}
	m.Data = fmt.Sprintf("mode=%04o", unixMode(fi.Mode()))
	if err := mountOn(m); err != nil {
		return fmt.Errorf("making /etc writable: %w", err)
	}
	if err := copyTree(src, m.Target); err != nil {
		return fmt.Errorf("making /etc writable: copying the image's /etc to %s: %w", m.Target, err)
	}
	return nil
}

// copyTree copies a directory tree (files, directories, symlinks; modes
// and owners) from src into the existing directory dst.
func copyTree(src *os.Root, dst string) error {
	return fs.WalkDir(src.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		fi, err := src.Lstat(p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, filepath.FromSlash(p))
		switch {
		case fi.IsDir():
			if err := os.Mkdir(to, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			if err := os.Chmod(to, fi.Mode()&(fs.ModePerm|fs.ModeSticky|fs.ModeSetuid|fs.ModeSetgid)); err != nil {
				return err
			}
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := src.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, to); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			data, err := src.ReadFile(p)
			if err != nil {
				return err
			}
			if err := fsutil.WriteFileAtomic(to, data, fi.Mode()&(fs.ModePerm|fs.ModeSticky|fs.ModeSetuid|fs.ModeSetgid)); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: unsupported file type %v", path.Join("/etc", p), fi.Mode().Type())
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			if err := os.Lchown(to, int(st.Uid), int(st.Gid)); err != nil {
				return err
			}
		}
		return nil
	})
}

// unixMode turns an os.FileMode's permission bits into chmod(2) bits.
func unixMode(m os.FileMode) uint32 {
	v := uint32(m.Perm())
	if m&os.ModeSticky != 0 {
		v |= unix.S_ISVTX
	}
	if m&os.ModeSetgid != 0 {
		v |= unix.S_ISGID
	}
	if m&os.ModeSetuid != 0 {
		v |= unix.S_ISUID
	}
	return v
}

// bindReadOnly bind-mounts m.Source on m.Target, creating the target where
// the new root is writable, then makes it read-only. A bind mount's flags
// can only be changed by a remount; failing that, it stays writable, which
// is logged, not fatal.
func bindReadOnly(log *slog.Logger, m Mount) error {
	fi, err := os.Stat(m.Source)
	if err != nil {
		return fmt.Errorf("carrying %s into the new root: %w", m.Source, err)
	}
	if fi.IsDir() {
		err = os.MkdirAll(m.Target, m.Mode)
	} else {
		err = os.MkdirAll(filepath.Dir(m.Target), m.Mode)
		if err == nil {
			var f *os.File
			if f, err = os.OpenFile(m.Target, os.O_CREATE|os.O_RDONLY, 0o644); err == nil {
				f.Close()
			}
		}
	}
	if err != nil {
		return fmt.Errorf("carrying %s: creating mount point %s (it must exist in the root image, or lie in /etc, /var or /tmp): %w", m.Source, m.Target, err)
	}
	if err := unix.Mount(m.Source, m.Target, "", m.Flags, ""); err != nil {
		return fmt.Errorf("carrying %s: bind-mounting it on %s: %w", m.Source, m.Target, err)
	}
	if err := unix.Mount("", m.Target, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		log.Warn("switch root: carried path stays writable", "path", m.Target, "err", err)
	}
	return nil
}
