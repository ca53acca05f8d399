package supervise

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestStartOrder(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes []Node
		want  []string
	}{
		{"plan order kept", []Node{{Name: "containerd"}, {Name: "kubelet", DependsOn: []string{"containerd"}}},
			[]string{"containerd", "kubelet"}},
		{"dependency first", []Node{{Name: "kubelet", DependsOn: []string{"containerd"}}, {Name: "containerd"}},
			[]string{"containerd", "kubelet"}},
		{"diamond", []Node{
			{Name: "d", DependsOn: []string{"b", "c"}},
			{Name: "b", DependsOn: []string{"a"}},
			{Name: "c", DependsOn: []string{"a"}},
			{Name: "a"},
		}, []string{"a", "b", "c", "d"}},
		{"independent keep order", []Node{{Name: "z"}, {Name: "y"}, {Name: "x"}}, []string{"z", "y", "x"}},
		{"empty", nil, []string{}},
	} {
		got, err := StartOrder(tc.nodes)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: StartOrder = %v, want %v", tc.name, got, tc.want)
		}
		if stop := StopOrder(got); !slices.Equal(stop, reversed(tc.want)) {
			t.Errorf("%s: StopOrder = %v, want %v", tc.name, stop, reversed(tc.want))
		}
	}
}

func reversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

func TestStartOrderErrors(t *testing.T) {
	for _, tc := range []struct {
		nodes []Node
		want  string
	}{
		{[]Node{{Name: "a", DependsOn: []string{"b"}}, {Name: "b", DependsOn: []string{"c"}}, {Name: "c", DependsOn: []string{"a"}}},
			"dependency cycle: a -> b -> c -> a"},
		{[]Node{{Name: "a", DependsOn: []string{"a"}}}, "dependency cycle: a -> a"},
		{[]Node{{Name: "x"}, {Name: "a", DependsOn: []string{"b"}}, {Name: "b", DependsOn: []string{"a"}}},
			"dependency cycle: a -> b -> a"},
		{[]Node{{Name: "a", DependsOn: []string{"nope"}}}, `service "a": depends on unknown service "nope"`},
		{[]Node{{Name: "a"}, {Name: "a"}}, `service "a": defined twice`},
		{[]Node{{Name: ""}}, "service 0: empty name"},
	} {
		_, err := StartOrder(tc.nodes)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("StartOrder(%v) error = %v, want %q", tc.nodes, err, tc.want)
		}
	}
}

func TestBackoffDelay(t *testing.T) {
	b := DefaultBackoff()
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30, 30}
	for i, w := range want {
		if got := b.Delay(i + 1); got != w*time.Second {
			t.Errorf("Delay(%d) = %v, want %v", i+1, got, w*time.Second)
		}
	}
	if got := b.Delay(1000); got != 30*time.Second {
		t.Errorf("Delay(1000) = %v, want the cap", got)
	}
}

// TestBackoffSchedule walks a crash loop on a fake clock: each run is
// healthy for a while, exits, and the restart delay that follows is checked.
func TestBackoffSchedule(t *testing.T) {
	b := DefaultBackoff()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	runs := []struct {
		healthy time.Duration // ready for this long, then exited
		delay   time.Duration // expected wait before the next start
	}{
		{0, 1 * time.Second},
		{0, 2 * time.Second},
		{5 * time.Second, 4 * time.Second},
		{59 * time.Second, 8 * time.Second}, // not quite a minute: no reset
		{0, 16 * time.Second},
		{0, 30 * time.Second},
		{0, 30 * time.Second},
		{60 * time.Second, 1 * time.Second}, // a minute of health resets
		{0, 2 * time.Second},
		{10 * time.Minute, 1 * time.Second},
	}
	failures := 0
	for i, r := range runs {
		readyAt := now
		now = now.Add(r.healthy)
		failures = b.Failures(failures, now.Sub(readyAt))
		if got := b.Delay(failures); got != r.delay {
			t.Errorf("run %d (healthy %v): delay %v, want %v", i, r.healthy, got, r.delay)
		}
		now = now.Add(b.Delay(failures))
	}
}
