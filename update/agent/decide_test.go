package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/update/bootcount"
	"github.com/berth-node/berth/update/status"
)

func entry(t *testing.T, name string) bootcount.Entry {
	t.Helper()
	e, err := bootcount.Parse(name)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestSettle(t *testing.T) {
	staged := &Pending{Phase: PhaseStaged, From: "1.0.0", To: "1.1.0", Slot: "b", Entry: "berth-1.1.0+3.efi", At: t0}
	for _, c := range []struct {
		name    string
		s       State
		running string
		trial   bool
		esp     []string
		result  string
		reason  string
		pending bool
		rolled  bool
	}{
		{name: "nothing pending", s: State{}, running: "1.0.0"},
		{name: "new version on trial", s: State{Pending: staged}, running: "1.1.0", trial: true, esp: []string{"berth-1.0.0.efi", "berth-1.1.0+2-1.efi"},
			result: ResultTrial, reason: "1.1.0 booted on trial", pending: true},
		{name: "new version blessed before a reset", s: State{Pending: staged}, running: "1.1.0", esp: []string{"berth-1.0.0.efi", "berth-1.1.0.efi"},
			result: ResultBlessed, reason: "its trial passed"},
		{name: "versions compare, not strings", s: State{Pending: staged}, running: "v1.1", trial: true, result: ResultTrial, pending: true},
		{name: "cut off before the commit", s: State{Pending: &Pending{Phase: PhaseApplying, From: "1.0.0", To: "1.1.0"}}, running: "1.0.0",
			esp: []string{"berth-1.0.0.efi"}, result: status.ResultFailed, reason: "cut off before it was committed"},
		{name: "reverted by its trial", s: State{Pending: &Pending{Phase: PhaseReverted, From: "1.0.0", To: "1.1.0", Reason: "rolled back: kubelet not Ready within 10m0s"}},
			running: "1.0.0", esp: []string{"berth-1.0.0.efi", "berth-1.1.0+0-1.efi"}, result: ResultRolledBack, reason: "kubelet not Ready within 10m0s", rolled: true},
		{name: "tries ran out", s: State{Pending: staged}, running: "1.0.0", esp: []string{"berth-1.0.0.efi", "berth-1.1.0+0-3.efi"},
			result: ResultRolledBack, reason: "used up its 3 tries", rolled: true},
		{name: "chosen by hand", s: State{Pending: staged}, running: "1.0.0", esp: []string{"berth-1.0.0.efi", "berth-1.1.0+1-2.efi"},
			result: ResultRolledBack, reason: "still had 1 tries", rolled: true},
		{name: "UKI gone", s: State{Pending: staged}, running: "1.0.0", esp: []string{"berth-1.0.0.efi"},
			result: ResultRolledBack, reason: "UKI is gone", rolled: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var es []bootcount.Entry
			for _, n := range c.esp {
				es = append(es, entry(t, n))
			}
			got := Settle(c.s, c.running, c.trial, es, t0.Add(time.Hour))
			if c.result == "" {
				if got.Last != nil || got.Pending != c.s.Pending {
					t.Fatalf("Settle changed a state with nothing pending: %+v", got)
				}
				return
			}
			if got.Last == nil || got.Last.Result != c.result || !strings.Contains(got.Last.Reason, c.reason) {
				t.Fatalf("Last = %+v, want result %s with %q", got.Last, c.result, c.reason)
			}
			if got.Last.From != "1.0.0" || got.Last.To != "1.1.0" || !got.Last.At.Equal(t0.Add(time.Hour)) {
				t.Errorf("Last names %s → %s at %s", got.Last.From, got.Last.To, got.Last.At)
			}
			if (got.Pending != nil) != c.pending {
				t.Errorf("Pending = %+v, want pending %v", got.Pending, c.pending)
			}
			if _, ok := got.RolledBack["1.1.0"]; ok != c.rolled {
				t.Errorf("RolledBack = %v, want 1.1.0 in it: %v", got.RolledBack, c.rolled)
			}
		})
	}
}

func TestTriggerOf(t *testing.T) {
	for _, c := range []struct {
		ann  map[string]string
		ok   bool
		want Trigger
		err  string
	}{
		{ann: nil},
		{ann: map[string]string{"other": "x"}},
		{ann: map[string]string{AnnotationUpdateTo: " 1.2.0 "}, ok: true, want: Trigger{To: "1.2.0", Raw: "1.2.0"}},
		{ann: map[string]string{AnnotationUpdateTo: "1.2.0", AnnotationAllowDowngrade: "True"}, ok: true,
			want: Trigger{To: "1.2.0", AllowDowngrade: true, Raw: "1.2.0 (downgrade allowed)"}},
		{ann: map[string]string{AnnotationUpdateTo: "1.2.0", AnnotationAllowDowngrade: "yes"}, err: AnnotationAllowDowngrade + `: "yes"`},
		{ann: map[string]string{AnnotationUpdateTo: "../1.2"}, err: AnnotationUpdateTo},
	} {
		got, ok, err := TriggerOf(c.ann)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("TriggerOf(%v) error %v, want one naming %q", c.ann, err, c.err)
			}
			continue
		}
		if err != nil || ok != c.ok || got != c.want {
			t.Errorf("TriggerOf(%v) = %+v, %v, %v; want %+v, %v", c.ann, got, ok, err, c.want, c.ok)
		}
	}
}

func TestAct(t *testing.T) {
	running := status.Status{Version: "1.0.0", Slot: "a", Boot: status.BootSystemdBoot}
	onTrial := running
	onTrial.Trial = true
	to := Trigger{To: "1.1.0", Raw: "1.1.0"}
	for _, c := range []struct {
		name   string
		s      State
		st     status.Status
		t      Trigger
		act    bool
		reason string
		final  bool
	}{
		{name: "asked for a new version", st: running, t: to, act: true},
		{name: "already there", st: running, t: Trigger{To: "v1.0", Raw: "v1.0"}, final: true},
		{name: "acted on before", s: State{Handled: "1.1.0"}, st: running, t: to, final: true},
		{name: "same version, downgrade now allowed: a new request", s: State{Handled: "1.1.0"}, st: running,
			t: Trigger{To: "1.1.0", AllowDowngrade: true, Raw: "1.1.0 (downgrade allowed)"}, act: true},
		{name: "on trial", st: onTrial, t: to, reason: "on trial"},
		{name: "pending", s: State{Pending: &Pending{Phase: PhaseStaged, To: "1.1.0"}}, st: running, t: to, reason: "still pending"},
		{name: "rolled back here before", s: State{RolledBack: map[string]string{"1.1.0": "kubelet not Ready"}}, st: running, t: to,
			reason: "1.1.0 rolled back on this node before (kubelet not Ready)", final: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			act, reason, final := Act(c.s, c.st, c.t)
			if act != c.act || !strings.Contains(reason, c.reason) || (c.reason == "" && reason != "") || final != c.final {
				t.Errorf("Act = %v, %q, final %v; want %v, %q, final %v", act, reason, final, c.act, c.reason, c.final)
			}
		})
	}
}
