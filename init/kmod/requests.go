package kmod

import (
	"fmt"
	"os"
	"path/filepath"
)

// Where the kernel's module requests go.
const (
	// RequestKnob holds the program the kernel runs for request_module.
	RequestKnob = "/proc/sys/kernel/modprobe"
	// SelfExe is PID 1's executable: for berth, the initramfs's copy,
	// whose pages are in memory for as long as PID 1 runs.
	SelfExe = "/proc/1/exe"
	// RequestLink is the name the kernel runs: a link to SelfExe whose
	// base name, modprobe, tells berth what it was run as.
	RequestLink = "/run/berth/modprobe"
)

// ServeRequestsFrom points the kernel's module requests (knob) at link, a
// symlink to target, made first and checked to resolve. On a berth node
// /sbin/modprobe is berth on the compressed root image: the kernel's first
// request of a boot (nf_tables for the FORWARD policy, beside containerd's
// start) paid a cold exec of it, about a second under TCG, and every
// later request a decompressed read of whatever pages had been dropped.
// PID 1's own copy is always in memory. Nothing changes on failure: the
// knob is written last, once the link resolves.
func ServeRequestsFrom(knob, link, target string) error {
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		return fmt.Errorf("making the directory of %s: %w", link, err)
	}
	tmp := link + ".new"
	if err := os.Remove(tmp); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("removing %s: %w", tmp, err)
	}
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("linking %s to %s: %w", tmp, target, err)
	}
	if err := os.Rename(tmp, link); err != nil {
		return fmt.Errorf("renaming %s to %s: %w", tmp, link, err)
	}
	if _, err := os.Stat(link); err != nil {
		return fmt.Errorf("checking %s resolves: %w", link, err)
	}
	if err := os.WriteFile(knob, []byte(link+"\n"), 0o644); err != nil {
		return fmt.Errorf("pointing %s at %s: %w", knob, link, err)
	}
	return nil
}
