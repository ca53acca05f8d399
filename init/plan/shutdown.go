package plan

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/berth-node/berth/config/nodeconfig"
	"github.com/berth-node/berth/runtime/kubelet"
)

const (
	// DefaultPodGrace is how long pods get between SIGTERM and SIGKILL at
	// shutdown when kubelet's graceful node shutdown is off: kubelet's
	// default terminationGracePeriodSeconds.
	DefaultPodGrace = 30 * time.Second
	// maxPodGrace bounds what the config may ask for: a node that takes
	// longer to go down than EC2 waits for it loses the pods anyway.
	maxPodGrace = 10 * time.Minute
	// podKillMargin is what the shutdown step needs beyond the grace
	// period: the SIGKILL and the exits it causes.
	podKillMargin = 5 * time.Second
)

// Shutdown is how the node goes down, decided from the kubelet config
// kubelet will really run with: config.json's version toggles with the
// user's kubelet.config drop-in over them.
type Shutdown struct {
	// PodGrace is how long berth's own pod stopper gives pods between
	// SIGTERM and SIGKILL: kubelet's effective shutdownGracePeriod, so a
	// pod that kubelet could not stop in time gets no longer from berth
	// than kubelet would have given it; DefaultPodGrace when kubelet's
	// graceful shutdown is off.
	PodGrace time.Duration
	// StepTimeout is the least bound each service's stop step needs so
	// that the pod step can use the whole grace period and still kill.
	StepTimeout time.Duration
	// KubeletGrace and KubeletCriticalGrace are kubelet's effective
	// shutdownGracePeriod and shutdownGracePeriodCriticalPods; zero
	// KubeletGrace means kubelet's graceful node shutdown is off (below
	// kubelet 1.34, or the user's "0s"), and berth stops pods alone.
	KubeletGrace         time.Duration
	KubeletCriticalGrace time.Duration
}

// decideShutdown works out kubelet's effective shutdown periods and berth's
// fallback from them, and narrows the toggles config.json gets so that the
// two files together stay valid for kubelet. The user's drop-in overrides
// config.json field by field, so:
//
//   - a user's value wins over the toggle's;
//   - berth's critical-pods period is cut to the effective grace period
//     when the user's shorter grace period would leave it longer (kubelet
//     refuses criticalPods > gracePeriod and would not start); a user who
//     writes both that way gets a warning, since that is theirs to fix.
//
// A user value that is not a duration in [0, 10m] is ignored with a warning
// (kubelet will refuse it too, and say so in its log): a typo must not make
// berth hang, or kill pods at once, on the way down.
func decideShutdown(kc nodeconfig.InlineDocument, toggles kubelet.Toggles, warnings *[]string) (Shutdown, kubelet.Toggles) {
	grace, userGrace := userPeriod(kc, "shutdownGracePeriod", warnings)
	if !userGrace {
		grace = toggles.ShutdownGracePeriod
	}
	critical, userCritical := userPeriod(kc, "shutdownGracePeriodCriticalPods", warnings)
	if !userCritical {
		critical = min(toggles.ShutdownGracePeriodCriticalPods, grace)
		toggles.ShutdownGracePeriodCriticalPods = critical
	} else if critical > grace {
		*warnings = append(*warnings, fmt.Sprintf("spec.kubelet.config.shutdownGracePeriodCriticalPods %s is longer than shutdownGracePeriod %s: kubelet refuses that configuration", critical, grace))
	}
	sd := Shutdown{PodGrace: DefaultPodGrace, KubeletGrace: grace, KubeletCriticalGrace: critical}
	if grace > 0 {
		sd.PodGrace = grace
	}
	sd.StepTimeout = sd.PodGrace + podKillMargin
	return sd, toggles
}

// userPeriod reads one of the shutdown durations from the user's
// kubelet.config; ok is false when it is not set or not usable.
func userPeriod(kc nodeconfig.InlineDocument, field string, warnings *[]string) (time.Duration, bool) {
	raw, set := kc[field]
	if !set {
		return 0, false
	}
	var v string
	d, err := time.Duration(0), json.Unmarshal(raw, &v)
	if err == nil {
		d, err = time.ParseDuration(v)
	}
	if err != nil || d < 0 || d > maxPodGrace {
		*warnings = append(*warnings, fmt.Sprintf("spec.kubelet.config.%s: %s is not a duration between 0 and %s; berth ignores it for the shutdown it plans", field, string(raw), maxPodGrace))
		return 0, false
	}
	return d, true
}
