package lifecycle

import (
	"fmt"
	"time"
)

// ErrorLogEvery is how often, at most, a path that keeps failing gets a
// log line: the first failure is logged at once, then one line per
// ErrorLogEvery with the count since, so a node whose IMDS is broken for
// a day does not log 17,000 lines a path.
const ErrorLogEvery = 5 * time.Minute

// MaxRecords bounds the notices kept for the report: the ASG state can
// change over a node's life, and each change is a record.
const MaxRecords = 32

// Result is one poll of one signal's path, as the poller saw it.
type Result struct {
	// Body is the answer to a 200.
	Body []byte
	// NotFound is a 404: the normal "no notice" answer.
	NotFound bool
	// Err is any other failure.
	Err error
}

// Decision is what the poller does after one poll. The zero Decision is
// "nothing new".
type Decision struct {
	// Notice is set when a new notice came (or a notice changed).
	Notice *Notice
	// Action is what to do about Notice: ActionShutdown (at most once in
	// a Tracker's life) or ActionLog.
	Action Action
	// Why says why Action is not the policy's (a shutdown already asked
	// for, an ASG state that is not a termination).
	Why string
	// Withdrawn is set when the notice last seen went away (a 404 again).
	Withdrawn *Notice
	// LogErr is set when a failure is worth a log line now; Suppressed
	// counts the failures since the last line that were not logged.
	LogErr     error
	Suppressed int
	// Recovered is set when the path answers again after Failures
	// failures in a row.
	Recovered bool
	Failures  int
}

// Record is one notice in the report, with when berth saw it and what it
// did.
type Record struct {
	Notice
	Seen   time.Time `json:"seen"`
	Action Action    `json:"action"`
	Why    string    `json:"why,omitempty"`
}

// Status is the lifecycle section of the boot report.
type Status struct {
	Policy   Policy   `json:"policy"`
	Polling  []string `json:"polling"`
	Interval string   `json:"interval"`
	// Notices are the notices seen, oldest first, at most MaxRecords (the
	// first ones; Dropped counts the rest).
	Notices []Record `json:"notices,omitempty"`
	Dropped int      `json:"dropped,omitempty"`
	// Shutdown is the notice that started the shutdown.
	Shutdown *Record `json:"shutdown,omitempty"`
	// Errors counts failed polls; LastError is the latest.
	Errors    int    `json:"errors,omitempty"`
	LastError string `json:"lastError,omitempty"`
}

// Tracker is the decision half of the watcher: it remembers what each
// path last said and how it has been failing. It is not safe for
// concurrent use; the watcher polls from one goroutine.
type Tracker struct {
	policy   Policy
	last     map[Signal]*Notice
	failing  map[Signal]*failure
	shutdown bool
	status   Status
}

type failure struct {
	count      int
	lastLogged time.Time
	suppressed int
}

// NewTracker starts a tracker for policy, polling every interval.
func NewTracker(p Policy, interval time.Duration) *Tracker {
	t := &Tracker{policy: p, last: map[Signal]*Notice{}, failing: map[Signal]*failure{}}
	t.status = Status{Policy: p, Polling: []string{}, Interval: interval.String()}
	for _, s := range p.Polled() {
		t.status.Polling = append(t.status.Polling, s.Path())
	}
	return t
}

// Observe takes one poll's result for sig at now and decides.
func (t *Tracker) Observe(now time.Time, sig Signal, r Result) Decision {
	var d Decision
	if r.Err == nil && !r.NotFound {
		n, err := Parse(sig, r.Body)
		if err != nil {
			r.Err = err
		} else {
			d = t.notice(now, n)
		}
	}
	if r.Err != nil {
		t.status.Errors++
		t.status.LastError = cut(r.Err.Error())
		f := t.failing[sig]
		if f == nil {
			f = &failure{}
			t.failing[sig] = f
		}
		f.count++
		if f.count == 1 || now.Sub(f.lastLogged) >= ErrorLogEvery {
			d.LogErr, d.Suppressed = r.Err, f.suppressed
			f.lastLogged, f.suppressed = now, 0
		} else {
			f.suppressed++
		}
		return d
	}
	if f := t.failing[sig]; f != nil {
		d.Recovered, d.Failures = true, f.count
		delete(t.failing, sig)
	}
	if r.NotFound {
		if prev := t.last[sig]; prev != nil {
			d.Withdrawn = prev
			delete(t.last, sig)
		}
	}
	return d
}

// notice decides about a notice read from IMDS.
func (t *Tracker) notice(now time.Time, n Notice) Decision {
	if prev := t.last[n.Signal]; prev != nil && prev.key() == n.key() {
		return Decision{}
	}
	t.last[n.Signal] = &n
	a, why := t.policy.For(n.Signal), ""
	if n.Signal == ASG && n.Detail != ASGTerminated && n.Detail != ASGWarmedTerminated && a == ActionShutdown {
		a, why = ActionLog, "only the states "+ASGTerminated+" and "+ASGWarmedTerminated+" end the node"
	}
	if a == ActionShutdown && t.shutdown {
		a, why = ActionLog, "the shutdown is already under way"
	}
	if a == ActionShutdown {
		t.shutdown = true
	}
	rec := Record{Notice: n, Seen: now.UTC(), Action: a, Why: why}
	if len(t.status.Notices) < MaxRecords {
		t.status.Notices = append(t.status.Notices, rec)
	} else {
		t.status.Dropped++
	}
	if a == ActionShutdown {
		t.status.Shutdown = &rec
	}
	return Decision{Notice: &n, Action: a, Why: why}
}

// Status is the report's lifecycle section as it stands.
func (t *Tracker) Status() Status {
	s := t.status
	s.Polling = append([]string(nil), s.Polling...)
	s.Notices = append([]Record(nil), s.Notices...)
	if s.Shutdown != nil {
		c := *s.Shutdown
		s.Shutdown = &c
	}
	return s
}

// Message is the console line for a decision about a notice.
func (d Decision) Message() string {
	if d.Notice == nil {
		return ""
	}
	switch d.Action {
	case ActionShutdown:
		return fmt.Sprintf("%s: starting the graceful shutdown (power off)", d.Notice)
	default:
		return d.Notice.String()
	}
}
