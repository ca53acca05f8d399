// Package joincause decides, from kubelet's log, why a node has not
// registered with the API server yet: the line berth repeats on the
// console until it does. It is pure: lines and their arrival times in, one
// sentence out.
//
// A cause is a line that says something failed: klog severity E or F
// (ranked first), W (second), or an I line carrying err= (last: kubelet's
// TLS bootstrap reports "Failed to connect to apiserver" err=... at info
// level, and while it waits that is all it says). An info line without err=
// is never a cause: a FLAG dump line that mentions certificates says
// nothing about why the join fails.
//
// Some errors are noise until the node registers: every healthy join in
// the QEMU suite logs them in the seconds before "Successfully registered
// node" (see noise), so they cannot be why a node does not join. The
// commonest, "node ... not found", is the symptom itself.
//
// Repeats are one cause: lines are keyed by message and err, so kubelet's
// retries (with a changing interval= or timestamp) refresh one entry. The
// cause shown is the latest line of the best rank seen within Window; when
// nothing is that recent, the latest line of the best rank ever seen.
package joincause

import (
	"regexp"
	"strings"
	"time"

	"github.com/berth-node/berth/runtime/kubelet/klog"
)

// Window is how recent a line must be to outrank a later one of lower
// rank. kubelet retries registration with a backoff capped at 7 s and
// bootstrap's server check every 2 s, so a cause still current has
// repeated within a minute; a startup error older than that has stopped.
const Window = time.Minute

// maxEntries bounds the distinct lines kept: kubelet's reflectors fail
// per resource type, a few dozen kinds at most.
const maxEntries = 64

// Rank orders causes: a higher rank wins over a more recent lower one.
type Rank int

const (
	NotCause Rank = iota
	InfoErr       // I line with err=
	Warn          // W line
	Err           // E or F line
)

// noise are kubelet errors that say nothing about why a node does not
// join. Each was logged, before registration, by nodes that then
// registered (TestJoin, then called TestJoinEKSAuth, TestJoin/ServiceRestarts,
// TestHostContract): they are kubelet starting up, not failing.
var noise = []struct {
	msg string // prefix of the message
	why string
}{
	{"Skipping pod synchronization", "PLEG and the runtime status check have not run yet: start-up"},
	{"Image garbage collection failed once", "image stats are not collected yet: start-up"},
	{"Failed to read data from checkpoint", "a first boot has no CPU/memory manager checkpoint"},
	{"eviction manager: failed to check if we have separate container filesystem", "containerd has no imagefs label; kubelet says it ignores it"},
	{"exiting analyzeLines", "cAdvisor's OOM reader: about OOM events, not the join"},
	{"Housekeeping took longer than expected", "a slow (TCG) CPU, not a join failure"},
	// kubelet's feature-gate notices, a W line at every start when the
	// config sets a GA or deprecated gate (nodeadm's toggles set
	// DynamicResourceAllocation, GA since 1.34): configuration, not a join
	// failure. Taken as the cause, it hid kubelet's TLS bootstrap error.
	{"Setting GA feature gate", "a notice about the config's feature gates"},
	{"Setting deprecated feature gate", "a notice about the config's feature gates"},
}

// nodeNotFound is the symptom: kubelet's lister, the eviction manager, the
// CSINode and lease controllers and the status updater all fail with it
// until the node object exists. It says the node is not registered, which
// is what the caller already knows, and it is kubelet's most frequent line
// then, so it would hide the reason.
var nodeNotFound = regexp.MustCompile(`\bnodes? "[^"]*" not found`)

// StatsRace is what the console says for kubelet's refusal of an
// ephemeral-storage reservation against a capacity of 0: cAdvisor read the
// filesystem of kubelet's root dir from a mount that was gone by then (see
// docs/design.md), and the supervisor restarts kubelet a second later. It
// is a note of the lowest rank, not a cause: the restart reads the real
// capacity.
const StatsRace = "kubelet's first start raced its filesystem statistics (cAdvisor read ephemeral-storage capacity 0); restarted"

// storageShortHint follows kubelet's refusal of an ephemeral-storage
// reservation that exceeds a real capacity: a configuration problem.
const storageShortHint = " (the filesystem of kubelet's root dir, /var/lib/kubelet, is smaller than kubeReserved plus systemReserved ephemeral-storage: lower them in the NodeConfig's spec.kubelet.config, or give /var more space)"

