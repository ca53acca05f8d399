package plan

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/config/nodeconfig"
	"github.com/berth-node/berth/runtime/kubelet"
)

func TestDecideShutdown(t *testing.T) {
	on, err := kubelet.VersionToggles("v1.34.0") // 2m30s, critical 30s
	if err != nil {
		t.Fatal(err)
	}
	off, err := kubelet.VersionToggles("v1.33.0")
	if err != nil {
		t.Fatal(err)
	}
	const s = time.Second
	for _, tc := range []struct {
		name            string
		toggles         kubelet.Toggles
		user            map[string]string // field -> raw JSON
		grace, critical time.Duration     // kubelet's effective periods
		pod             time.Duration     // berth's fallback
		writtenCritical time.Duration     // what config.json gets
		warns           string            // a field the warning names
	}{
		{name: "off, not set", toggles: off, pod: DefaultPodGrace},
		{name: "off, user sets", toggles: off, user: map[string]string{"shutdownGracePeriod": `"45s"`}, grace: 45 * s, pod: 45 * s},
		{name: "on, not set", toggles: on, grace: 150 * s, critical: 30 * s, pod: 150 * s, writtenCritical: 30 * s},
		{name: "on, user longer", toggles: on, user: map[string]string{"shutdownGracePeriod": `"5m"`}, grace: 300 * s, critical: 30 * s, pod: 300 * s, writtenCritical: 30 * s},
		// A shorter grace period than nodeadm's critical one: berth's
		// critical value is cut so kubelet still starts.
		{name: "on, user shorter", toggles: on, user: map[string]string{"shutdownGracePeriod": `"20s"`}, grace: 20 * s, critical: 20 * s, pod: 20 * s, writtenCritical: 20 * s},
		{name: "on, user turns off", toggles: on, user: map[string]string{"shutdownGracePeriod": `"0s"`}, pod: DefaultPodGrace},
		{name: "on, user both", toggles: on, user: map[string]string{"shutdownGracePeriod": `"1m"`, "shutdownGracePeriodCriticalPods": `"10s"`}, grace: 60 * s, critical: 10 * s, pod: 60 * s, writtenCritical: 30 * s},
		{name: "user critical too long", toggles: on, user: map[string]string{"shutdownGracePeriod": `"10s"`, "shutdownGracePeriodCriticalPods": `"20s"`}, grace: 10 * s, critical: 20 * s, pod: 10 * s, writtenCritical: 30 * s, warns: "shutdownGracePeriodCriticalPods"},
		{name: "not a duration", toggles: off, user: map[string]string{"shutdownGracePeriod": `"soon"`}, pod: DefaultPodGrace, warns: "shutdownGracePeriod"},
		{name: "not a string", toggles: on, user: map[string]string{"shutdownGracePeriod": `30`}, grace: 150 * s, critical: 30 * s, pod: 150 * s, writtenCritical: 30 * s, warns: "shutdownGracePeriod"},
		{name: "too long", toggles: off, user: map[string]string{"shutdownGracePeriod": `"1h"`}, pod: DefaultPodGrace, warns: "shutdownGracePeriod"},
		{name: "negative critical", toggles: on, user: map[string]string{"shutdownGracePeriodCriticalPods": `"-1s"`}, grace: 150 * s, critical: 30 * s, pod: 150 * s, writtenCritical: 30 * s, warns: "shutdownGracePeriodCriticalPods"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := nodeconfig.InlineDocument{}
			for k, v := range tc.user {
				kc[k] = json.RawMessage(v)
			}
			var warns []string
			got, written := decideShutdown(kc, tc.toggles, &warns)
			want := Shutdown{PodGrace: tc.pod, StepTimeout: tc.pod + podKillMargin, KubeletGrace: tc.grace, KubeletCriticalGrace: tc.critical}
			if got != want {
				t.Errorf("got %+v, want %+v", got, want)
			}
			if written.ShutdownGracePeriodCriticalPods != tc.writtenCritical || written.ShutdownGracePeriod != tc.toggles.ShutdownGracePeriod {
				t.Errorf("config.json gets %v / critical %v, want %v / %v", written.ShutdownGracePeriod, written.ShutdownGracePeriodCriticalPods, tc.toggles.ShutdownGracePeriod, tc.writtenCritical)
			}
			switch {
			case tc.warns == "" && len(warns) > 0:
				t.Errorf("unexpected warnings %q", warns)
			case tc.warns != "" && (len(warns) != 1 || !strings.Contains(warns[0], "spec.kubelet.config."+tc.warns)):
				t.Errorf("warnings %q, want one naming %s", warns, tc.warns)
			}
		})
	}
}

func TestStorageModules(t *testing.T) {
	for _, tc := range []struct {
		strategy nodeconfig.LocalStorageStrategy
		want     []string
	}{
		{"", nil},
		{nodeconfig.LocalStorageMount, []string{"xfs", "ext4"}},
		{nodeconfig.LocalStorageRAID0, []string{"xfs", "ext4", "dm_mod"}},
		{nodeconfig.LocalStorageRAID10, []string{"xfs", "ext4", "dm_mod", "dm_raid", "raid10"}},
	} {
		got := storageModules(&nodeconfig.LocalStorageOptions{Strategy: tc.strategy})
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q: %v, want %v", tc.strategy, got, tc.want)
		}
	}
	if got := storageModules(nil); got != nil {
		t.Errorf("no storage: %v, want none", got)
	}
}
