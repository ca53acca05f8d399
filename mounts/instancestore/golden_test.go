package instancestore

import (
	"encoding/json"
	"flag"
	"path/filepath"
	"testing"

	"github.com/berth-node/berth/internal/golden"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.json from the current output")

// TestDiscoverGolden pins the whole discovery output (disks and skipped,
// with reasons) for every fixture tree, as it appears in the boot report.
func TestDiscoverGolden(t *testing.T) {
	qemu, err := ParseConfig([]byte(`{"match":{"models":["QEMU NVMe Ctrl"],"serials":["berth-is-*"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tree := range []string{"ec2-0", "ec2-1", "ec2-2", "ec2-4", "multipath", "inuse", "qemu"} {
		t.Run(tree, func(t *testing.T) {
			m := DefaultMatcher()
			if tree == "qemu" {
				m = qemu.Match
			}
			disks, skipped := discoverFixture(t, tree, m)
			got, err := json.MarshalIndent(struct {
				Disks   []Disk    `json:"disks"`
				Skipped []Skipped `json:"skipped"`
			}{disks, skipped}, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			goldenPath := filepath.Join("testdata", tree+".golden.json")
			golden.Check(t, goldenPath, got, *update)
		})
	}
}
