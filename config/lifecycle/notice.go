// Package lifecycle decides what berth does about the notices EC2 gives a
// running instance on IMDS: a spot interruption (spot/instance-action), a
// rebalance recommendation (events/recommendations/rebalance) and an Auto
// Scaling target lifecycle state (autoscaling/target-lifecycle-state).
// Without it a node needs a DaemonSet (aws-node-termination-handler) to
// watch them; berth owns the node, so it watches them itself.
//
// The package is pure: it parses the answers, reads the policy from the
// NodeConfig's berth.dev/ annotations and, in Tracker, turns each poll's
// outcome into a decision (a new notice and what to do about it, an error
// worth a log line). lifecycle/watch does the polling and acts.
package lifecycle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Signal names one of the three IMDS notices.
type Signal string

// The signals, in the order they are polled: the spot notice first, since
// it leaves two minutes at most.
const (
	Spot      Signal = "spot-interruption"
	Rebalance Signal = "rebalance-recommendation"
	ASG       Signal = "asg-lifecycle"
)

// Signals are all signals, in polling order.
func Signals() []Signal { return []Signal{Spot, Rebalance, ASG} }

// Path is the IMDS path of a signal, relative to /latest/.
func (s Signal) Path() string {
	switch s {
	case Spot:
		return "meta-data/spot/instance-action"
	case Rebalance:
		return "meta-data/events/recommendations/rebalance"
	case ASG:
		return "meta-data/autoscaling/target-lifecycle-state"
	}
	return ""
}

// MaxAnswer bounds an answer the parsers accept. EC2's are under 100
// bytes; imds.MaxMetadataSize bounds what is read at all.
const MaxAnswer = 1 << 10

// The spot instance actions EC2 gives.
const (
	SpotTerminate = "terminate"
	SpotStop      = "stop"
	SpotHibernate = "hibernate"
)

// ASG target lifecycle states that end the instance's life as a node:
// Warmed:Terminated is a warm-pool instance being terminated.
const (
	ASGTerminated       = "Terminated"
	ASGWarmedTerminated = "Warmed:Terminated"
)

// knownASGStates are the states EC2 documents for
// autoscaling/target-lifecycle-state. Others are accepted (EC2 adds states
// over time) when they look like a state name.
func knownASGStates() []string {
	return []string{"Detached", "InService", "Standby", "Terminated",
		"Warmed:Hibernated", "Warmed:Running", "Warmed:Stopped", "Warmed:Terminated"}
}

var asgStateRE = regexp.MustCompile(`^[A-Z][A-Za-z]{0,31}(:[A-Z][A-Za-z]{0,31})?$`)

// Notice is one notice read from IMDS.
type Notice struct {
	Signal Signal `json:"signal"`
	// Detail is the spot action (terminate, stop, hibernate) or the ASG
	// target state (InService, Terminated, ...); empty for a rebalance
	// recommendation.
	Detail string `json:"detail,omitempty"`
	// Time is when the spot action happens, or when the rebalance
	// recommendation was made; zero for an ASG state, which has none.
	Time time.Time `json:"time,omitzero"`
}

// String is the notice as the console and the shutdown reason name it.
func (n Notice) String() string {
	switch n.Signal {
	case Spot:
		return fmt.Sprintf("spot interruption notice: %s at %s", n.Detail, n.Time.UTC().Format(time.RFC3339))
	case Rebalance:
		return "rebalance recommendation of " + n.Time.UTC().Format(time.RFC3339)
	case ASG:
		return "auto scaling target lifecycle state " + n.Detail
	}
	return string(n.Signal)
}

// key tells notices apart: a change of any field is a new notice.
func (n Notice) key() string {
	return string(n.Signal) + "\x00" + n.Detail + "\x00" + n.Time.UTC().Format(time.RFC3339Nano)
}

// Parse parses a 200 answer from sig's path.
func Parse(sig Signal, b []byte) (Notice, error) {
	var n Notice
	var err error
	switch sig {
	case Spot:
		n, err = ParseSpotAction(b)
	case Rebalance:
		n, err = ParseRebalance(b)
	case ASG:
		n, err = ParseTargetLifecycleState(b)
	default:
		return Notice{}, fmt.Errorf("unknown lifecycle signal %q", sig)
	}
	if err != nil {
		return Notice{}, fmt.Errorf("%s: %w", sig.Path(), err)
	}
	return n, nil
}

// ParseSpotAction parses spot/instance-action:
// {"action": "terminate", "time": "2017-09-18T08:22:00Z"}. Both fields
// are required; unknown fields are allowed, as EC2 adds fields to its
// documents over time.
func ParseSpotAction(b []byte) (Notice, error) {
	var v struct {
		Action *string `json:"action"`
		Time   *string `json:"time"`
	}
	if err := decodeObject(b, &v); err != nil {
		return Notice{}, err
	}
	if v.Action == nil {
		return Notice{}, errors.New(`no "action" field`)
	}
	if a := *v.Action; !slices.Contains([]string{SpotTerminate, SpotStop, SpotHibernate}, a) {
		return Notice{}, fmt.Errorf(`"action": %q is none of %s, %s, %s`, cut(a), SpotTerminate, SpotStop, SpotHibernate)
	}
	t, err := parseTime("time", v.Time)
	if err != nil {
		return Notice{}, err
	}
	return Notice{Signal: Spot, Detail: *v.Action, Time: t}, nil
}

// ParseRebalance parses events/recommendations/rebalance:
// {"noticeTime": "2020-10-27T08:22:00Z"}.
func ParseRebalance(b []byte) (Notice, error) {
	var v struct {
		NoticeTime *string `json:"noticeTime"`
	}
	if err := decodeObject(b, &v); err != nil {
		return Notice{}, err
	}
	t, err := parseTime("noticeTime", v.NoticeTime)
	if err != nil {
		return Notice{}, err
	}
	return Notice{Signal: Rebalance, Time: t}, nil
}

// ParseTargetLifecycleState parses autoscaling/target-lifecycle-state,
// plain text such as "InService" or "Warmed:Stopped". Surrounding white
// space is dropped; anything else that is not a state name is refused.
func ParseTargetLifecycleState(b []byte) (Notice, error) {
	if len(b) > MaxAnswer {
		return Notice{}, fmt.Errorf("%d bytes, more than the %d a lifecycle state can be", len(b), MaxAnswer)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return Notice{}, errors.New("empty state")
	}
	if !asgStateRE.MatchString(s) {
		return Notice{}, fmt.Errorf("%q is not a lifecycle state name (EC2 gives one of %s)", cut(s), strings.Join(knownASGStates(), ", "))
	}
	return Notice{Signal: ASG, Detail: s}, nil
}

func decodeObject(b []byte, v any) error {
	if len(b) > MaxAnswer {
		return fmt.Errorf("%d bytes, more than the %d a notice can be", len(b), MaxAnswer)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	if rest := bytes.TrimSpace(b[dec.InputOffset():]); len(rest) > 0 {
		return errors.New("trailing data after the JSON object")
	}
	return nil
}

func parseTime(field string, v *string) (time.Time, error) {
	if v == nil {
		return time.Time{}, fmt.Errorf("no %q field", field)
	}
	t, err := time.Parse(time.RFC3339, *v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q: %q is not an RFC 3339 time such as 2017-09-18T08:22:00Z", field, cut(*v))
	}
	return t.UTC(), nil
}

// cut keeps quoted input short in errors.
func cut(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
