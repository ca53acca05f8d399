package mounts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/berth-node/berth/internal/safe"
	"golang.org/x/sys/unix"
)

// unmountTimeout bounds UnmountAll: a hung unmount (a dead network
// filesystem, a stuck disk) must not keep the machine from powering off.
const unmountTimeout = 15 * time.Second

// apiFSTypes are kernel interfaces, not storage: nothing to flush, and the
// shutdown itself still uses them (/proc to list processes, /dev/console).
func apiFSTypes() []string {
	return []string{
		"autofs", "binfmt_misc", "bpf", "cgroup", "cgroup2", "configfs", "debugfs", "devpts", "devtmpfs",
		"efivarfs", "fusectl", "hugetlbfs", "mqueue", "proc", "pstore", "securityfs", "sysfs", "tracefs",
	}
}

// UnmountPlan decides the shutdown's unmounts from the mount table: every
// mount but / and the API filesystems (and anything under /proc, /sys or
// /dev), children before parents (mountinfo lists parents first, so the
// reverse of its order); and whether / needs a read-only remount.
func UnmountPlan(ms []MountInfo) (unmount []MountInfo, remountRoot bool) {
	for i := len(ms) - 1; i >= 0; i-- {
		m := ms[i]
		switch {
		case m.Target == "/":
			remountRoot = remountRoot || !slices.Contains(strings.Split(m.Options, ","), "ro")
		case slices.Contains(apiFSTypes(), m.FSType):
		case underAny(m.Target, "/proc", "/sys", "/dev"):
		default:
			unmount = append(unmount, m)
		}
	}
	return unmount, remountRoot
}

func underAny(p string, dirs ...string) bool {
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// UnmountAll unmounts what UnmountPlan lists; a mount that is busy is
// remounted read-only (which flushes it) and detached. Then it syncs and
// remounts / read-only. It is bounded by a deadline: a hung unmount is
// abandoned, still blocked in the kernel, so that the caller can go on to
// reboot(2). Its error is for the log; the shutdown must go on regardless.
func UnmountAll(ctx context.Context, log *slog.Logger) error {
	return boundedUnmount(ctx, orDiscard(log), unmountAll)
}

// boundedUnmount runs unmount on a goroutine of its own and waits for it
// until unmountTimeout. A panic there is logged with its stack and is the
// unmount's error. One send, unmount's or its panic's (unmount's is the
// goroutine's last statement: nothing can panic after it), into room for
// one, so an abandoned goroutine never blocks on it.
func boundedUnmount(ctx context.Context, log *slog.Logger, unmount func(context.Context, *slog.Logger) error) error {
	ctx, cancel := context.WithTimeout(ctx, unmountTimeout)
	defer cancel()
	done := make(chan error, 1)
	safe.Go(log, "unmount", func() { done <- unmount(ctx, log) }, func(p *safe.Panic) {
		done <- fmt.Errorf("unmounting: %w", p)
	})
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("unmounting: gave up, an unmount is hanging: %w", ctx.Err())
	}
}

func unmountAll(ctx context.Context, log *slog.Logger) error {
	unix.Sync()
	ms, err := ReadMountInfo()
	if err != nil {
		return fmt.Errorf("unmounting: %w", err)
	}
	plan, remountRoot := UnmountPlan(ms)
	var errs []error
	for _, m := range plan {
		if ctx.Err() != nil {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", m.Target, ctx.Err()))
			break
		}
		err := unix.Unmount(m.Target, 0)
		switch {
		case err == nil:
			log.Debug("unmounted", "target", m.Target, "fstype", m.FSType)
			continue
		case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
			// Gone already, with a parent that was detached.
			continue
		}
		log.Warn("unmount failed; remounting read-only and detaching", "target", m.Target, "err", err)
		if rerr := unix.Mount("", m.Target, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); rerr != nil {
			log.Warn("read-only remount failed", "target", m.Target, "err", rerr)
		}
		if derr := unix.Unmount(m.Target, unix.MNT_DETACH); derr != nil {
			errs = append(errs, fmt.Errorf("unmounting %s (%s): %w; detaching: %w", m.Target, m.FSType, err, derr))
		}
	}
	unix.Sync()
	if remountRoot {
		if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			errs = append(errs, fmt.Errorf("remounting / read-only: %w", err))
		}
	}
	return errors.Join(errs...)
}
