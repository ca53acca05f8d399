package main

import (
	"fmt"
	"log/slog"
	"runtime"

	"github.com/berth-node/berth/config/manifest"
)

// checkImageArch refuses an image built for another architecture than the
// running berth before the root phase switches to it: berth itself runs
// (the CPU took it), but nothing else in a mixed image would. m is nil when
// the modules phase could not read the manifest; that phase reported why,
// and there is nothing to check.
func checkImageArch(log *slog.Logger, m *manifest.Manifest, goarch string) error {
	if m == nil {
		return nil
	}
	note, err := m.CheckArch(goarch)
	if note != "" {
		log.Warn(note, "manifest", manifest.DefaultPath)
	}
	if err != nil {
		return fmt.Errorf("checking %s: %w", manifest.DefaultPath, err)
	}
	return nil
}

// runningArch is the architecture berth was built for, which is the CPU's.
func runningArch() string { return runtime.GOARCH }
