package kubelet

import "fmt"

// CPUMillicoresToReserve is kubeReserved's cpu for a machine with cpus
// cores, with nodeadm's integer rounding (each tier rounds down).
func CPUMillicoresToReserve(cpus int) int64 {
	// nodeadm's (and the EKS AL2 bootstrap's) tiers: 6% of the first core,
	// 1% of the second, 0.5% of the third and fourth, 0.25% of every core
	// above four. Each entry is the tier's upper bound in millicores and its
	// share in hundredths of a percent.
	cpuTiers := [...]struct{ upTo, basisPoints int64 }{
		{1000, 600},
		{2000, 100},
		{4000, 50},
		{1 << 62, 25},
	}
	total := int64(cpus) * 1000
	var reserved, start int64
	for _, t := range cpuTiers {
		if total <= start {
			break
		}
		end := min(total, t.upTo)
		reserved += (end - start) * t.basisPoints / 10000
		start = t.upTo
	}
	return reserved
}

// MemoryMebibytesToReserve is kubeReserved's memory: 255 MiB plus 11 MiB
// per pod the node may run.
func MemoryMebibytesToReserve(maxPods int32) int64 {
	return 11*int64(maxPods) + 255
}

// KubeReserved is the kubeReserved map for a node with cpus cores that may
// run maxPods pods. maxPods must be the EFFECTIVE value (after the user's
// kubelet.config): nodeadm computes memory from its own table value even
// when the user overrides maxPods, reserving too little (or too much)
// memory for the pods the node really runs; berth does not.
func KubeReserved(cpus int, maxPods int32) map[string]string {
	return map[string]string{
		"cpu":               fmt.Sprintf("%dm", CPUMillicoresToReserve(cpus)),
		"ephemeral-storage": "1Gi",
		"memory":            fmt.Sprintf("%dMi", MemoryMebibytesToReserve(maxPods)),
	}
}
