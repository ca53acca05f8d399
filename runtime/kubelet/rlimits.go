package kubelet

import "github.com/berth-node/berth/runtime/rlimit"

// Rlimits are kubelet's own limits. AL2023's kubelet.service sets none, so
// kubelet runs with systemd's DefaultLimitNOFILE, 1024:524288 (the Go
// runtime raises its soft limit to the hard one; the plugins and mount
// helpers it runs get 1024 back). Core and process limits stay the
// kernel's defaults there as here.
func Rlimits() []rlimit.Limit {
	return []rlimit.Limit{{Resource: "nofile", Soft: 1024, Hard: 524288}}
}
