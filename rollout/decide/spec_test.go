package decide

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/rollout/api/v1alpha1"
	"github.com/berth-node/berth/update/agent"
	"github.com/berth-node/berth/update/repo"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The annotations and states are update/agent's: the controller and the
// node must mean the same names.
func TestNamesAreTheAgents(t *testing.T) {
	for _, p := range [][2]string{
		{AnnotationUpdateTo, agent.AnnotationUpdateTo}, {AnnotationAllowDowngrade, agent.AnnotationAllowDowngrade},
		{AnnotationVersion, agent.AnnotationVersion}, {AnnotationSlot, agent.AnnotationSlot},
		{AnnotationState, agent.AnnotationState}, {AnnotationReason, agent.AnnotationReason},
		{agentIdle, agent.StateIdle}, {agentBlessed, agent.StateBlessed}, {agentRolledBack, agent.StateRolledBack},
		{agentRefused, agent.StateRefused}, {agentFailed, agent.StateFailed},
	} {
		if p[0] != p[1] {
			t.Errorf("decide has %q where update/agent has %q", p[0], p[1])
		}
	}
	// The trigger the controller writes is one the agent reads.
	for _, down := range []bool{false, true} {
		a := map[string]string{AnnotationUpdateTo: vB}
		if down {
			a[AnnotationAllowDowngrade] = "true"
		}
		tr, ok, err := agent.TriggerOf(a)
		if err != nil || !ok || tr.To != vB || tr.AllowDowngrade != down {
			t.Errorf("the agent reads %v as %+v, %t, %v", a, tr, ok, err)
		}
	}
}

func TestSameVersionIsTheAgents(t *testing.T) {
	vs := []string{"1.2.0", "v1.2", "1.2", "1.2.0.0", "1.10.0", "1.1.9", "01.2", "1.2.0-rc1", "1.2.0-RC1", "dev", "DEV", "", "v", "1..2", "1.2.3.4.5.6.7.8", "1.2.3.4.5.6.7.8.9", "1234567890"}
	same := func(a, b string) bool {
		va, erra := repo.ParseVersion(a)
		vb, errb := repo.ParseVersion(b)
		if erra == nil && errb == nil {
			return va.Compare(vb) == 0
		}
		return a != "" && strings.EqualFold(a, b)
	}
	for _, a := range vs {
		for _, b := range vs {
			if got, want := sameVersion(a, b), same(a, b); got != want {
				t.Errorf("sameVersion(%q, %q) = %t; update/repo says %t", a, b, got, want)
			}
		}
	}
}

func TestParseSpec(t *testing.T) {
	s, err := ParseSpec(v1alpha1.UpdateSpec{Version: " 1.2.0 "})
	if err != nil {
		t.Fatal(err)
	}
	if s.Version != "1.2.0" || s.MaxUnavailable != 1 || s.Soak != 2*time.Minute || s.DrainTimeout != 10*time.Minute || s.NodeTimeout != 20*time.Minute ||
		s.Window != nil || !s.Selector.Empty() {
		t.Errorf("defaults: %+v", s)
	}
	s, err = ParseSpec(v1alpha1.UpdateSpec{Version: "2", Soak: "0s", MaxUnavailable: 3,
		NodeSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pool", Operator: metav1.LabelSelectorOpIn, Values: []string{"a"}}}}})
	if err != nil || s.Soak != 0 || s.MaxUnavailable != 3 || s.Selector.String() != "pool in (a)" {
		t.Errorf("%+v, %v", s, err)
	}
	for _, tc := range []struct {
		spec v1alpha1.UpdateSpec
		want string
	}{
		{v1alpha1.UpdateSpec{}, "spec.version"},
		{v1alpha1.UpdateSpec{Version: "1.2 0"}, "spec.version"},
		{v1alpha1.UpdateSpec{Version: "1", MaxUnavailable: -1}, "spec.maxUnavailable"},
		{v1alpha1.UpdateSpec{Version: "1", Soak: "-1m"}, "spec.soak"},
		{v1alpha1.UpdateSpec{Version: "1", DrainTimeout: "0s"}, "spec.drainTimeout"},
		{v1alpha1.UpdateSpec{Version: "1", NodeTimeout: "ten minutes"}, "spec.nodeTimeout"},
		{v1alpha1.UpdateSpec{Version: "1", NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}}}, "spec.nodeSelector"},
		{v1alpha1.UpdateSpec{Version: "1", MaintenanceWindow: &v1alpha1.MaintenanceWindow{Start: "25:00", End: "01:00"}}, "spec.maintenanceWindow: start"},
	} {
		if _, err := ParseSpec(tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseSpec(%+v) = %v, want an error naming %s", tc.spec, err, tc.want)
		}
	}
}

