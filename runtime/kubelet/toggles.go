package kubelet

import (
	"fmt"
	"maps"
	"time"
)

// Toggles are the KubeletConfiguration settings nodeadm turns on by kubelet
// version (its withVersionToggles in awslabs/amazon-eks-ami
// nodeadm/internal/kubelet/config.go). The copy of that file in the sources
// searched predates these three cuts, so the versions and names are issue
// 16's record of nodeadm's current code, checked against kubelet's own
// feature list (k8s.io/kubernetes v1.35.4 pkg/features/kube_features.go):
//
//   - DynamicResourceAllocation: true from 1.33, where it is beta and off by
//     default. It is GA from 1.34 and locked on from 1.35; kubelet accepts
//     a locked gate set to its default, so naming it stays harmless until
//     the gate is removed (planned for 1.38, when this cut needs an end).
//   - MutableCSINodeAllocatableCount: true from 1.34 (beta, off by default
//     there; on by default from 1.35).
//   - shutdownGracePeriod 2m30s and shutdownGracePeriodCriticalPods 30s from
//     1.34: kubelet's graceful node shutdown, which berth serves through its
//     logind endpoint.
type Toggles struct {
	// FeatureGates are added to config.json's featureGates.
	FeatureGates map[string]bool
	// ShutdownGracePeriod and ShutdownGracePeriodCriticalPods are zero when
	// kubelet's graceful node shutdown stays off.
	ShutdownGracePeriod             time.Duration
	ShutdownGracePeriodCriticalPods time.Duration
}

// The cuts, as <major>.<minor> of the kubelet version.
var (
	draSince           = minorVersion{1, 33}
	mutableCSINodeFrom = minorVersion{1, 34}
	gracefulSince      = minorVersion{1, 34}
)

// nodeadm's graceful node shutdown periods.
const (
	nodeadmShutdownGrace         = 150 * time.Second
	nodeadmShutdownGraceCritical = 30 * time.Second
)

type minorVersion struct{ major, minor int }

func (v minorVersion) atMost(major, minor int) bool {
	return v.major < major || (v.major == major && v.minor <= minor)
}

// VersionToggles decides the toggles for a kubelet of version (the image
// manifest's components["kubelet"], e.g. "v1.35.4").
func VersionToggles(version string) (Toggles, error) {
	major, minor, err := majorMinor(version)
	if err != nil {
		return Toggles{}, fmt.Errorf("kubelet version %q from the image manifest: %w", version, err)
	}
	t := Toggles{FeatureGates: map[string]bool{}}
	if draSince.atMost(major, minor) {
		t.FeatureGates["DynamicResourceAllocation"] = true
	}
	if mutableCSINodeFrom.atMost(major, minor) {
		t.FeatureGates["MutableCSINodeAllocatableCount"] = true
	}
	if gracefulSince.atMost(major, minor) {
		t.ShutdownGracePeriod = nodeadmShutdownGrace
		t.ShutdownGracePeriodCriticalPods = nodeadmShutdownGraceCritical
	}
	return t, nil
}

// apply writes the toggles into c. Zero periods leave the fields unset, so
// MarshalConfig drops them and kubelet keeps graceful shutdown off.
func (t Toggles) apply(c *KubeletConfiguration) {
	if c.FeatureGates == nil {
		c.FeatureGates = map[string]bool{}
	}
	maps.Copy(c.FeatureGates, t.FeatureGates)
	c.ShutdownGracePeriod.Duration = t.ShutdownGracePeriod
	c.ShutdownGracePeriodCriticalPods.Duration = t.ShutdownGracePeriodCriticalPods
}
