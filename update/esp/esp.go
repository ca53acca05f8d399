// Package esp carries out boot counting on the mounted EFI System
// Partition: it stages a new version's UKI with a boot counter, keeps the
// ESP to the running version and the new one, blesses a version that
// passed its trial and marks bad one that failed (names from package
// bootcount, decisions from package trial).
//
// Every operation may be cut off at any point, by a crash or a power
// loss, and is safe to run again from the start: a UKI is written under a
// hidden temporary name that systemd-boot skips (it lists only names
// ending in .efi and not starting with '.'), made durable, and only then
// renamed to its boot entry name; a rename is the one step that changes
// what systemd-boot boots, and the directory is fsynced after it. Older
// UKIs are removed only once the new one is in place, and the running one
// never. berth is the only writer of EFI/Linux while it runs.
package esp

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/berth-node/berth/update/bootcount"
)

// tempPrefix and tempSuffix frame a UKI being written: hidden, and not
// ending in .efi, so systemd-boot never lists it, even half-written.
const (
	tempPrefix = ".berth-stage-"
	tempSuffix = ".tmp"
)

// ESP is a mounted EFI System Partition.
type ESP struct {
	// Root is where it is mounted; UKIs are in Root/EFI/Linux.
	Root string
	// Log gets a line for each file renamed or removed; nil discards.
	Log *slog.Logger
}

func (e ESP) dir() string { return filepath.Join(e.Root, filepath.FromSlash(bootcount.Dir)) }

func (e ESP) path(name string) string { return filepath.Join(e.dir(), name) }

func (e ESP) log() *slog.Logger {
	if e.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return e.Log
}

// List is the berth UKIs systemd-boot would list in EFI/Linux, in the
// order it would sort them (first is what it boots). Other files there
// are left out: hidden ones, temporary ones, and other systems' UKIs.
func (e ESP) List() ([]bootcount.Entry, error) {
	des, err := os.ReadDir(e.dir())
	if err != nil {
		return nil, fmt.Errorf("listing UKIs: %w", err)
	}
	var es []bootcount.Entry
	for _, de := range des {
		if !de.Type().IsRegular() {
			continue
		}
		if en, err := bootcount.Parse(de.Name()); err == nil {
			es = append(es, en)
		}
	}
	bootcount.Sort(es)
	return es, nil
}

// Stage writes uki as version's boot-counted UKI (berth-<version>+3.efi)
// next to the running one, and then removes every other berth UKI. The
// running entry must be good: staging during a trial would remove the
// version to fall back to. The new UKI is written before anything is
// removed, so the ESP needs room for it beside what is there: Prune after
// blessing. It returns the staged entry.
//
// The steps, each safe to cut off: clean leftover temporary files; write
// the UKI to a temporary file and fsync it; rename it to its entry name
// (the commit: from here systemd-boot boots it) and fsync the directory;
// remove the other UKIs and fsync the directory again.
func (e ESP) Stage(running bootcount.Entry, version string, uki io.Reader) (bootcount.Entry, error) {
	return e.StageFrom(running, version, copyFrom(uki))
}

// StageFrom is Stage with the UKI written by write, which gets the
// temporary file and returns nil only once the whole UKI is in it and
// whoever streams it has checked it: an error from write leaves no file
// behind and renames nothing. A caller that fetches the UKI and checks
// what it fetched before the commit (update/apply) stages through it.
func (e ESP) StageFrom(running bootcount.Entry, version string, write func(w io.Writer) error) (bootcount.Entry, error) {
	steps, staged, err := e.stageSteps(running, version, write)
	if err != nil {
		return bootcount.Entry{}, err
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			return bootcount.Entry{}, fmt.Errorf("staging %s: %s: %w", staged.Name, s.name, err)
		}
	}
	return staged, nil
}

// Prune removes every berth UKI but keep's version's, which must be good
// and present: after a blessing, the version before is no longer needed
// to fall back to. The disk image sizes the ESP for two UKIs and a
// little more (image/disk), and Stage writes the new UKI before it removes
// anything, so it needs the previous version pruned to find room.
func (e ESP) Prune(keep bootcount.Entry) error {
	if keep.State() != bootcount.Good {
		return fmt.Errorf("pruning UKIs: %s is %v, not good: it must stay with a version to fall back to", keep.Name, keep.State())
	}
	if err := e.cleanTemps(); err != nil {
		return fmt.Errorf("pruning UKIs: %w", err)
	}
	if err := e.prune(keep, keep); err != nil {
		return fmt.Errorf("pruning UKIs: %w", err)
	}
	if err := e.syncDir(); err != nil {
		return fmt.Errorf("pruning UKIs: %w", err)
	}
	return nil
}

