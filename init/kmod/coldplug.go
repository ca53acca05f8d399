package kmod

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/berth-node/berth/internal/safe"
)

// coldplugPolicy bounds a coldplug.
type coldplugPolicy struct {
	// MaxPasses bounds the load passes. Each pass can only reveal devices
	// behind a bus driver loaded in the previous one (PCI → virtio →
	// virtio-net), and that chain is short.
	MaxPasses int
	// Settle is how long to wait, after a pass that loaded something, for
	// the devices its drivers add. Most bus drivers add their child
	// devices inside finit_module, so their uevents are already queued
	// when it returns and the wait ends at once; Settle only bounds the
	// wait for drivers that probe asynchronously, and is paid once, after
	// the last pass.
	Settle time.Duration
	// Poll is how often the fallback source (no uevent socket) rescans.
	Poll time.Duration
	// Timeout bounds the whole coldplug.
	Timeout time.Duration
}

func defaultPolicy() coldplugPolicy {
	return coldplugPolicy{MaxPasses: 5, Settle: 150 * time.Millisecond, Poll: 25 * time.Millisecond, Timeout: 30 * time.Second}
}

// deviceSource is how coldplug learns about devices.
type deviceSource interface {
	// Scan returns the modaliases of every device present.
	Scan() ([]string, error)
	// Added waits until deadline for devices added since the source was
	// opened or last asked, and returns their modaliases as soon as there
	// are some (nil when the deadline passes first).
	Added(ctx context.Context, deadline time.Time) ([]string, error)
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

// modaliasGlobs are where sysfs (normally "/sys") shows the modalias of
// every device a driver can bind to: devices on a bus, class devices (input
// devices, DMI), and the CPU (its features select crypto and other
// CPU-specific modules). Reading these few paths instead of walking all of
// sysfs/devices matters at boot: sysfs makes its inodes on first lookup,
// and a first walk of the several thousand entries costs about half a
// second under emulation.
var modaliasGlobs = []string{"bus/*/devices/*/modalias", "class/*/*/modalias", "devices/system/cpu/modalias"}

// ScanModaliases returns the distinct modalias strings of the devices under
// sysfs (normally "/sys"), sorted. Unreadable files are skipped: some
// devices refuse reads, and the scan is best effort. A sysfs with no bus
// directory is an error: it is not mounted.
func ScanModaliases(sysfs string) ([]string, error) {
	if _, err := os.Stat(filepath.Join(sysfs, "bus")); err != nil {
		return nil, fmt.Errorf("scanning %s for device modaliases: %w", sysfs, err)
	}
	set := map[string]bool{}
	for _, g := range modaliasGlobs {
		paths, err := filepath.Glob(filepath.Join(sysfs, g))
		if err != nil {
			return nil, fmt.Errorf("scanning %s for device modaliases: %w", filepath.Join(sysfs, g), err)
		}
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			if s := strings.TrimSpace(string(b)); s != "" {
				set[s] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out, nil
}

// Coldplug loads the modules that present devices need, with their
// dependencies, and then those of the devices the loaded drivers add
// (loading a bus driver such as virtio_pci makes the devices behind it
// appear), learnt from the kernel's uevents, or by rescanning sysfs if the
// uevent socket cannot be opened. It returns the modules it loaded,
// dependencies first; failures are logged and returned joined, and do not
// stop other modules loading.
func Coldplug(ctx context.Context, log *slog.Logger, ix *Index, sysfs string) ([]string, error) {
	return LoadAndColdplug(ctx, log, ix, sysfs, Options{})
}

// Options tune LoadAndColdplug.
type Options struct {
	// Preload are modules (names or aliases) loaded whatever the
	// hardware, before the devices' modules.
	Preload []string
	// NoSettle skips the wait, after the last pass, for devices that
	// drivers add asynchronously, taking it off the boot's critical path:
	// for when Hotplug runs afterwards and loads their modules.
	NoSettle bool
}

// LoadAndColdplug is Load(o.Preload...) followed by Coldplug, faster: the
// first sysfs scan runs while the preload modules load, and one session
// means nothing is looked up twice. The modules loaded come back in one
// list, preload ones first.
func LoadAndColdplug(ctx context.Context, log *slog.Logger, ix *Index, sysfs string, o Options) ([]string, error) {
	s := newSession(ix, log, finitModule, procModules())
	scan := func() ([]string, error) { return ScanModaliases(sysfs) }
	p := defaultPolicy()
	if o.NoSettle {
		p.Settle = 0
	}
	var src deviceSource
	if u, err := openUevents(scan); err != nil {
		s.log.Warn("no uevent socket; rescanning sysfs for new devices instead", "err", err)
		src = newPollSource(scan, p.Poll)
	} else {
		defer u.Close()
		src = u
	}
	return loadAndColdplug(ctx, s, src, p, o.Preload)
}

// Hotplug loads the modules of devices added from now until ctx ends, as
// the kernel announces them (what udev does after its coldplug), and calls
// loaded with each batch it loads. It starts with a scan, so a device added
// between the coldplug and this call is not missed. It returns nil when ctx
// ends, or an error if it cannot listen for uevents at all. Failures to
// load are logged; a module that failed is not tried again. blocked, when
// not nil, is asked before each batch: a module it names, or one that
// needs a module it names, is not loaded (user data's blocked modules,
// which arrive after the loop starts).
func Hotplug(ctx context.Context, log *slog.Logger, ix *Index, sysfs string, blocked func(name string) bool, loaded func(modules []string)) error {
	scan := func() ([]string, error) { return ScanModaliases(sysfs) }
	u, err := openUevents(scan)
	if err != nil {
		return fmt.Errorf("hotplug: %w", err)
	}
	defer u.Close()
	u.conn.Slice = time.Second // a long-lived listener need not wake often to notice ctx
	return hotplug(ctx, newSession(ix, log, finitModule, procModules()), u, blocked, loaded)
}

func hotplug(ctx context.Context, s *session, src deviceSource, blocked func(string) bool, loaded func([]string)) error {
	done := func(m string) bool { return s.present[m] || s.failed[m] != nil }
	aliases, err := src.Scan()
	if err != nil {
		s.log.Warn("hotplug: first scan failed; following uevents only", "err", err)
	}
	for {
		want := PlanPass(s.ix, aliases, done)
		if blocked != nil {
			want = s.dropBlocked(want, blocked)
		}
		if len(want) > 0 {
			before := len(s.loaded)
			lp, err := s.ix.plan(want)
			if err != nil {
				s.log.Warn("hotplug: modules not found", "err", err)
			}
			s.loadAll(ctx, lp)
			if got := s.loaded[before:]; len(got) > 0 {
				s.log.Info("hotplug", "matched", strings.Join(want, ","), "loaded", strings.Join(got, ","))
				if loaded != nil {
					loaded(append([]string(nil), got...))
				}
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		aliases, err = src.Added(ctx, time.Now().Add(24*time.Hour))
		if err != nil {
			// A broken socket would spin; say so once and rest a little.
			s.log.Warn("hotplug: reading uevents", "err", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
		}
	}
}

type scanResult struct {
	aliases []string
	err     error
}

func loadAndColdplug(ctx context.Context, s *session, src deviceSource, p coldplugPolicy, preload []string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	// The source is opened before the scan, so a device added while the
	// preload modules load is either in the scan or in a uevent.
	// One result, the scan's or its panic's: the channel has room for it,
	// and the wait below never outlasts ctx anyway.
	scanned := make(chan scanResult, 1)
	sent := false // only touched on the scan's goroutine
	safe.Go(s.log, "scan devices", func() {
		a, err := src.Scan()
		sent = true
		scanned <- scanResult{a, err}
	}, func(p *safe.Panic) {
		if !sent {
			scanned <- scanResult{err: fmt.Errorf("scanning sysfs for devices: %w", p)}
		}
	})
	if len(preload) > 0 {
		before := len(s.loaded)
		lp, err := s.ix.plan(preload)
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("preload: %w", err))
			s.log.Warn("preload modules not found", "err", err)
		}
		start := time.Now()
		s.loadAll(ctx, lp)
		s.log.Info("preload", "loaded", strings.Join(s.loaded[before:], ","), "ms", time.Since(start).Milliseconds())
	}
	var r scanResult
	select {
	case r = <-scanned:
	case <-ctx.Done():
		r.err = fmt.Errorf("scanning sysfs for devices: %w", ctx.Err())
	}
	return coldplugFrom(ctx, s, src, p, r.aliases, r.err)
}

func coldplug(ctx context.Context, s *session, src deviceSource, p coldplugPolicy) ([]string, error) {
	return loadAndColdplug(ctx, s, src, p, nil)
}

func coldplugFrom(ctx context.Context, s *session, src deviceSource, p coldplugPolicy, aliases []string, err error) ([]string, error) {
	done := func(m string) bool { return s.present[m] || s.failed[m] != nil }
	if err != nil {
		s.errs = append(s.errs, err)
		return s.loaded, errors.Join(s.errs...)
	}
	want := PlanPass(s.ix, aliases, done)
	for pass := 1; len(want) > 0; pass++ {
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
		lp, err := s.ix.plan(want)
		if err != nil {
			s.errs = append(s.errs, err)
		}
		start := time.Now()
		s.loadAll(ctx, lp)
		s.log.Info("coldplug pass", "pass", pass, "devices", len(aliases), "matched", strings.Join(want, ","),
			"loaded", strings.Join(s.loaded[before:], ","), "ms", time.Since(start).Milliseconds())
		if len(s.loaded) == before {
			break // no new driver, so no new devices to wait for
		}
		// Wait for the devices the new drivers add, until one of them
		// wants a module or the settle time passes.
		deadline := time.Now().Add(p.Settle)
		want = nil
		for len(want) == 0 {
			added, err := src.Added(ctx, deadline)
			if err != nil {
				s.errs = append(s.errs, err)
				break
			}
			if len(added) == 0 {
				break
			}
			aliases = added
			want = PlanPass(s.ix, added, done)
		}
	}
	return s.loaded, errors.Join(s.errs...)
}

// pollSource finds added devices by rescanning sysfs: the fallback when
// there is no uevent socket.
type pollSource struct {
	scan func() ([]string, error)
	poll time.Duration
	seen map[string]bool
}

func newPollSource(scan func() ([]string, error), poll time.Duration) *pollSource {
	return &pollSource{scan: scan, poll: poll, seen: map[string]bool{}}
}

func (p *pollSource) Scan() ([]string, error) {
	all, err := p.scan()
	for _, a := range all {
		p.seen[a] = true
	}
	return all, err
}

func (p *pollSource) Added(ctx context.Context, deadline time.Time) ([]string, error) {
	for {
		all, err := p.scan()
		if err != nil {
			return nil, err
		}
		var added []string
		for _, a := range all {
			if !p.seen[a] {
				p.seen[a] = true
				added = append(added, a)
			}
		}
		if len(added) > 0 {
			return added, nil
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return nil, nil
		}
		t := time.NewTimer(min(wait, p.poll))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil
		case <-t.C:
		}
	}
}

// dropBlocked leaves out of want each module that blocked names, or that
// needs one it names, marking it failed so that it is not asked for again.
func (s *session) dropBlocked(want []string, blocked func(string) bool) []string {
	kept := want[:0]
	for _, m := range want {
		hit := ""
		for _, d := range append([]string{m}, s.ix.Deps(m)...) {
			if blocked(Name(d)) {
				hit = Name(d)
				break
			}
		}
		if hit == "" {
			kept = append(kept, m)
			continue
		}
		s.failed[m] = fmt.Errorf("%s: blocked by user data (%s)", m, hit)
		s.log.Warn("hotplug: not loaded: user data blocks it", "module", m, "blocked", hit)
	}
	return kept
}
