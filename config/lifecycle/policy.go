package lifecycle

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Action is what berth does about a notice.
type Action string

// The actions.
const (
	// ActionShutdown starts the node's graceful shutdown and powers off,
	// as the ACPI power button does.
	ActionShutdown Action = "shutdown"
	// ActionLog logs the notice and records it in the boot report.
	ActionLog Action = "log"
	// ActionIgnore does not poll the signal's path at all.
	ActionIgnore Action = "ignore"
)

// Actions are the valid actions, for messages.
func Actions() []Action { return []Action{ActionShutdown, ActionLog, ActionIgnore} }

// The NodeConfig annotations that set the policy. They are berth's
// extension (nodeadm ignores metadata), so a NodeConfig with them is still
// a valid nodeadm NodeConfig:
//
//	metadata:
//	  annotations:
//	    berth.dev/on-spot-interruption: shutdown
//	    berth.dev/on-rebalance-recommendation: log
//	    berth.dev/on-asg-termination: shutdown
const (
	// SpotAnnotation is for every spot instance action: terminate, stop
	// and hibernate (berth cannot hibernate; it powers off in order).
	SpotAnnotation = "berth.dev/on-spot-interruption"
	// RebalanceAnnotation is for a rebalance recommendation.
	RebalanceAnnotation = "berth.dev/on-rebalance-recommendation"
	// ASGAnnotation is for the ASG target states Terminated and
	// Warmed:Terminated. Other states are logged when they change; with
	// ignore, the path is not polled at all.
	ASGAnnotation = "berth.dev/on-asg-termination"
)

// AnnotationPrefix is what berth's lifecycle annotations share, so a typo
// in one is an error rather than silently the default.
const AnnotationPrefix = "berth.dev/on-"

// Policy says what berth does about each signal.
type Policy struct {
	Spot      Action `json:"spotInterruption"`
	Rebalance Action `json:"rebalanceRecommendation"`
	ASG       Action `json:"asgTermination"`
}

// DefaultPolicy is what berth does without annotations: pods are
// terminated and reported before EC2 reclaims a spot instance or the ASG
// terminates it; a rebalance recommendation is only a hint that spot
// capacity is getting scarce, so it is logged.
func DefaultPolicy() Policy {
	return Policy{Spot: ActionShutdown, Rebalance: ActionLog, ASG: ActionShutdown}
}

// For is the action for sig.
func (p Policy) For(sig Signal) Action {
	switch sig {
	case Spot:
		return p.Spot
	case Rebalance:
		return p.Rebalance
	case ASG:
		return p.ASG
	}
	return ActionIgnore
}

// Polled are the signals whose paths are polled, in polling order.
func (p Policy) Polled() []Signal {
	var out []Signal
	for _, s := range Signals() {
		if p.For(s) != ActionIgnore {
			out = append(out, s)
		}
	}
	return out
}

// AnnotationError is one bad lifecycle annotation.
type AnnotationError struct {
	Annotation string
	Err        error
}

func (e *AnnotationError) Error() string {
	return fmt.Sprintf("metadata.annotations[%q]: %v", e.Annotation, e.Err)
}

func (e *AnnotationError) Unwrap() error { return e.Err }

// PolicyFromAnnotations reads the policy from a NodeConfig's annotations,
// starting from DefaultPolicy. Every bad annotation is an
// *AnnotationError, all joined; the policy returned then keeps the
// default for each bad one.
func PolicyFromAnnotations(ann map[string]string) (Policy, error) {
	p := DefaultPolicy()
	fields := map[string]*Action{SpotAnnotation: &p.Spot, RebalanceAnnotation: &p.Rebalance, ASGAnnotation: &p.ASG}
	keys := make([]string, 0, len(ann))
	for k := range ann {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var errs []error
	for _, k := range keys {
		dst, ok := fields[k]
		if !ok {
			if strings.HasPrefix(k, AnnotationPrefix) {
				errs = append(errs, &AnnotationError{Annotation: k, Err: fmt.Errorf("not a berth annotation; the lifecycle ones are %s, %s and %s",
					SpotAnnotation, RebalanceAnnotation, ASGAnnotation)})
			}
			continue
		}
		a := Action(strings.TrimSpace(ann[k]))
		if !slices.Contains(Actions(), a) {
			errs = append(errs, &AnnotationError{Annotation: k, Err: fmt.Errorf("%q is not an action; want %s, %s or %s",
				cut(ann[k]), ActionShutdown, ActionLog, ActionIgnore)})
			continue
		}
		*dst = a
	}
	return p, errors.Join(errs...)
}
