package nodeconfig

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-node/berth/internal/syntax"
)

// kubeletRules are kubelet's own checks of the fields users set most,
// ported from kubelet 1.35 (pkg/kubelet/apis/config/validation,
// cmd/kubelet/app/server.go, pkg/kubelet/eviction/helpers.go), which hold
// whatever the image's kubelet version: quantities, eviction thresholds,
// ranges and enumerations. They read the user's drop-in over what berth's
// config.json sets (serializeImagePulls false) and kubelet's defaults, as
// kubelet validates the merged result. A value of the wrong JSON type is
// left to the type checks (kubeletConfigAccepted) where they run, and
// named here otherwise.
func kubeletRules(ps *problems, cfg map[string]json.RawMessage) {
	const base = "spec.kubelet.config."
	str := func(name string) (string, bool) {
		raw, ok := cfg[name]
		if !ok {
			return "", false
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			ps.errorf(base+name, "want a string, got %s", raw)
			return "", false
		}
		return s, true
	}
	num := func(name string) (float64, bool) {
		raw, ok := cfg[name]
		if !ok {
			return 0, false
		}
		var n float64
		if err := json.Unmarshal(raw, &n); err != nil {
			ps.errorf(base+name, "want a number, got %s", raw)
			return 0, false
		}
		return n, true
	}
	strMap := func(name string) (map[string]string, bool) {
		raw, ok := cfg[name]
		if !ok {
			return nil, false
		}
		var m map[string]string
		if err := json.Unmarshal(raw, &m); err != nil {
			ps.errorf(base+name, "want a map of strings, got %s", raw)
			return nil, false
		}
		return m, true
	}

	if kind, ok := str("kind"); ok && kind != kubeletConfigKind {
		ps.errorf(base+"kind", "want %s, got %q (kubelet refuses a drop-in of another kind)", kubeletConfigKind, kind)
	}
	for _, name := range []string{"kubeReserved", "systemReserved"} {
		if m, ok := strMap(name); ok {
			for _, r := range slices.Sorted(maps.Keys(m)) {
				if err := reservedQuantity(m[r]); err != nil {
					ps.errorf(base+name+"."+r, "%v", err)
				}
			}
		}
	}
	for _, name := range []string{"evictionHard", "evictionSoft", "evictionMinimumReclaim"} {
		if m, ok := strMap(name); ok {
			for _, sig := range slices.Sorted(maps.Keys(m)) {
				if err := evictionThreshold(m[sig]); err != nil {
					ps.errorf(base+name+"."+sig, "%v", err)
				}
			}
		}
	}
	grace, _ := strMap("evictionSoftGracePeriod")
	for _, sig := range slices.Sorted(maps.Keys(grace)) {
		if d, err := time.ParseDuration(grace[sig]); err != nil {
			ps.errorf(base+"evictionSoftGracePeriod."+sig, "%q is not a duration (for example 1m30s)", grace[sig])
		} else if d < 0 {
			ps.errorf(base+"evictionSoftGracePeriod."+sig, "must not be negative, got %s", grace[sig])
		}
	}
	if soft, ok := strMap("evictionSoft"); ok {
		for _, sig := range slices.Sorted(maps.Keys(soft)) {
			if _, ok := grace[sig]; !ok {
				ps.errorf(base+"evictionSoft."+sig, "kubelet wants a grace period for a soft eviction threshold: set spec.kubelet.config.evictionSoftGracePeriod.%s", sig)
			}
		}
	}
	if s, ok := str("containerLogMaxSize"); ok {
		if _, err := ParseQuantity(s); err != nil {
			ps.errorf(base+"containerLogMaxSize", "%v", err)
		}
	}

	// Ranges, with kubelet's defaults for the other end of a pair.
	high, highSet := num("imageGCHighThresholdPercent")
	low, lowSet := num("imageGCLowThresholdPercent")
	if !highSet {
		high = 85
	}
	if !lowSet {
		low = 80
	}
	for _, r := range []struct {
		name    string
		v       float64
		set     bool
		lo, hi  float64
		message string
	}{
		{"imageGCHighThresholdPercent", high, highSet, 0, 100, "must be between 0 and 100"},
		{"imageGCLowThresholdPercent", low, lowSet, 0, 100, "must be between 0 and 100"},
	} {
		if r.set && (r.v < r.lo || r.v > r.hi) {
			ps.errorf(base+r.name, "%s %s, got %v", r.name, r.message, r.v)
		}
	}
	if (highSet || lowSet) && low >= high {
		at := "imageGCLowThresholdPercent"
		if !lowSet {
			at = "imageGCHighThresholdPercent"
		}
		ps.errorf(base+at, "imageGCLowThresholdPercent (%v) must be less than imageGCHighThresholdPercent (%v; kubelet's defaults are 80 and 85)", low, high)
	}
	for _, name := range []string{"eventRecordQPS", "eventBurst", "registryPullQPS", "registryBurst", "kubeAPIQPS", "kubeAPIBurst", "maxPods", "podsPerCore"} {
		if v, ok := num(name); ok && v < 0 {
			ps.errorf(base+name, "must not be negative, got %v", v)
		}
	}
	for _, name := range []string{"healthzPort", "readOnlyPort", "port"} {
		if v, ok := num(name); ok && v != 0 && (v < 1 || v > 65535 || v != float64(int(v))) {
			ps.errorf(base+name, "want a port, 1 to 65535 (or 0), got %v", v)
		}
	}
	if v, ok := num("containerLogMaxFiles"); ok && v <= 1 {
		ps.errorf(base+"containerLogMaxFiles", "must be greater than 1, got %v", v)
	}
	if v, ok := num("nodeStatusMaxImages"); ok && v < -1 {
		ps.errorf(base+"nodeStatusMaxImages", "must be -1 or greater, got %v", v)
	}
	if v, ok := num("memoryThrottlingFactor"); ok && (v <= 0 || v > 1) {
		ps.errorf(base+"memoryThrottlingFactor", "must be greater than 0 and at most 1, got %v", v)
	}
	if v, ok := num("maxParallelImagePulls"); ok {
		serial := false // berth's config.json
		if raw, set := cfg["serializeImagePulls"]; set {
			_ = json.Unmarshal(raw, &serial)
		}
		switch {
		case v < 1:
			ps.errorf(base+"maxParallelImagePulls", "must be positive, got %v", v)
		case v > 1 && serial:
			ps.errorf(base+"maxParallelImagePulls", "must be 1 while serializeImagePulls is true, got %v", v)
		}
	}
	for name, allowed := range map[string][]string{
		"topologyManagerPolicy": {"none", "best-effort", "restricted", "single-numa-node"},
		"topologyManagerScope":  {"container", "pod"},
		"hairpinMode":           {"none", "hairpin-veth", "promiscuous-bridge"},
		"cpuManagerPolicy":      {"none", "static"},
		"memoryManagerPolicy":   {"None", "Static"},
	} {
		if v, ok := str(name); ok && !slices.Contains(allowed, v) {
			ps.errorf(base+name, "unknown policy %q; want one of %s", v, strings.Join(allowed, ", "))
		}
	}
	if raw, ok := cfg["logging"]; ok {
		var l struct {
			Format *string `json:"format"`
		}
		if json.Unmarshal(raw, &l) == nil && l.Format != nil && *l.Format != "" && *l.Format != "text" && *l.Format != "json" {
			ps.errorf(base+"logging.format", "unknown log format %q; want text or json", *l.Format)
		}
	}
	for _, name := range []string{"address", "healthzBindAddress"} {
		if v, ok := str(name); ok && v != "" && !isIPAddress(v) {
			ps.errorf(base+name, "%q is not an IP address (kubelet cannot listen on it)", v)
		}
	}
}

