package supervise

import "time"

// Backoff is the restart schedule: Initial after the first failure, doubling
// up to Max, and back to Initial once a run has been healthy for ResetAfter.
type Backoff struct {
	Initial    time.Duration
	Max        time.Duration
	ResetAfter time.Duration
}

// DefaultBackoff is the node's schedule: 1 s, 2 s, 4 s ... 30 s, reset
// after a minute of health.
func DefaultBackoff() Backoff {
	return Backoff{Initial: time.Second, Max: 30 * time.Second, ResetAfter: time.Minute}
}

// Delay is the wait before restarting after the n-th consecutive failure
// (n >= 1).
func (b Backoff) Delay(n int) time.Duration {
	d := b.Initial
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// Failures returns the consecutive-failure count after a run ended, given
// the count before it and how long the run was healthy (ready) for: a run
// healthy for ResetAfter starts the schedule over.
func (b Backoff) Failures(prev int, healthy time.Duration) int {
	if healthy >= b.ResetAfter {
		return 1
	}
	return prev + 1
}
