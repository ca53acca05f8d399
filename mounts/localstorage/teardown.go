package localstorage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/berth-node/berth/mounts/raid"
)

// Teardown undoes a successful Run at shutdown, after kubelet and
// containerd have stopped and before the final sync and poweroff: it
// unmounts the binds and the filesystems res records, newest first, and
// removes berth's device-mapper devices so that dm-raid marks a RAID10
// array clean. A mount still busy is detached lazily and reported.
func Teardown(ctx context.Context, log *slog.Logger, res *Result, env Env) error {
	if res == nil || res.Status != StatusReady {
		return nil
	}
	var errs []error
	var targets []string
	for _, fs := range res.Filesystems {
		targets = append(targets, fs.Mount)
	}
	for _, b := range res.Binds {
		targets = append(targets, b.Target)
	}
	for i := len(targets) - 1; i >= 0; i-- {
		p := filepath.Join(env.Root, targets[i])
		if err := unix.Unmount(p, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
			_ = unix.Unmount(p, unix.MNT_DETACH)
		}
	}
	if res.Array != nil {
		spec := raid.Spec{Name: res.Array.Name, Level: raid.Level(res.Array.Level), Members: make([]raid.Member, len(res.Array.Members))}
		if err := raid.Disassemble(ctx, env.DMControl, spec); err != nil {
			errs = append(errs, err)
		}
	}
	err := errors.Join(errs...)
	if err != nil {
		log.Warn("instance-store teardown", "err", err)
	}
	return err
}
