package secureboot

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// fileMode keeps the private keys to their owner; the directory is 0700
// in any case.
func fileMode(name string) os.FileMode {
	if strings.HasSuffix(name, ".key") {
		return 0o600
	}
	return 0o644
}

// Write writes the whole set to dir (mode 0700) and sets k.Dir. The set is
// written and synced in a new directory beside dir, then renamed into
// place, so that dir is never a half-written set. An existing dir is an
// error (ErrExists) unless force, which replaces it the same way.
func (k *Keys) Write(log *slog.Logger, dir string, force bool) error {
	if _, err := os.Lstat(dir); err == nil && !force {
		return fmt.Errorf("%s: %w (-force replaces it; machines that enrolled the old keys then refuse disks signed with the new)", dir, ErrExists)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".new-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // gone after the rename; a leftover on failure
	if err := os.Chmod(tmp, 0o700); err != nil {
		return err
	}
	for _, name := range fileNames() {
		if err := writeSynced(filepath.Join(tmp, name), k.files[name], fileMode(name)); err != nil {
			return err
		}
	}
	if err := syncDir(tmp); err != nil {
		return err
	}
	var old string
	if _, err := os.Lstat(dir); err == nil {
		old = tmp + ".old"
		if err := os.Rename(dir, old); err != nil {
			return fmt.Errorf("moving the old key set aside: %w", err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if old != "" {
			_ = os.Rename(old, dir)
		}
		return fmt.Errorf("putting the new key set in place: %w", err)
	}
	if err := syncDir(parent); err != nil {
		return err
	}
	if old != "" {
		log.Warn("secure boot keys: replaced the key set", "dir", dir)
		if err := os.RemoveAll(old); err != nil {
			return fmt.Errorf("removing the old key set %s: %w", old, err)
		}
	}
	k.Dir = dir
	return nil
}

// WriteMissing writes into k.Dir the files of the set it lacks (what
// LoadKeys derived), each through a synced temporary file and a rename.
func (k *Keys) WriteMissing(log *slog.Logger) error {
	if k.Dir == "" {
		return errors.New("key set has no directory")
	}
	wrote := false
	for _, name := range fileNames() {
		path := k.Path(name)
		if _, err := os.Lstat(path); err == nil {
			continue
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := writeAtomic(path, k.files[name], fileMode(name)); err != nil {
			return err
		}
		log.Info("secure boot keys: wrote", "file", path)
		wrote = true
	}
	if wrote {
		return syncDir(k.Dir)
	}
	return nil
}

// writeAtomic writes path through a synced temporary file in its directory
// and a rename.
func writeAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	f.Close()
	if err := writeSynced(tmp, data, mode); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

func writeSynced(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}
