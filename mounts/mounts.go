// Package mounts makes and unmakes PID 1's filesystems: the early
// pseudo-filesystems from one declarative table, the switch from the
// initramfs onto the real (erofs) root, and the unmounting at shutdown.
// (Its subfolders handle instance-store disks; they are separate packages.)
//
// Deciding which mounts to make (the early table, the switch-root plan, the
// unmount order) is pure and unit-tested; making them is thin syscall code.
package mounts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Mount is one mount(2) call, with the mode of the mount point directory
// created for it if it is missing.
type Mount struct {
	Source string
	Target string
	FSType string
	Flags  uintptr
	Data   string
	Mode   os.FileMode
}

func (m Mount) String() string {
	return fmt.Sprintf("%s on %s type %s (%s)", m.Source, m.Target, m.FSType, m.Data)
}

const (
	nosuid = unix.MS_NOSUID
	nodev  = unix.MS_NODEV
	noexec = unix.MS_NOEXEC
)

// CgroupRoot is where the early table mounts cgroup2: the one home of
// the path that the supervisor's cgroups and PID 1's controller setup use.
const CgroupRoot = "/sys/fs/cgroup"

// EarlyTable is what PID 1 mounts before anything else, in order (a mount
// comes after the one it sits on). The modes, options and flags are the
// ones systemd and u-root's libinit use, so programs find what they expect:
// devpts as a private instance with ptmx usable by everyone and ptys in the
// tty group (5); cgroup2 with nsdelegate so delegated subtrees (containerd's
// pods) cannot escape their cgroup.
func EarlyTable() []Mount {
	return []Mount{
		{Source: "proc", Target: "/proc", FSType: "proc", Flags: nosuid | nodev | noexec, Mode: 0o555},
		{Source: "sysfs", Target: "/sys", FSType: "sysfs", Flags: nosuid | nodev | noexec, Mode: 0o555},
		{Source: "devtmpfs", Target: "/dev", FSType: "devtmpfs", Flags: nosuid, Data: "mode=0755", Mode: 0o755},
		{Source: "devpts", Target: "/dev/pts", FSType: "devpts", Flags: nosuid | noexec, Data: "newinstance,ptmxmode=0666,gid=5,mode=620", Mode: 0o755},
		{Source: "tmpfs", Target: "/dev/shm", FSType: "tmpfs", Flags: nosuid | nodev, Data: "mode=1777", Mode: os.ModeSticky | 0o777},
		{Source: "tmpfs", Target: "/run", FSType: "tmpfs", Flags: nosuid | nodev, Data: "mode=0755", Mode: 0o755},
		{Source: "tmpfs", Target: "/tmp", FSType: "tmpfs", Flags: nosuid | nodev, Data: "mode=1777", Mode: os.ModeSticky | 0o777},
		{Source: "cgroup2", Target: CgroupRoot, FSType: "cgroup2", Flags: nosuid | nodev | noexec, Data: "nsdelegate", Mode: 0o555},
	}
}

// Apply makes each mount of table in order, creating mount points as
// needed. A target that is a mount point already is left alone, so Apply
// can run again (or after the kernel automounted devtmpfs). It carries on
// after a failure, since later mounts may not need the failed one, and
// returns all failures joined, each naming its mount.
func Apply(ctx context.Context, log *slog.Logger, table []Mount) error {
	log = orDiscard(log)
	var errs []error
	for _, m := range table {
		if err := ctx.Err(); err != nil {
			errs = append(errs, fmt.Errorf("mounting %s: %w", m.Target, err))
			break
		}
		if IsMountPoint(m.Target) {
			log.Debug("already mounted", "target", m.Target)
			continue
		}
		if err := os.MkdirAll(m.Target, m.Mode); err != nil {
			errs = append(errs, fmt.Errorf("creating mount point for %v: %w", m, err))
			continue
		}
		err := unix.Mount(m.Source, m.Target, m.FSType, m.Flags, m.Data)
		switch {
		case err == nil:
			log.Debug("mounted", "target", m.Target, "fstype", m.FSType)
		case errors.Is(err, unix.EBUSY):
			// Mounted already, where mountinfo could not tell us (it needs /proc).
			log.Debug("already mounted", "target", m.Target, "err", err)
		default:
			errs = append(errs, fmt.Errorf("mounting %v: %w", m, err))
		}
	}
	return errors.Join(errs...)
}

// IsMountPoint reports whether path is a mount point: listed in mountinfo
// when /proc is there, else on another device than its parent (which is
// enough for the pseudo-filesystems of the early table).
func IsMountPoint(path string) bool {
	path = filepath.Clean(path)
	if ms, err := ReadMountInfo(); err == nil {
		return mountedTargets(ms)[path]
	}
	var st, pst unix.Stat_t
	if unix.Lstat(path, &st) != nil || unix.Lstat(filepath.Dir(path), &pst) != nil {
		return false
	}
	return path == "/" || st.Dev != pst.Dev
}

// ControllersToEnable turns the content of a cgroup.controllers file into
// the writes that enable each controller for child cgroups, in the
// kernel's order ("+cpuset", "+cpu", ...).
func ControllersToEnable(controllers string) []string {
	var out []string
	for _, c := range strings.Fields(controllers) {
		out = append(out, "+"+c)
	}
	return out
}

// EnableControllers enables, for the children of the cgroup2 directory
// cgroupRoot, every controller available there. Each controller is written
// on its own, so one that cannot be enabled (cpu, with realtime tasks
// around) does not keep the others off; failures come back joined.
func EnableControllers(cgroupRoot string) error {
	avail := filepath.Join(cgroupRoot, "cgroup.controllers")
	b, err := os.ReadFile(avail)
	if err != nil {
		return fmt.Errorf("enabling cgroup controllers: %w", err)
	}
	ctl := filepath.Join(cgroupRoot, "cgroup.subtree_control")
	// subtree_control is a kernel control file, not data: an atomic
	// write-and-rename (fsutil.WriteFileAtomic) cannot apply to it.
	f, err := os.OpenFile(ctl, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("enabling cgroup controllers: %w", err)
	}
	defer f.Close()
	var errs []error
	for _, w := range ControllersToEnable(string(b)) {
		if _, err := f.Write([]byte(w)); err != nil {
			errs = append(errs, fmt.Errorf("writing %q to %s: %w", w, ctl, err))
		}
	}
	return errors.Join(errs...)
}

// orDiscard lets callers pass a nil logger: PID 1 must not panic on one.
func orDiscard(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}
