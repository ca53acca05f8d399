// Package localstorage is berth's instance-store phase: it finds the
// instance-store NVMe disks, decides what to do with them from
// spec.instance.localStorage (nodeadm's RAID0 / RAID10 / Mount strategies),
// partitions them, assembles the array, makes the filesystem, mounts it and
// bind-mounts containerd's, kubelet's and the pod logs' directories onto it,
// before any service that uses those directories starts.
//
// plan.go decides (pure: disks and what they hold → a Decision); run.go
// acts (block-device I/O, ioctls, mkfs, mount). Across reboots the phase is
// idempotent: disks carry berth's GPT mark (package partition) and the
// filesystem a UUID derived from the array's identity, so a second boot
// finds them, reassembles and mounts, and never runs mkfs on them again. A
// disk that holds anything berth did not write is never formatted unless
// Options.Force says so.
package localstorage

import (
	"fmt"
	"path"
	"slices"

	"github.com/berth-node/berth/mounts/instancestore"
)

// Strategy is nodeadm's spec.instance.localStorage.strategy.
type Strategy string

const (
	StrategyNone   Strategy = ""
	StrategyRAID0  Strategy = "RAID0"
	StrategyRAID10 Strategy = "RAID10"
	StrategyMount  Strategy = "Mount"
)

// DisabledMount values, as nodeadm spells them.
const (
	DisableContainerd = "Containerd"
	DisablePodLogs    = "PodLogs"
)

// DefaultMountPath is nodeadm's default: arrays mount at <path>/0, the
// Mount strategy's disks at <path>/0, <path>/1, ...
const DefaultMountPath = "/mnt/k8s-disks"

// Options is what the phase is told. PID 1 converts
// spec.instance.localStorage to it; Force, Fatal and Filesystem are berth
// options with no nodeadm counterpart.
type Options struct {
	Strategy       Strategy
	MountPath      string   // default DefaultMountPath
	DisabledMounts []string // "Containerd", "PodLogs"
	// Filesystem is "xfs" (default) or "ext4".
	Filesystem string
	// Force claims matched disks that hold data berth did not write (or a
	// berth layout other than the configured one), destroying it.
	Force bool
	// Fatal makes a failure stop the boot; by default the node goes on
	// with containerd and kubelet on the root disk.
	Fatal bool
	// Match selects the disks; zero value means EC2 instance store.
	Match instancestore.Matcher
}

// withDefaults fills defaults and validates.
func (o Options) withDefaults() (Options, error) {
	if o.MountPath == "" {
		o.MountPath = DefaultMountPath
	}
	if !path.IsAbs(o.MountPath) || path.Clean(o.MountPath) != o.MountPath || o.MountPath == "/" {
		return o, fmt.Errorf("localStorage.mountPath %q: must be a clean absolute path other than /", o.MountPath)
	}
	if o.Filesystem == "" {
		o.Filesystem = "xfs"
	}
	if o.Filesystem != "xfs" && o.Filesystem != "ext4" {
		return o, fmt.Errorf("localStorage filesystem %q: must be xfs or ext4", o.Filesystem)
	}
	switch o.Strategy {
	case StrategyNone, StrategyRAID0, StrategyRAID10, StrategyMount:
	default:
		return o, fmt.Errorf("localStorage.strategy %q: must be RAID0, RAID10 or Mount", o.Strategy)
	}
	for i, d := range o.DisabledMounts {
		if d != DisableContainerd && d != DisablePodLogs {
			return o, fmt.Errorf("localStorage.disabledMounts[%d] %q: must be Containerd or PodLogs", i, d)
		}
	}
	if len(o.Match.Models) == 0 {
		o.Match = instancestore.DefaultMatcher()
	}
	return o, nil
}

// Bind is one bind mount of a directory on the instance-store filesystem
// over a node directory.
type Bind struct {
	Source string `json:"source"` // on the filesystem, e.g. /mnt/k8s-disks/0/containerd
	Target string `json:"target"` // e.g. /var/lib/containerd
	// Propagation is "rshared" where kubelet needs mounts made under the
	// directory (volumes) to propagate to containers; "" keeps the default.
	Propagation string `json:"propagation,omitempty"`
}

// binds lists the bind mounts for a filesystem mounted at mnt, minus the
// disabled ones. kubelet's cannot be disabled, as in nodeadm.
func binds(mnt string, disabled []string) []Bind {
	var out []Bind
	if !slices.Contains(disabled, DisableContainerd) {
		out = append(out, Bind{Source: path.Join(mnt, "containerd"), Target: "/var/lib/containerd"})
	}
	out = append(out, Bind{Source: path.Join(mnt, "kubelet"), Target: "/var/lib/kubelet", Propagation: "rshared"})
	if !slices.Contains(disabled, DisablePodLogs) {
		out = append(out, Bind{Source: path.Join(mnt, "pod-logs"), Target: "/var/log/pods"})
	}
	return out
}