// reservedQuantity is a kubeReserved or systemReserved value as kubelet's
// parseResourceList reads it: a quantity, not negative.
func reservedQuantity(v string) error {
	q, err := ParseQuantity(v)
	if err != nil {
		return err
	}
	if q.Negative {
		return fmt.Errorf("a reservation cannot be negative, got %s", v)
	}
	return nil
}

// evictionThreshold is an eviction threshold's value as kubelet's
// parseThresholdStatement reads it: a percentage above 0% and at most
// 100% (0% and 100% turn the threshold off), or a positive quantity.
func evictionThreshold(v string) error {
	if p, ok := strings.CutSuffix(v, "%"); ok {
		if v == "0%" || v == "100%" {
			return nil
		}
		f, err := strconv.ParseFloat(p, 32)
		switch {
		case err != nil:
			return fmt.Errorf("%q is not a percentage", v)
		case f < 0:
			return fmt.Errorf("an eviction percentage must be positive, got %s", v)
		case f > 100:
			return fmt.Errorf("an eviction percentage must be at most 100%%, got %s", v)
		}
		return nil
	}
	q, err := ParseQuantity(v)
	if err != nil {
		return err
	}
	if q.Negative || q.Zero {
		return fmt.Errorf("an eviction threshold must be positive, got %s", v)
	}
	return nil
}

func isIPAddress(s string) bool { return syntax.IPNoZone(s) == nil }
