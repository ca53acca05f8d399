package kmod

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// coldplugPolicy bounds a coldplug.
type coldplugPolicy struct {
	// MaxPasses bounds the scan-and-load passes. Each pass can only reveal
	// devices behind a bus driver loaded in the previous one (PCI → virtio
	// → virtio-net), and that chain is short.
	MaxPasses int
	// Settle is how long to keep rescanning after a pass that loaded
	// something finds nothing new, and Poll how often. Most bus drivers
	// register their child devices synchronously in their probe, but some
	// probe asynchronously, so their devices' modalias files can appear a
	// little after finit_module returns.
	Settle, Poll time.Duration
	// Timeout bounds the whole coldplug.
	Timeout time.Duration
}

func defaultPolicy() coldplugPolicy {
	return coldplugPolicy{MaxPasses: 5, Settle: 300 * time.Millisecond, Poll: 50 * time.Millisecond, Timeout: 30 * time.Second}
}

// PlanPass decides which modules one coldplug pass loads: those whose
// aliases match a present device's modalias, that the index can load, and
// that are not done already (loaded, builtin or failed). Sorted, so passes
// are deterministic.
func PlanPass(ix *Index, modaliases []string, done func(name string) bool) []string {
	set := map[string]bool{}
	for _, ma := range modaliases {
		for _, m := range ix.Match(ma) {
			if ix.Has(m) && !ix.Builtin(m) && !done(m) {
				set[m] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for m := range set {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// ScanModaliases returns the distinct modalias strings of the devices under
// sysfs (normally "/sys"), sorted. It walks sysfs/devices, where every
// device lives; /sys/bus/*/devices only links into it. Unreadable files are
// skipped: some devices refuse reads, and the scan is best effort.
func ScanModaliases(sysfs string) ([]string, error) {
	root := filepath.Join(sysfs, "devices")
	set := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == root {
				return err
			}
			return nil
		}
		if d.Name() != "modalias" || d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		if s := strings.TrimSpace(string(b)); s != "" {
			set[s] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("scanning %s for device modaliases: %w", root, err)
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out, nil
}

// Coldplug loads the modules that present devices need, with their
// dependencies, repeating until a pass finds nothing new to load (loading a
// bus driver such as virtio_pci makes the devices behind it appear). It
// returns the modules it loaded, in load order; failures are logged and
// returned joined, and do not stop other modules loading.
func Coldplug(ctx context.Context, log *slog.Logger, ix *Index, sysfs string) ([]string, error) {
	s := newSession(ix, log, finitModule, procModules())
	return coldplug(ctx, s, func() ([]string, error) { return ScanModaliases(sysfs) }, defaultPolicy())
}

func coldplug(ctx context.Context, s *session, scan func() ([]string, error), p coldplugPolicy) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	done := func(m string) bool { return s.present[m] || s.failed[m] != nil }
	loadedLast := false
	for pass := 1; ; pass++ {
		aliases, err := scan()
		if err != nil {
			s.errs = append(s.errs, err)
			break
		}
		want := PlanPass(s.ix, aliases, done)
		if len(want) == 0 && loadedLast {
			want, aliases, err = settle(ctx, s, scan, p, done)
			if err != nil {
				s.errs = append(s.errs, err)
				break
			}
		}
		if len(want) == 0 {
			break
		}
		if pass > p.MaxPasses {
			err := fmt.Errorf("coldplug: still finding modules to load after %d passes: %s", p.MaxPasses, strings.Join(want, ", "))
			s.errs = append(s.errs, err)
			s.log.Warn("coldplug stopped", "err", err)
			break
		}
		if err := ctx.Err(); err != nil {
			s.errs = append(s.errs, fmt.Errorf("coldplug pass %d: %w; not loaded: %s", pass, err, strings.Join(want, ", ")))
			break
		}
		before := len(s.loaded)
		order, err := s.ix.Resolve(want...)
		if err != nil {
			s.errs = append(s.errs, err)
		}
		s.loadAll(ctx, order)
		loadedLast = len(s.loaded) > before
		s.log.Info("coldplug pass", "pass", pass, "devices", len(aliases), "matched", strings.Join(want, ","),
			"loaded", strings.Join(s.loaded[before:], ","))
	}
	return s.loaded, errors.Join(s.errs...)
}

// settle rescans for up to p.Settle for devices that appear asynchronously
// after the last pass's drivers were loaded.
func settle(ctx context.Context, s *session, scan func() ([]string, error), p coldplugPolicy, done func(string) bool) ([]string, []string, error) {
	t := time.NewTimer(p.Settle)
	defer t.Stop()
	tick := time.NewTicker(p.Poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, nil, nil
		case <-t.C:
			return nil, nil, nil
		case <-tick.C:
		}
		aliases, err := scan()
		if err != nil {
			return nil, nil, err
		}
		if want := PlanPass(s.ix, aliases, done); len(want) > 0 {
			return want, aliases, nil
		}
	}
}
