package timesync

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Clock changes the system clock. Adjtimex is the node's; tests use a
// fake so they never touch the host's clock.
type Clock interface {
	// Step jumps the clock by offset, and marks it synchronized.
	Step(offset time.Duration, e Estimate) error
	// Slew hands offset to the kernel's PLL, which slews it away, and
	// marks the clock synchronized.
	Slew(offset time.Duration, e Estimate) error
}

// Estimate is what the kernel is told about the clock's quality with each
// change, and the poll interval the PLL's time constant follows.
type Estimate struct {
	MaxError, EstError time.Duration
	Poll               time.Duration
}

// Adjtimex is the system clock through adjtimex(2), as systemd-timesyncd
// drives it.
type Adjtimex struct{}

// Step implements Clock with ADJ_SETOFFSET: the kernel adds the offset
// atomically, so no time passes between reading the clock and setting it.
func (Adjtimex) Step(offset time.Duration, e Estimate) error {
	tx := unix.Timex{Modes: unix.ADJ_SETOFFSET | unix.ADJ_NANO}
	sec, nsec := splitOffset(offset)
	tx.Time.Sec, tx.Time.Usec = sec, nsec // with ADJ_NANO the field holds nanoseconds
	if _, err := unix.Adjtimex(&tx); err != nil {
		return fmt.Errorf("adjtimex ADJ_SETOFFSET by %s: %w", offset, err)
	}
	// Offset 0: the PLL starts from the stepped clock, and the status
	// below says it is synchronized.
	return Adjtimex{}.Slew(0, e)
}

// Slew implements Clock with the kernel PLL (STA_PLL, ADJ_OFFSET in
// nanoseconds; the kernel clamps one offset to ±0.5 s and learns the
// frequency error over the updates). STA_UNSYNC is cleared and maxerror
// and esterror are set, so adjtimex(2) readers (chronyc-like tools,
// kubelet's cadvisor, the kernel's 11-minute RTC sync) see a synced clock;
// the kernel sets STA_UNSYNC again by itself if updates stop for hours.
func (Adjtimex) Slew(offset time.Duration, e Estimate) error {
	tx := unix.Timex{
		Modes: unix.ADJ_OFFSET | unix.ADJ_NANO | unix.ADJ_STATUS | unix.ADJ_TIMECONST |
			unix.ADJ_MAXERROR | unix.ADJ_ESTERROR,
		Offset:   int64(offset),
		Status:   unix.STA_PLL,
		Constant: timeConstant(e.Poll),
		Maxerror: e.MaxError.Microseconds(),
		Esterror: e.EstError.Microseconds(),
	}
	if _, err := unix.Adjtimex(&tx); err != nil {
		return fmt.Errorf("adjtimex ADJ_OFFSET by %s: %w", offset, err)
	}
	return nil
}

// splitOffset splits d into whole seconds and non-negative nanoseconds, as
// ADJ_SETOFFSET wants: -1.5 s is -2 s + 500000000 ns.
func splitOffset(d time.Duration) (sec, nsec int64) {
	sec, nsec = int64(d/time.Second), int64(d%time.Second)
	if nsec < 0 {
		sec--
		nsec += int64(time.Second)
	}
	return sec, nsec
}

// timeConstant is the PLL time constant for a poll interval, as
// timesyncd sets it: log2(poll in s) - 4, so 64 s gives 2 and 1024 s 6.
func timeConstant(poll time.Duration) int64 {
	c := int64(-4)
	for s := poll / time.Second; s > 1; s >>= 1 {
		c++
	}
	return max(c, 2)
}
