package agent

import (
	"fmt"
	"strings"
	"time"

	"github.com/berth-node/berth/update/bootcount"
	"github.com/berth-node/berth/update/repo"
	"github.com/berth-node/berth/update/status"
)

// Results of an update beyond applying it (status.Result* are the
// applying's: staged, refused, failed).
const (
	// ResultTrial: the new version runs on trial.
	ResultTrial = "trial"
	// ResultBlessed: the new version passed its trial and stays.
	ResultBlessed = "blessed"
	// ResultRolledBack: the new version failed, and the previous one
	// runs again.
	ResultRolledBack = "rolled-back"
)

// Settle says what became of the pending update now that the machine has
// booted running (the running version) with booted as its entry
// (systemd-boot's, or the zero Entry off systemd-boot), on a trial boot or
// not, with entries on the ESP. It returns the state to keep from now on.
// It is pure.
//
// A boot of the new version on trial leaves the update pending (the
// trial decides). A boot of the new version without a counter means the
// trial was decided before the machine went down (blessed). Any other
// version running means the update did not take: cut off before its
// commit (PhaseApplying: nothing that boots was changed), or rolled back,
// by the trial (PhaseReverted, with its reason) or by systemd-boot when
// the new version's tries ran out before berth could judge it (a panic, a
// hang, a reset).
func Settle(s State, running string, trial bool, entries []bootcount.Entry, now time.Time) State {
	p := s.Pending
	if p == nil {
		return s
	}
	last := &status.LastUpdate{From: p.From, To: p.To, Slot: p.Slot, Entry: p.Entry, At: now}
	switch {
	case sameVersion(running, p.To) && trial:
		last.Result, last.Reason = ResultTrial, fmt.Sprintf("%s booted on trial", p.To)
		s.Last = last
		return s
	case sameVersion(running, p.To):
		last.Result, last.Reason = ResultBlessed, fmt.Sprintf("%s runs without a boot counter: its trial passed before the last reboot", p.To)
	case p.Phase == PhaseApplying:
		last.Result = status.ResultFailed
		last.Reason = fmt.Sprintf("the update to %s was cut off before it was committed (power lost or a reset); %s, untouched, still runs", p.To, running)
	default:
		last.Result = ResultRolledBack
		last.Reason = rollbackReason(p, entries)
		if s.RolledBack == nil {
			s.RolledBack = map[string]string{}
		}
		s.RolledBack[p.To] = last.Reason
	}
	s.Last, s.Pending = last, nil
	return s
}

// rollbackReason says why the new version is not running.
func rollbackReason(p *Pending, entries []bootcount.Entry) string {
	if p.Phase == PhaseReverted && p.Reason != "" {
		return p.Reason
	}
	for _, e := range entries {
		if !sameVersion(e.Version, p.To) {
			continue
		}
		if e.Counted && e.Left == 0 {
			return fmt.Sprintf("rolled back: %s used up its %d tries without berth judging it (a panic, a hang or a reset before kubelet was Ready); systemd-boot started the previous version", p.To, e.Done)
		}
		if e.Counted {
			return fmt.Sprintf("rolled back: the boot loader started another version while %s still had %d tries (chosen by hand, or the loader's default)", p.To, e.Left)
		}
	}
	return fmt.Sprintf("rolled back: %s's UKI is gone from the ESP", p.To)
}

// sameVersion compares release versions as versions ("v1.1" is
// "1.1.0"), anything else by name.
func sameVersion(a, b string) bool {
	va, erra := repo.ParseVersion(a)
	vb, errb := repo.ParseVersion(b)
	if erra == nil && errb == nil {
		return va.Compare(vb) == 0
	}
	return a != "" && strings.EqualFold(a, b)
}

// Trigger is what the Node's annotations ask of the agent.
type Trigger struct {
	// To is the version asked for (AnnotationUpdateTo's value, trimmed).
	To string
	// AllowDowngrade says an older version may be applied.
	AllowDowngrade bool
	// Raw identifies the request: the annotations' values together. A
	// trigger acted on is not acted on again until one of them changes.
	Raw string
}

// TriggerOf reads the trigger from a Node's annotations; ok is false when
// there is none.
func TriggerOf(annotations map[string]string) (t Trigger, ok bool, err error) {
	to := strings.TrimSpace(annotations[AnnotationUpdateTo])
	if to == "" {
		return Trigger{}, false, nil
	}
	t = Trigger{To: to, Raw: to}
	switch v := strings.TrimSpace(annotations[AnnotationAllowDowngrade]); strings.ToLower(v) {
	case "", "false":
	case "true":
		t.AllowDowngrade, t.Raw = true, to+" (downgrade allowed)"
	default:
		return Trigger{}, false, fmt.Errorf("annotation %s: %q: want true or false", AnnotationAllowDowngrade, v)
	}
	if err := bootcount.CheckVersion(to); err != nil {
		return Trigger{}, false, fmt.Errorf("annotation %s: %w", AnnotationUpdateTo, err)
	}
	return t, true, nil
}

// Act says whether the agent should apply t now, and if not, why (an
// empty reason: nothing to say, the node is where the trigger wants it).
// final says the answer stands for as long as the trigger does not
// change; otherwise it is a wait (a trial or an update under way), and
// the trigger is acted on once it is over. It is pure.
func Act(s State, st status.Status, t Trigger) (act bool, reason string, final bool) {
	switch {
	case sameVersion(st.Version, t.To):
		return false, "", true
	case s.Handled == t.Raw:
		return false, "", true
	case st.Trial:
		return false, fmt.Sprintf("%s is on trial; an update waits until it is blessed or rolled back", st.Version), false
	case s.Pending != nil:
		return false, fmt.Sprintf("an update to %s is still pending (%s)", s.Pending.To, s.Pending.Phase), false
	}
	if why, ok := s.RolledBack[t.To]; ok {
		return false, fmt.Sprintf("%s rolled back on this node before (%s); it is not tried again", t.To, why), true
	}
	return true, "", false
}
