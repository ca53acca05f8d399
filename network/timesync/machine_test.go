package timesync

import (
	"errors"
	"testing"
	"time"
)

var errTimeout = errors.New("i/o timeout")

func ok(src int, off time.Duration) Sample {
	return Sample{Source: src, Offset: off, RTT: 2 * time.Millisecond, RootDistance: 5 * time.Millisecond, Stratum: 3}
}

func fail(src int) Sample { return Sample{Source: src, Err: errTimeout} }

// TestStepOnceThenSlew: a large offset at boot is stepped, the follow-ups
// are slewed, and the poll interval backs off from 64 s to 1024 s while
// the clock stays quiet.
func TestStepOnceThenSlew(t *testing.T) {
	m := NewMachine(1, DefaultPolicy())
	m.Start()
	d := m.Observe(ok(0, -3*time.Hour))
	if d.Action != Step || d.Offset != -3*time.Hour || !d.Switched {
		t.Fatalf("first sample 3h off: %+v, want a step of -3h that chooses the source", d)
	}
	if d.MaxError != 5*time.Millisecond || d.EstError != time.Millisecond {
		t.Errorf("error bounds %s/%s, want the root distance 5ms and half the RTT 1ms", d.MaxError, d.EstError)
	}
	m.EndBurst()
	if src, wait := m.Next(); src != 0 || wait != 64*time.Second {
		t.Errorf("after the step Next = %d, %s; want source 0 in 64s", src, wait)
	}
	want := []time.Duration{128 * time.Second, 256 * time.Second, 512 * time.Second, 1024 * time.Second, 1024 * time.Second}
	for i, w := range want {
		d := m.Observe(ok(0, 3*time.Millisecond))
		if d.Action != Slew || d.Offset != 3*time.Millisecond || d.Switched {
			t.Fatalf("sample %d: %+v, want a slew of 3ms from the same source", i+2, d)
		}
		if _, wait := m.Next(); wait != w || d.Poll != w {
			t.Errorf("sample %d: wait %s poll %s, want %s", i+2, wait, d.Poll, w)
		}
	}
	// Past the step window a large offset is slewed, and polls tighten.
	d = m.Observe(ok(0, 5*time.Second))
	if d.Action != Slew {
		t.Errorf("a 5s offset after %d updates: %s, want a slew (makestep 1.0 3)", m.Updates()-1, d.Action)
	}
	if d.Poll != 512*time.Second {
		t.Errorf("poll after a large offset %s, want halved to 512s", d.Poll)
	}
}

// TestStepWindow: the step window counts clock updates, whichever way
// they went, so a 2 s offset on the third update still steps and on the
// fourth does not; a small offset never steps.
func TestStepWindow(t *testing.T) {
	m := NewMachine(1, DefaultPolicy())
	m.Start()
	if d := m.Observe(ok(0, 900*time.Millisecond)); d.Action != Slew {
		t.Errorf("0.9s at boot: %s, want a slew (threshold 1s)", d.Action)
	}
	m.EndBurst()
	if d := m.Observe(ok(0, -time.Second)); d.Action != Slew {
		t.Errorf("exactly -1s: %s, want a slew (the threshold is exclusive)", d.Action)
	}
	if d := m.Observe(ok(0, 2*time.Second)); d.Action != Step {
		t.Errorf("2s on the third update: %s, want a step", d.Action)
	}
	if d := m.Observe(ok(0, 2*time.Second)); d.Action != Slew {
		t.Errorf("2s on the fourth update: %s, want a slew", d.Action)
	}
}

// TestBurstFirstAnswerWins: every source is asked at boot; the first good
// answer sets the clock, later answers of the same burst are ignored (they
// were measured against the clock before the step), and so are failures.
func TestBurstFirstAnswerWins(t *testing.T) {
	m := NewMachine(3, DefaultPolicy())
	if got := m.Start(); len(got) != 3 || got[0] != 0 || got[2] != 2 {
		t.Fatalf("Start = %v, want every source", got)
	}
	if d := m.Observe(fail(0)); d.Action != None {
		t.Errorf("failure: %+v", d)
	}
	if d := m.Observe(ok(2, 10*time.Second)); d.Action != Step {
		t.Errorf("first answer (source 2): %s, want a step", d.Action)
	}
	if d := m.Observe(ok(1, 10*time.Second)); d.Action != None {
		t.Errorf("second answer of the burst: %s, want none", d.Action)
	}
	m.EndBurst()
	if m.Chosen() != 2 {
		t.Errorf("chosen %d, want 2", m.Chosen())
	}
	if src, wait := m.Next(); src != 2 || wait != 64*time.Second {
		t.Errorf("Next = %d, %s; want 2 in 64s", src, wait)
	}
}

// TestFailoverAndBackoff: when the chosen server stops answering, the
// next source is asked at once; after a whole round of failures the wait
// doubles from 2 s up to 1024 s, and an answer resets it.
func TestFailoverAndBackoff(t *testing.T) {
	m := NewMachine(2, DefaultPolicy())
	m.Start()
	m.Observe(ok(0, time.Millisecond))
	m.Observe(fail(1))
	m.EndBurst()
	if src, _ := m.Next(); src != 0 {
		t.Fatalf("Next source %d after the burst, want the one that answered, 0", src)
	}
	m.Observe(fail(0))
	if src, wait := m.Next(); src != 1 || wait != 0 {
		t.Errorf("after the chosen source failed: Next = %d, %s; want 1 at once", src, wait)
	}
	var waits []time.Duration
	src := 1
	for range 20 {
		m.Observe(fail(src))
		var w time.Duration
		src, w = m.Next()
		if w > 0 {
			waits = append(waits, w)
		}
	}
	want := []time.Duration{2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}
	if len(waits) != len(want) {
		t.Fatalf("backoff waits %v, want %v seconds", waits, want)
	}
	for i := range want {
		if waits[i] != want[i]*time.Second {
			t.Errorf("backoff %d: %s, want %ds", i, waits[i], want[i])
		}
	}
	d := m.Observe(ok(src, 20*time.Millisecond))
	if d.Action != Slew {
		t.Errorf("answer after the failures: %+v", d)
	}
	m.Observe(fail(src))
	m.Observe(fail((src + 1) % 2))
	if _, w := m.Next(); w != 2*time.Second {
		t.Errorf("first backoff after an answer %s, want it reset to 2s", w)
	}
}

// TestBurstAllFail: a burst where nobody answers backs off and starts the
// next round at the first source.
func TestBurstAllFail(t *testing.T) {
	m := NewMachine(2, DefaultPolicy())
	for _, i := range m.Start() {
		m.Observe(fail(i))
	}
	m.EndBurst()
	if src, wait := m.Next(); src != 0 || wait != 2*time.Second {
		t.Errorf("Next = %d, %s; want 0 in 2s", src, wait)
	}
	if m.Chosen() != -1 || m.Updates() != 0 {
		t.Errorf("chosen %d updates %d, want -1 and 0", m.Chosen(), m.Updates())
	}
	if d := m.Observe(ok(7, time.Second)); d.Action != None {
		t.Errorf("a sample from an unknown source: %s, want none", d.Action)
	}
}
