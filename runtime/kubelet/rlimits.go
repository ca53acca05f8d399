package kubelet

import "github.com/berth-node/berth/runtime/rlimit"

// Rlimits are kubelet's own limits. AL2023's kubelet.service sets none, so
// kubelet starts with systemd's DefaultLimitNOFILE, 1024:524288; core and
// process limits stay the kernel's defaults there as here. kubelet then
// sets its own NOFILE to its maxOpenFiles (1000000 by default) at start,
// and what it runs (credential and mount helpers) inherits that, on both.
func Rlimits() []rlimit.Limit {
	return []rlimit.Limit{{Resource: "nofile", Soft: 1024, Hard: 524288}}
}