// step is one durable step of an operation; tests stop between them.
type step struct {
	name string
	do   func() error
}

// copyFrom writes what r holds.
func copyFrom(r io.Reader) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := io.Copy(w, r)
		return err
	}
}

func (e ESP) stageSteps(running bootcount.Entry, version string, write func(io.Writer) error) ([]step, bootcount.Entry, error) {
	staged, err := bootcount.Staged(version)
	if err != nil {
		return nil, bootcount.Entry{}, fmt.Errorf("staging a UKI: %w", err)
	}
	if running.State() != bootcount.Good {
		return nil, bootcount.Entry{}, fmt.Errorf("staging %s: the running entry %s is %v, not good: bless it (or roll back) first, so that a version to fall back to stays",
			staged.Name, running.Name, running.State())
	}
	if strings.EqualFold(running.Version, version) {
		return nil, bootcount.Entry{}, fmt.Errorf("staging %s: version %s is the running one (%s)", staged.Name, version, running.Name)
	}
	var tmp string
	return []step{
		{"checking the running UKI", func() error { return e.present(running) }},
		{"removing leftover temporary files", e.cleanTemps},
		{"writing the UKI to a temporary file", func() (err error) {
			tmp, err = e.writeTemp(write)
			return err
		}},
		{"renaming it into place", func() error {
			if err := os.Rename(tmp, e.path(staged.Name)); err != nil {
				os.Remove(tmp)
				return err
			}
			e.log().Info("UKI staged", "file", e.path(staged.Name), "tries", bootcount.Tries)
			return nil
		}},
		{"syncing the directory", e.syncDir},
		{"removing older UKIs", func() error { return e.prune(running, staged) }},
		{"syncing the directory", e.syncDir},
	}, staged, nil
}

