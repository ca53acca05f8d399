package maxpods

import (
	"strings"
	"testing"
)

// Graviton (arm64) instance families a berth arm64 image may boot on. A
// family missing from the embedded table would silently fall back to
// kubelet's 110, over-committing small types' IPs and under-using large ones.
var gravitonFamilies = []string{
	"a1",
	"c6g", "c6gd", "c6gn", "c7g", "c7gd", "c7gn", "c8g", "c8gd", "c8gn",
	"g5g", "hpc7g", "i4g", "i8g", "i8ge", "im4gn", "is4gen",
	"m6g", "m6gd", "m7g", "m7gd", "m8g", "m8gd",
	"r6g", "r6gd", "r7g", "r7gd", "r8g", "r8gd",
	"t4g", "x2gd", "x8g",
}

func TestGravitonFamiliesInTable(t *testing.T) {
	sizes := map[string]int{}
	for i := range Len() {
		name := tableName(i)
		fam, _, ok := strings.Cut(name, ".")
		if ok {
			sizes[fam]++
		}
	}
	for _, fam := range gravitonFamilies {
		if sizes[fam] == 0 {
			t.Errorf("Graviton family %s has no instance type in the max-pods table (data/instance-info.jsonl)", fam)
		}
	}
}

// The values EKS's eni-max-pods.txt gives for Graviton types, from the
// smallest to the 64+ vCPU and metal sizes.
func TestGravitonMaxPods(t *testing.T) {
	for _, tc := range []struct {
		typ  string
		want int32
	}{
		{"t4g.nano", 4},
		{"m6g.medium", 8},
		{"c7g.large", 29},
		{"hpc7g.16xlarge", 198},
		{"m7g.16xlarge", 737},  // 64 vCPUs
		{"c7gn.16xlarge", 737}, // 64 vCPUs
		{"r8g.24xlarge", 737},  // 96 vCPUs
		{"m8g.48xlarge", 737},  // 192 vCPUs
		{"m8g.metal-48xl", 737},
		{"x8g.metal-48xl", 737},
		{"a1.metal", 234},
	} {
		info, ok := Lookup(tc.typ)
		if !ok {
			t.Errorf("%s: not in the table", tc.typ)
			continue
		}
		if got := info.MaxPods(); got != tc.want {
			t.Errorf("%s: max pods %d, want %d", tc.typ, got, tc.want)
		}
	}
}