// reStorageCapacity finds the capacity in kubelet's "invalid Node
// Allocatable configuration" error for ephemeral-storage; the quantity is
// printed as Go's %v of resource.Quantity, {{value scale} ...}.
var reStorageCapacity = regexp.MustCompile(`Resource "ephemeral-storage" has a reservation of \{\{\d+ -?\d+\}.*? but capacity of \{\{(\d+) -?\d+\}`)

// storageCapacity returns the ephemeral-storage capacity kubelet refused
// its reservation against, when the line is that refusal.
func storageCapacity(l klog.Line) (capacity string, ok bool) {
	errVal, _ := l.Value("err")
	if m := reStorageCapacity.FindStringSubmatch(errVal); m != nil {
		return m[1], true
	}
	return "", false
}

// Classify ranks one parsed kubelet line as a cause.
func Classify(l klog.Line) Rank {
	if c, ok := storageCapacity(l); ok && c == "0" {
		return InfoErr
	}
	errVal, hasErr := l.Value("err")
	var r Rank
	switch l.Severity {
	case klog.Error, klog.Fatal:
		r = Err
	case klog.Warning:
		r = Warn
	case klog.Info:
		if !hasErr || errVal == "" {
			return NotCause
		}
		r = InfoErr
	default:
		return NotCause
	}
	if nodeNotFound.MatchString(l.Msg) || nodeNotFound.MatchString(errVal) {
		return NotCause
	}
	for _, n := range noise {
		if strings.HasPrefix(l.Msg, n.msg) {
			return NotCause
		}
	}
	return r
}

// Text is how a cause reads on the console: the message and err="...",
// "Unable to register node with API server: Post ...: connection refused",
// without klog's header.
func Text(l klog.Line) string {
	msg := strings.TrimSpace(l.Msg)
	errVal, _ := l.Value("err")
	if c, ok := storageCapacity(l); ok {
		if c == "0" {
			return StatsRace
		}
		return msg + ": " + errVal + storageShortHint
	}
	switch {
	case errVal == "":
		return msg
	case msg == "":
		return errVal
	}
	return msg + ": " + errVal
}

type entry struct {
	text string
	rank Rank
	last time.Time
}

// Tracker keeps the causes seen so far. The zero value is ready; it is not
// safe for concurrent use.
type Tracker struct {
	entries map[string]*entry
}

// Observe takes one kubelet output line and when it arrived. Lines that
// are not klog lines or not causes are ignored.
func (t *Tracker) Observe(line string, at time.Time) {
	l, err := klog.Parse(line)
	if err != nil {
		return
	}
	r := Classify(l)
	if r == NotCause {
		return
	}
	text := Text(l)
	if text == "" {
		return
	}
	key := string(l.Severity) + text
	if t.entries == nil {
		t.entries = make(map[string]*entry)
	}
	if e, ok := t.entries[key]; ok {
		if at.After(e.last) {
			e.last = at
		}
		return
	}
	if len(t.entries) >= maxEntries {
		t.evictOldest()
	}
	t.entries[key] = &entry{text: text, rank: r, last: at}
}

func (t *Tracker) evictOldest() {
	var oldKey string
	var old *entry
	for k, e := range t.entries {
		if old == nil || e.last.Before(old.last) || e.last.Equal(old.last) && k < oldKey {
			oldKey, old = k, e
		}
	}
	delete(t.entries, oldKey)
}

// Cause returns the cause to show at now, or "" when kubelet has said
// nothing that is one.
func (t *Tracker) Cause(now time.Time) string {
	var best, bestRecent *entry
	better := func(a, b *entry) bool {
		if b == nil {
			return true
		}
		if a.rank != b.rank {
			return a.rank > b.rank
		}
		if !a.last.Equal(b.last) {
			return a.last.After(b.last)
		}
		return a.text < b.text // same instant: any fixed order
	}
	for _, e := range t.entries {
		if better(e, best) {
			best = e
		}
		if now.Sub(e.last) <= Window && better(e, bestRecent) {
			bestRecent = e
		}
	}
	switch {
	case bestRecent != nil:
		return bestRecent.text
	case best != nil:
		return best.text
	}
	return ""
}