// writeTemp has write fill a new temporary file in EFI/Linux and makes it
// durable; it leaves no file behind when it fails.
func (e ESP) writeTemp(write func(io.Writer) error) (tmp string, err error) {
	if err := os.MkdirAll(e.dir(), 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", e.dir(), err)
	}
	f, err := os.CreateTemp(e.dir(), tempPrefix+"*"+tempSuffix)
	if err != nil {
		return "", fmt.Errorf("creating a temporary file in %s: %w", e.dir(), err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	cw := &countWriter{w: f}
	if err := write(cw); err != nil {
		return "", fmt.Errorf("writing %s: %w", f.Name(), err)
	}
	if cw.n == 0 {
		return "", fmt.Errorf("writing %s: the UKI is empty", f.Name())
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("fsync %s: %w", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("closing %s: %w", f.Name(), err)
	}
	return f.Name(), nil
}

// countWriter counts what passes through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// cleanTemps removes what a cut-off Stage left: temporary files only.
func (e ESP) cleanTemps() error {
	des, err := os.ReadDir(e.dir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listing %s: %w", e.dir(), err)
	}
	for _, de := range des {
		if n := de.Name(); strings.HasPrefix(n, tempPrefix) && strings.HasSuffix(n, tempSuffix) && de.Type().IsRegular() {
			if err := os.Remove(e.path(n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("removing %s: %w", e.path(n), err)
			}
			e.log().Info("leftover temporary UKI removed", "file", e.path(n))
		}
	}
	return nil
}

// prune removes every berth UKI but the running version's and staged.
func (e ESP) prune(running, staged bootcount.Entry) error {
	es, err := e.List()
	if err != nil {
		return err
	}
	// Remove nothing unless both the one to keep and the new one are
	// there: a missing running UKI would leave only an untried one.
	for _, keep := range []bootcount.Entry{running, staged} {
		if !containsFold(es, keep.Name) {
			return fmt.Errorf("%s is not in %s", keep.Name, e.dir())
		}
	}
	for _, en := range es {
		if strings.EqualFold(en.Version, running.Version) || strings.EqualFold(en.Name, staged.Name) {
			continue
		}
		if err := os.Remove(e.path(en.Name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing %s: %w", e.path(en.Name), err)
		}
		e.log().Info("older UKI removed", "file", e.path(en.Name))
	}
	return nil
}

// present checks that en is a UKI in EFI/Linux.
func (e ESP) present(en bootcount.Entry) error {
	es, err := e.List()
	if err != nil {
		return err
	}
	if !containsFold(es, en.Name) {
		return fmt.Errorf("running UKI %s is not in %s", en.Name, e.dir())
	}
	return nil
}

func containsFold(es []bootcount.Entry, name string) bool {
	for _, en := range es {
		if strings.EqualFold(en.Name, name) {
			return true
		}
	}
	return false
}

// Bless marks the booted entry good: its counter renamed away, as
// systemd-bless-boot's "good" does. Run again, it finds the work done; an
// entry marked bad before is blessed all the same (the later verdict
// wins). It returns the blessed entry.
func (e ESP) Bless(booted bootcount.Entry) (bootcount.Entry, error) {
	if !booted.Counted {
		return bootcount.Entry{}, fmt.Errorf("blessing %s: no boot counter: the boot was not a trial", e.path(booted.Name))
	}
	good := booted.Blessed()
	if err := e.renameOnce("blessing", booted, good, booted.MarkedBad()); err != nil {
		return bootcount.Entry{}, err
	}
	return good, nil
}

// MarkBad marks the booted entry bad: no tries left ("+0-DONE"), so that
// systemd-boot sorts it after every other and boots the previous version
// next, as systemd-bless-boot's "bad" does. Run again, it finds the work
// done. It returns the entry marked bad.
func (e ESP) MarkBad(booted bootcount.Entry) (bootcount.Entry, error) {
	if !booted.Counted {
		return bootcount.Entry{}, fmt.Errorf("marking %s bad: no boot counter: the boot was not a trial", e.path(booted.Name))
	}
	bad := booted.MarkedBad()
	if err := e.renameOnce("marking bad", booted, bad, booted.Blessed()); err != nil {
		return bootcount.Entry{}, err
	}
	return bad, nil
}

// renameOnce is systemd-bless-boot's verb_set: rename the booted file to
// target without replacing anything; if it is gone, rename the other
// verdict's file instead; if that is gone too and target is there, the
// rename was done before. Then the directory is fsynced, every time, so
// that a run cut off before that sync is made durable by the next.
func (e ESP) renameOnce(what string, booted, target, other bootcount.Entry) error {
	to := e.path(target.Name)
	renamed := ""
	for _, from := range []string{booted.Name, other.Name} {
		if from == target.Name {
			continue
		}
		err := renameNoReplace(e.path(from), to)
		if err == nil {
			renamed = from
			break
		}
		if errors.Is(err, fs.ErrExist) {
			break // done before; the source may linger, as with systemd-bless-boot
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: renaming %s to %s: %w", what, e.path(from), target.Name, err)
		}
	}
	if _, err := os.Stat(to); err != nil {
		return fmt.Errorf("%s %s: neither it nor %s is in %s: %w", what, booted.Name, target.Name, e.dir(), err)
	}
	if renamed != "" {
		e.log().Info("UKI renamed", "what", what, "from", e.path(renamed), "to", to)
	}
	if err := e.syncDir(); err != nil {
		return fmt.Errorf("%s %s: %w", what, booted.Name, err)
	}
	return nil
}

// renameNoReplace renames without replacing an existing target; where the
// kernel or file system does not take RENAME_NOREPLACE it checks first,
// which is enough with berth the only writer.
func renameNoReplace(from, to string) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		if _, serr := os.Lstat(to); serr == nil {
			return &os.LinkError{Op: "rename", Old: from, New: to, Err: fs.ErrExist}
		}
		return os.Rename(from, to)
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	return nil
}

// syncDir makes the renames and removals in EFI/Linux durable.
func (e ESP) syncDir() error {
	d, err := os.Open(e.dir())
	if err != nil {
		return fmt.Errorf("opening %s to fsync it: %w", e.dir(), err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", e.dir(), err)
	}
	// Linux's vfat does not write a directory's entries on the
	// directory's fsync (they are buffers of the block device, not of
	// the directory): QEMU killed right after a staged rename booted the
	// old entry. syncfs writes every dirty buffer of the ESP, the
	// entries and the FAT with them.
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return fmt.Errorf("syncfs %s: %w", e.Root, err)
	}
	return nil
}
