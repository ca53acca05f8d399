package kubelet

import "github.com/berth-node/berth/internal/flagwords"

// SplitUserFlags turns the user's kubelet.flags into argv words the way an
// AL2023 node does (flagwords.Split). Validation (nodeconfig) checked the
// same words.
func SplitUserFlags(flags []string) []string {
	var out []string
	for _, f := range flags {
		out = append(out, flagwords.Split(f)...)
	}
	return out
}
