package plan

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/nodeconfig"
)

func TestDecideShutdown(t *testing.T) {
	for _, tc := range []struct {
		name  string
		raw   string // "" = not set
		want  time.Duration
		warns bool
	}{
		{"not set", "", DefaultPodGrace, false},
		{"set", `"45s"`, 45 * time.Second, false},
		{"not a duration", `"soon"`, DefaultPodGrace, true},
		{"not a string", `30`, DefaultPodGrace, true},
		{"too long", `"1h"`, DefaultPodGrace, true},
		{"zero", `"0s"`, DefaultPodGrace, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := nodeconfig.InlineDocument{}
			if tc.raw != "" {
				kc["shutdownGracePeriod"] = json.RawMessage(tc.raw)
			}
			var warns []string
			got := decideShutdown(kc, &warns)
			if got.PodGrace != tc.want || got.StepTimeout != tc.want+podKillMargin {
				t.Errorf("got %+v, want grace %v and step %v", got, tc.want, tc.want+podKillMargin)
			}
			if (len(warns) > 0) != tc.warns {
				t.Errorf("warnings %q, want some: %v", warns, tc.warns)
			}
			if tc.warns && !strings.Contains(warns[0], "spec.kubelet.config.shutdownGracePeriod") {
				t.Errorf("warning %q does not name the field", warns[0])
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