func TestWindow(t *testing.T) {
	// t0 is Monday 12:00 UTC.
	for _, tc := range []struct {
		w    v1alpha1.MaintenanceWindow
		at   time.Duration
		open bool
	}{
		{v1alpha1.MaintenanceWindow{Start: "11:00", End: "13:00"}, 0, true},
		{v1alpha1.MaintenanceWindow{Start: "11:00", End: "12:00"}, 0, false},
		{v1alpha1.MaintenanceWindow{Start: "12:00", End: "12:01"}, 0, true},
		{v1alpha1.MaintenanceWindow{Days: []string{"Tue"}, Start: "11:00", End: "13:00"}, 0, false},
		{v1alpha1.MaintenanceWindow{Days: []string{"mon"}, Start: "11:00", End: "13:00"}, 0, true},
		// Across midnight: Sunday's window reaches into Monday morning.
		{v1alpha1.MaintenanceWindow{Days: []string{"Sun"}, Start: "22:00", End: "04:00"}, -9 * time.Hour, true},
		{v1alpha1.MaintenanceWindow{Days: []string{"Sun"}, Start: "22:00", End: "04:00"}, -8 * time.Hour, false},
		{v1alpha1.MaintenanceWindow{Days: []string{"Sun"}, Start: "22:00", End: "04:00"}, -14 * time.Hour, true},
		{v1alpha1.MaintenanceWindow{Days: []string{"Mon"}, Start: "22:00", End: "04:00"}, -9 * time.Hour, false},
		{v1alpha1.MaintenanceWindow{Days: []string{"Mon"}, Start: "22:00", End: "04:00"}, 11 * time.Hour, true},
		{v1alpha1.MaintenanceWindow{Start: "22:00", End: "04:00"}, 0, false},
	} {
		w, err := ParseWindow(tc.w)
		if err != nil {
			t.Fatalf("%+v: %v", tc.w, err)
		}
		when := t0.Add(tc.at)
		if got := w.Open(when); got != tc.open {
			t.Errorf("%+v at %s: open %t, want %t", tc.w, when.Format(time.RFC1123), got, tc.open)
		}
		// The zone of the time given does not matter: the window is UTC.
		if got := w.Open(when.In(time.FixedZone("X", 5*3600))); got != tc.open {
			t.Errorf("%+v at %s in another zone: open %t", tc.w, when, got)
		}
	}
	for _, bad := range []v1alpha1.MaintenanceWindow{
		{Start: "10:00", End: "10:00"}, {Start: "1:00", End: "02:00"}, {Start: "01:00", End: "24:00"}, {Start: "01:60", End: "02:00"},
		{Days: []string{"Monday"}, Start: "01:00", End: "02:00"}, {Start: "01-00", End: "02:00"}, {Start: "+1:00", End: "02:00"},
	} {
		if _, err := ParseWindow(bad); err == nil {
			t.Errorf("ParseWindow(%+v) took it", bad)
		}
	}
}

// FuzzParseClock: the clock comes from a user's object. Whatever it is,
// ParseClock does not panic, and what it takes reads back the same.
func FuzzParseClock(f *testing.F) {
	for _, s := range []string{"00:00", "23:59", "24:00", "1:00", "", "12:3x", "٠١:٠٠", "-1:00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseClock(s)
		if err != nil {
			return
		}
		if m < 0 || m >= 24*60 {
			t.Fatalf("ParseClock(%q) = %d, out of the day", s, m)
		}
		if FormatClock(m) != s {
			t.Fatalf("ParseClock(%q) = %d, which formats as %q", s, m, FormatClock(m))
		}
	})
}

// FuzzParseWindow: a window from a user's object never panics a
// controller, and one taken is open for some minute of the week.
func FuzzParseWindow(f *testing.F) {
	f.Add("Mon,Sun", "22:00", "04:00")
	f.Add("", "00:00", "00:01")
	f.Add("xyz", "10:00", "10:00")
	f.Fuzz(func(t *testing.T, days, start, end string) {
		var ds []string
		if days != "" {
			ds = strings.Split(days, ",")
		}
		w, err := ParseWindow(v1alpha1.MaintenanceWindow{Days: ds, Start: start, End: end})
		if err != nil {
			return
		}
		open := false
		for m := time.Duration(0); m < 7*24*time.Hour && !open; m += time.Minute {
			open = w.Open(t0.Add(m))
		}
		if !open {
			t.Fatalf("window %+v is never open", w)
		}
	})
}
