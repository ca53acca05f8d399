package timesync

import (
	"fmt"
	"time"
)

// Policy is when Machine steps, slews and asks again.
type Policy struct {
	// StepThreshold and StepUpdates are chrony's `makestep 1.0 3`, as on
	// AL2023: during the first StepUpdates clock updates an offset larger
	// than StepThreshold is stepped; anything else is slewed.
	StepThreshold time.Duration
	StepUpdates   int
	// MinPoll and MaxPoll bound the interval between two questions to the
	// chosen server once it answers.
	MinPoll, MaxPoll time.Duration
	// QuietOffset: an offset within it doubles the poll interval, a larger
	// one halves it.
	QuietOffset time.Duration
	// RetryMin is the first wait after every source failed; it doubles up
	// to MaxPoll while they keep failing.
	RetryMin time.Duration
}

// DefaultPolicy is chrony's AL2023 behaviour with timesyncd's poll
// bounds.
//
// Why a 1 s step threshold: the kernel's PLL slews at most 500 ppm, so a
// second takes over half an hour to slew away, while TLS (kubelet's
// client certificate, the API server's) tolerates far more than that; a
// smaller offset is slewed so the wall clock never jumps back under
// running logs. A larger one is an RTC that is plainly wrong (a stopped
// instance's, or a VM's), and slewing it would take days. After the first
// three updates nothing is stepped, as with chrony: a clock that was right
// cannot jump far on its own.
func DefaultPolicy() Policy {
	return Policy{
		StepThreshold: time.Second,
		StepUpdates:   3,
		MinPoll:       64 * time.Second,
		MaxPoll:       1024 * time.Second,
		QuietOffset:   50 * time.Millisecond,
		RetryMin:      2 * time.Second,
	}
}

// Action is what to do to the clock.
type Action int

// The actions.
const (
	None Action = iota
	Step
	Slew
)

func (a Action) String() string {
	switch a {
	case Step:
		return "step"
	case Slew:
		return "slew"
	}
	return "none"
}

// Sample is one question to one source: its answer or its failure.
type Sample struct {
	// Source is the index in the source list.
	Source int
	// Offset is what to add to the local clock to get the server's.
	Offset time.Duration
	RTT    time.Duration
	// RootDistance is the server's error bound towards its reference
	// clock, plus half the round trip.
	RootDistance time.Duration
	Stratum      uint8
	// Err is set when there was no usable answer.
	Err error
}

// Decision is what Machine says after a sample.
type Decision struct {
	Action Action
	// Offset is the step or the slew.
	Offset time.Duration
	// Poll is the poll interval from now on; the kernel's PLL time
	// constant follows it.
	Poll time.Duration
	// MaxError and EstError go to the kernel with the change, so readers
	// of adjtimex(2) see how good the clock is.
	MaxError, EstError time.Duration
	// Switched says the sample's source is now the chosen one and was
	// not before.
	Switched bool
	// Reason says why, for the log.
	Reason string
}

// Machine decides, from samples, what to do to the clock and whom to ask
// next. It starts with a burst (every source at once, first good answer
// wins), then asks the chosen source every poll interval, and on a failure
// moves to the next source in order; after a whole round of failures it
// backs off. It is not safe for concurrent use.
type Machine struct {
	p       Policy
	n       int
	cur     int
	chosen  int
	burst   bool
	updates int
	poll    time.Duration
	retry   time.Duration
	wait    time.Duration
	// failsInRow counts failures since the last good answer.
	failsInRow int
}

// NewMachine is a machine for n sources, asked in priority order.
func NewMachine(n int, p Policy) *Machine {
	return &Machine{p: p, n: n, chosen: -1, poll: p.MinPoll, retry: p.RetryMin}
}

// Start begins the first burst and returns the sources to ask at once:
// all of them, so that one unreachable server cannot hold up the first
// sync.
func (m *Machine) Start() []int {
	m.burst = true
	out := make([]int, m.n)
	for i := range out {
		out[i] = i
	}
	return out
}

// EndBurst says every answer of the burst is in.
func (m *Machine) EndBurst() {
	m.burst = false
	if m.chosen >= 0 {
		m.cur = m.chosen
		m.failsInRow = 0
		m.wait = m.poll
		return
	}
	m.cur = 0
	m.backoff()
}

// Next says which source to ask next and how long to wait first.
func (m *Machine) Next() (source int, wait time.Duration) { return m.cur, m.wait }

// Chosen is the source whose answer set the clock last, or -1.
func (m *Machine) Chosen() int { return m.chosen }

// Updates is how many times the clock was stepped or slewed.
func (m *Machine) Updates() int { return m.updates }

// Observe takes one sample and says what to do to the clock.
func (m *Machine) Observe(s Sample) Decision {
	if s.Source < 0 || s.Source >= m.n {
		return Decision{Poll: m.poll, Reason: fmt.Sprintf("sample from unknown source %d ignored", s.Source)}
	}
	if s.Err != nil {
		return m.failed(s)
	}
	if m.burst && m.chosen >= 0 {
		// The burst's first good answer already set the clock; a second
		// offset measured before that change took effect is stale.
		return Decision{Poll: m.poll, Reason: "burst already answered"}
	}
	d := Decision{MaxError: s.RootDistance, EstError: s.RTT / 2, Switched: m.chosen != s.Source}
	m.chosen, m.cur = s.Source, s.Source
	m.failsInRow = 0
	m.retry = m.p.RetryMin
	abs := s.Offset.Abs()
	switch {
	case m.updates < m.p.StepUpdates && abs > m.p.StepThreshold:
		d.Action, d.Offset = Step, s.Offset
		d.Reason = fmt.Sprintf("offset %s is over %s within the first %d updates", s.Offset, m.p.StepThreshold, m.p.StepUpdates)
		// Look again soon after a jump, as after a large slew.
		m.poll = m.p.MinPoll
	default:
		d.Action, d.Offset = Slew, s.Offset
		if abs <= m.p.QuietOffset {
			m.poll = min(m.poll*2, m.p.MaxPoll)
			d.Reason = fmt.Sprintf("offset %s within %s", s.Offset, m.p.QuietOffset)
		} else {
			m.poll = max(m.poll/2, m.p.MinPoll)
			d.Reason = fmt.Sprintf("offset %s over %s", s.Offset, m.p.QuietOffset)
			if abs > m.p.StepThreshold {
				d.Reason += "; too late to step, slewing (at most 500 ppm)"
			}
		}
	}
	m.updates++
	m.wait = m.poll
	d.Poll = m.poll
	return d
}

func (m *Machine) failed(s Sample) Decision {
	d := Decision{Poll: m.poll, Reason: fmt.Sprintf("source %d: %v", s.Source, s.Err)}
	if m.burst {
		if m.chosen < 0 {
			m.failsInRow++
		}
		return d
	}
	m.failsInRow++
	m.cur = (s.Source + 1) % m.n
	if m.failsInRow%m.n == 0 {
		// Every source failed in turn: wait before the next round.
		m.backoff()
		d.Reason += fmt.Sprintf("; every source failed, next round in %s", m.wait)
		return d
	}
	// Fail over at once: each question has its own timeout already.
	m.wait = 0
	d.Reason += fmt.Sprintf("; trying source %d", m.cur)
	return d
}

func (m *Machine) backoff() {
	m.wait = m.retry
	m.retry = min(m.retry*2, m.p.MaxPoll)
}
