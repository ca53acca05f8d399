package devlinks

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// byIDDir is where the by-id links live, relative to /dev.
const byIDDir = "disk/by-id"

// tmpPrefix names the temporary symlink a link is made as before it is
// renamed into place; a leftover one (a crash between the two) is removed
// as stale.
const tmpPrefix = ".berth-devlink-"

// symlinkTarget is what a link's symlink holds: relative, as udev writes
// it, so the link reads the same from inside a chroot or a container
// that bind-mounts /dev.
func symlinkTarget(l Link) string {
	return strings.Repeat("../", strings.Count(l.Name, "/")) + l.Target
}

// Existing returns the links devlinks owns under devDir (normally /dev):
// the symlinks in disk/by-id named nvme-*, and the symlinks directly in
// devDir that point at an NVMe device node (the EC2 names). Other links
// (udev's, if something runs it; /dev/fd, /dev/core...) are not touched.
func Existing(devDir string) ([]Link, error) {
	var out []Link
	var errs []error
	scan := func(rel string, own func(name, target string) bool) {
		dir := filepath.Join(devDir, rel)
		ents, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("listing %s: %w", dir, err))
			return
		}
		for _, e := range ents {
			if e.Type()&fs.ModeSymlink == 0 {
				continue
			}
			t, err := os.Readlink(filepath.Join(dir, e.Name()))
			if err != nil {
				continue // removed under us
			}
			if own(e.Name(), t) {
				out = append(out, Link{Name: filepath.Join(rel, e.Name()), Target: filepath.Base(t)})
			}
		}
	}
	scan(byIDDir, func(name, t string) bool {
		return strings.HasPrefix(name, "nvme-") || strings.HasPrefix(name, tmpPrefix)
	})
	scan(".", func(name, t string) bool {
		return IsNVMe(t) && !strings.Contains(t, "/")
	})
	for i := range out {
		out[i].Name = filepath.ToSlash(filepath.Clean(out[i].Name))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, errors.Join(errs...)
}

// Change is what one reconcile did.
type Change struct {
	Made    []Link // created, or re-pointed
	Removed []Link
	// Conflicts are wanted links whose name is taken by something that
	// is no symlink (a device node): left alone, as udev leaves them.
	Conflicts []Link
}

// Reconcile makes devDir's links what want says: each wanted link made
// or re-pointed (a symlink to a temporary name renamed over the old one,
// so a reader never sees the name missing), each owned link not wanted
// (its device is gone, or no longer claims it) removed. Failures are
// returned joined; the other links still get done.
func Reconcile(devDir string, want []Link) (Change, error) {
	var ch Change
	have, err := Existing(devDir)
	errs := []error{}
	if err != nil {
		errs = append(errs, err)
	}
	wanted := map[string]string{}
	for _, l := range want {
		wanted[l.Name] = l.Target
	}
	current := map[string]string{}
	for _, l := range have {
		current[l.Name] = l.Target
	}
	for _, l := range have {
		if _, ok := wanted[l.Name]; ok {
			continue // re-pointed below if its target changed
		}
		p := filepath.Join(devDir, l.Name)
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing stale link %s: %w", p, err))
			continue
		}
		ch.Removed = append(ch.Removed, l)
	}
	for _, l := range want {
		p := filepath.Join(devDir, l.Name)
		if t, ok := current[l.Name]; ok {
			if raw, err := os.Readlink(p); err == nil && raw == symlinkTarget(l) && t == l.Target {
				continue
			}
		} else if _, err := os.Lstat(p); err == nil {
			ch.Conflicts = append(ch.Conflicts, l)
			continue
		}
		if err := makeLink(devDir, l); err != nil {
			errs = append(errs, err)
			continue
		}
		ch.Made = append(ch.Made, l)
	}
	return ch, errors.Join(errs...)
}

// makeLink makes one link atomically: a symlink under a temporary name in
// the same directory, renamed over the link.
func makeLink(devDir string, l Link) error {
	p := filepath.Join(devDir, l.Name)
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("making %s for link %s: %w", dir, p, err)
	}
	tmp := filepath.Join(dir, tmpPrefix+filepath.Base(p))
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing leftover %s: %w", tmp, err)
	}
	if err := os.Symlink(symlinkTarget(l), tmp); err != nil {
		return fmt.Errorf("making link %s → %s: %w", p, l.Target, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("putting link %s → %s in place: %w", p, l.Target, err)
	}
	return nil
}
