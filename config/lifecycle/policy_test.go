package lifecycle

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestPolicyFromAnnotations(t *testing.T) {
	p, err := PolicyFromAnnotations(nil)
	if err != nil || p != DefaultPolicy() {
		t.Fatalf("no annotations: %+v, %v", p, err)
	}
	if want := (Policy{Spot: ActionShutdown, Rebalance: ActionLog, ASG: ActionShutdown}); p != want {
		t.Errorf("default policy %+v, want %+v", p, want)
	}
	p, err = PolicyFromAnnotations(map[string]string{
		SpotAnnotation: "log", RebalanceAnnotation: " shutdown ", ASGAnnotation: "ignore",
		"berth.dev/bootstrap-token": "abcdef.0123456789abcdef", "example.com/other": "x",
	})
	if want := (Policy{Spot: ActionLog, Rebalance: ActionShutdown, ASG: ActionIgnore}); err != nil || p != want {
		t.Errorf("all set: %+v, %v; want %+v", p, err, want)
	}
	if got, want := p.Polled(), []Signal{Spot, Rebalance}; !reflect.DeepEqual(got, want) {
		t.Errorf("Polled() = %v, want %v", got, want)
	}
}

func TestPolicyAnnotationErrors(t *testing.T) {
	p, err := PolicyFromAnnotations(map[string]string{
		SpotAnnotation: "drain", "berth.dev/on-spot-interuption": "log", RebalanceAnnotation: "log",
	})
	if want := (Policy{Spot: ActionShutdown, Rebalance: ActionLog, ASG: ActionShutdown}); p != want {
		t.Errorf("policy with errors %+v, want the defaults for the bad ones: %+v", p, want)
	}
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{
		`metadata.annotations["berth.dev/on-spot-interruption"]: "drain" is not an action; want shutdown, log or ignore`,
		`metadata.annotations["berth.dev/on-spot-interuption"]: not a berth annotation; the lifecycle ones are berth.dev/on-spot-interruption`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	var ae *AnnotationError
	if !errors.As(err, &ae) || ae.Annotation == "" {
		t.Errorf("error is not an *AnnotationError: %v", err)
	}
}
