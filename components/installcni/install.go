package main

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// planCopies returns the plugins whose destination lacks the source's
// content (src and dst map names to content digests; a missing name has
// none), in the order of names: a restart with everything in place copies
// nothing.
func planCopies(names []string, src, dst map[string]string) []string {
	var out []string
	for _, n := range names {
		if d, ok := dst[n]; !ok || d != src[n] {
			out = append(out, n)
		}
	}
	return out
}

// digests maps each of names found as a regular file in dir to the SHA-256
// of its content; a missing file is left out.
func digests(dir string, names []string) (map[string]string, error) {
	out := map[string]string{}
	for _, n := range names {
		p := filepath.Join(dir, n)
		f, err := os.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", p, err)
		}
		st, err := f.Stat()
		if err != nil || !st.Mode().IsRegular() {
			f.Close()
			continue // not a file we installed: replace it
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", p, err)
		}
		out[n] = string(h.Sum(nil))
	}
	return out, nil
}

// installFile copies src to dir/name as aws-vpc-cni's init container does:
// into dir/name.tmp (same directory, so the rename is atomic; a .tmp left by
// a crash is replaced), fsync, mode 0755, rename over dir/name. A runtime
// executing the plugin at that moment runs the old file or the new one,
// never half of one.
func installFile(src, dir, name string) error {
	dst := filepath.Join(dir, name)
	tmp := dst + ".tmp"
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("installing %s: %w", dst, err)
	}
	defer in.Close()
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("installing %s: removing stale %s: %w", dst, tmp, err)
	}
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return fmt.Errorf("installing %s: %w", dst, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(tmp)
		return fmt.Errorf("installing %s: copying %s: %w", dst, src, err)
	}
	// The umask may have taken bits from OpenFile's mode.
	if err := out.Chmod(0o755); err != nil {
		out.Close()
		os.Remove(tmp)
		return fmt.Errorf("installing %s: chmod %s: %w", dst, tmp, err)
	}
	if err := out.Sync(); err != nil {
		out.Close()
		os.Remove(tmp)
		return fmt.Errorf("installing %s: fsync %s: %w", dst, tmp, err)
	}
	if err := out.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("installing %s: closing %s: %w", dst, tmp, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("installing %s: renaming %s: %w", dst, tmp, err)
	}
	return nil
}

// installPlugins copies the plugins from srcDir that dstDir lacks or holds
// with other content, and returns the names it copied.
func installPlugins(plugins []string, srcDir, dstDir string) ([]string, error) {
	src, err := digests(srcDir, plugins)
	if err != nil {
		return nil, err
	}
	for _, n := range plugins {
		if _, ok := src[n]; !ok {
			return nil, fmt.Errorf("plugin %s missing from %s (the image is broken)", n, srcDir)
		}
	}
	dst, err := digests(dstDir, plugins)
	if err != nil {
		return nil, err
	}
	todo := planCopies(plugins, src, dst)
	for _, n := range todo {
		if err := installFile(filepath.Join(srcDir, n), dstDir, n); err != nil {
			return nil, err
		}
	}
	return todo, nil
}

// ensureConflist writes data to dir/conflistName unless it already holds
// exactly that, and reports whether it wrote.
func ensureConflist(dir string, data []byte, write func(string, []byte, os.FileMode) error) (bool, error) {
	p := filepath.Join(dir, conflistName)
	old, err := os.ReadFile(p)
	if err == nil && bytes.Equal(old, data) {
		return false, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("reading %s: %w", p, err)
	}
	if err := write(p, data, 0o644); err != nil {
		return false, err
	}
	return true, nil
}
