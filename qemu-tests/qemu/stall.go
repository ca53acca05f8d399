package qemu

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A guest whose kernel hangs never runs user space again, and a wait for
// berth's next line then runs out its whole deadline and reads as a node
// that never reported. Under TCG it has been seen twice: on CI
// (2026-11-30, TestStorageRAID0AndReboot's first boot, 15 s in: both vCPUs
// stuck for minutes, one in a child berth had just forked, one in
// containerd) and here the same day (TestJoinFailureSaysWhy: not one
// console line in 3 minutes, so the kernel hung before berth's first
// line). Three signs end every wait of the VM at once, with an error that
// says which: the kernel's soft-lockup watchdog (on the console at any log
// level) reporting a CPU stuck for hardStall or longer, the kernel's panic
// on a soft lockup (softlockup_panic), and a console with no line from the
// guest silentFor after QEMU started.

// ErrGuestStalled is what a wait ends with once the guest kernel has hung.
// make test-qemu runs a test that failed with it once more (the error
// text, printed in the test's output, is what it looks for).
var ErrGuestStalled = errors.New("the guest kernel hung")

// hardStall is how long a CPU must have been stuck before a wait gives up.
// The watchdog first reports at 20 s. Host starvation did not make it
// report here (QEMU stopped for 75 s: the guest's clock moved ~2 s and no
// stall line came), but a guest that recovers from a short stall must not
// fail, so a wait gives up only at a minute.
const hardStall = 60 * time.Second

// silentFor is how long an amd64 guest may print nothing at all (the
// platform's silentFor). With quiet the kernel prints nothing before
// berth's first line (3 s of guest time; under 10 s of wall time in every
// boot of a full test-qemu here, 2026-11-30, direct and UEFI), and a
// kernel that fails (no root, a panic) prints its error at any log level.
const silentFor = 150 * time.Second

var (
	softLockupRE = regexp.MustCompile(`watchdog: BUG: soft lockup - CPU#\d+ stuck for (\d+)s!`)
	// lockupPanicRE is the kernel's panic on a soft lockup
	// (softlockup_panic=1: the image's command line, and a trial boot
	// until blessed). The guest hung as surely as with a minute's stall,
	// and reboots 10 s later.
	lockupPanicRE = regexp.MustCompile(`Kernel panic - not syncing: softlockup: hung tasks`)
	rcuStallRE    = regexp.MustCompile(`rcu: INFO: rcu_\w+ (self-)?detected stalls?`)
)

// stallWatch keeps what the console said about stalled CPUs. The console
// feeds it; every wait of the VM (console, shell, exit) gives up when hit
// is closed. Its methods accept a nil receiver: a lineBuf without one
// never stalls.
type stallWatch struct {
	mu    sync.Mutex
	first string // the first stall line of either kind
	why   string // what says the guest hung; set once
	heard bool   // a line from the guest (not the harness) came
	hit   chan struct{}
}

func newStallWatch() *stallWatch { return &stallWatch{hit: make(chan struct{})} }

// see reads one console line.
func (s *stallWatch) see(text string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !strings.HasPrefix(text, harnessPrefix) && !strings.HasPrefix(text, stderrPrefix) {
		s.heard = true
	}
	if lockupPanicRE.MatchString(text) {
		why := fmt.Sprintf("the kernel panicked on a soft lockup: %q", strings.TrimSpace(text))
		if s.first != "" {
			why += fmt.Sprintf(", after %q", s.first)
		}
		s.hang(why)
		return
	}
	m := softLockupRE.FindStringSubmatch(text)
	if m == nil && !rcuStallRE.MatchString(text) {
		return
	}
	text = strings.TrimSpace(text)
	if s.first == "" {
		s.first = text
	}
	if m == nil {
		return
	}
	if n, err := strconv.Atoi(m[1]); err == nil && time.Duration(n)*time.Second >= hardStall {
		why := fmt.Sprintf("the kernel's watchdog said %q", text)
		if s.first != text {
			why += fmt.Sprintf(", after %q", s.first)
		}
		s.hang(why)
	}
}

// silent is called when QEMU has run for after.
func (s *stallWatch) silent(after time.Duration) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.heard {
		s.hang(fmt.Sprintf("not one console line in the %s since QEMU started (the kernel hung before berth's first line, or QEMU did)", after))
	}
}

// hang records the first sign; s.mu is held.
func (s *stallWatch) hang(why string) {
	if s.why == "" {
		s.why = why
		close(s.hit)
	}
}

// hitC is closed once the guest has hung; nil (never ready) without a
// watch.
func (s *stallWatch) hitC() <-chan struct{} {
	if s == nil {
		return nil
	}
	return s.hit
}

// err is nil until the guest has hung.
func (s *stallWatch) err() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.why == "" {
		return nil
	}
	return fmt.Errorf("%w: %s; nothing in the guest runs again (an emulator or guest-kernel hang, not a slow boot)", ErrGuestStalled, s.why)
}

// reason is what showed the guest hung; "" until it has.
func (s *stallWatch) reason() string {
	if s == nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.why
}

// earlier is the first stall line when no CPU (yet) counts as stuck: a
// short stall a busy host can cause, worth a line in a failed test's log.
func (s *stallWatch) earlier() string {
	if s == nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.why != "" {
		return ""
	}
	return s.first
}
