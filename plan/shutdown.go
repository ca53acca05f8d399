package plan

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/berth-node/berth/nodeconfig"
)

const (
	// DefaultPodGrace is how long pods get between SIGTERM and SIGKILL at
	// shutdown when the config does not say: kubelet's default
	// terminationGracePeriodSeconds.
	DefaultPodGrace = 30 * time.Second
	// maxPodGrace bounds what the config may ask for: a node that takes
	// longer to go down than EC2 waits for it loses the pods anyway.
	maxPodGrace = 10 * time.Minute
	// podKillMargin is what the shutdown step needs beyond the grace
	// period: the SIGKILL and the exits it causes.
	podKillMargin = 5 * time.Second
)

// Shutdown is how the node goes down, decided from the config.
type Shutdown struct {
	// PodGrace is how long pods get between SIGTERM and SIGKILL, from
	// spec.kubelet.config.shutdownGracePeriod (kubelet's own graceful
	// node shutdown needs logind's inhibitor locks, which berth does not
	// serve yet, so berth does that job).
	PodGrace time.Duration
	// StepTimeout is the least bound each service's stop step needs so
	// that the pod step can use the whole grace period and still kill.
	StepTimeout time.Duration
}

// decideShutdown reads the pod grace period from the kubelet config. A
// value that is not a duration in (0, 10m] falls back to the default with a
// warning: a typo must not make a node hang, or kill pods at once, on the
// way down.
func decideShutdown(kc nodeconfig.InlineDocument, warnings *[]string) Shutdown {
	grace := DefaultPodGrace
	if raw, ok := kc["shutdownGracePeriod"]; ok {
		var v string
		d, err := time.Duration(0), json.Unmarshal(raw, &v)
		if err == nil {
			d, err = time.ParseDuration(v)
		}
		if err != nil || d <= 0 || d > maxPodGrace {
			*warnings = append(*warnings, fmt.Sprintf("spec.kubelet.config.shutdownGracePeriod: %s is not a duration between 0 and %s; pods get the default %s at shutdown", string(raw), maxPodGrace, DefaultPodGrace))
		} else {
			grace = d
		}
	}
	return Shutdown{PodGrace: grace, StepTimeout: grace + podKillMargin}
}
