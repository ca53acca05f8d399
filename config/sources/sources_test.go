package sources

import (
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-node/berth/config/imds"
	"github.com/berth-node/berth/config/platform"
	"github.com/berth-node/berth/internal/golden"
	"github.com/berth-node/berth/mounts/sigprobe"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

var (
	ec2     = platform.EC2{Verdict: platform.Yes, Reason: `class/dmi/id/sys_vendor is "Amazon EC2"`}
	notEC2  = platform.EC2{Verdict: platform.No, Reason: `sys_vendor is "QEMU" and no file says EC2`}
	unknown = platform.EC2{Verdict: platform.Unknown, Reason: "DMI has no sys_vendor"}
	vfat    = Volume{Device: "/dev/vdb", FS: sigprobe.VFAT, Label: "cidata"}
	iso     = Volume{Device: "/dev/sr0", FS: sigprobe.ISO9660, Label: "CIDATA"}
	ext4    = Volume{Device: "/dev/vdc", FS: sigprobe.Ext4, Label: "cidata"}
)

func scan(n int, vs ...Volume) *Scan { return &Scan{Devices: n, Labelled: vs} }

// Every case's decision, entries and error, in one golden file: what
// boot.json's config.source shows for each.
func TestDecide(t *testing.T) {
	cases := []struct {
		name string
		in   Inputs
	}{
		{"ec2", Inputs{EC2: ec2}},
		{"ec2 with a seed and a URL", Inputs{EC2: ec2, Seeds: scan(2, vfat), UserData: "http://x/u", UserDataSet: true}},
		{"unknown tries imds", Inputs{EC2: unknown}},
		{"imds forced off ec2", Inputs{EC2: notEC2, IMDS: imds.Override{Endpoint: "http://10.0.2.2:8111"}}},
		{"imds off on ec2", Inputs{EC2: ec2, IMDS: imds.Override{Off: true}, Seeds: scan(1)}},
		{"not ec2, not scanned", Inputs{EC2: notEC2}},
		{"vfat seed", Inputs{EC2: notEC2, Seeds: scan(3, vfat)}},
		{"iso seed beside a URL", Inputs{EC2: notEC2, Seeds: scan(3, iso), UserData: "http://x/u", UserDataSet: true}},
		{"two seeds", Inputs{EC2: notEC2, Seeds: scan(3, vfat, iso)}},
		{"ext4 labelled cidata", Inputs{EC2: notEC2, Seeds: &Scan{Devices: 2, Labelled: []Volume{ext4}, Unreadable: []string{"/dev/sr0: no medium"}}}},
		{"other label", Inputs{EC2: notEC2, Seeds: scan(1, Volume{Device: "/dev/vdb", FS: sigprobe.VFAT, Label: "Cidata"})}},
		{"url", Inputs{EC2: notEC2, Seeds: scan(1), UserData: "https://config.example/n1", UserDataSet: true}},
		{"path", Inputs{EC2: notEC2, Seeds: scan(1), UserData: "/etc/berth/user-data", UserDataSet: true}},
		{"bad url", Inputs{EC2: notEC2, Seeds: scan(1), UserData: "ftp://x", UserDataSet: true}},
		{"image only", Inputs{EC2: notEC2, Seeds: scan(0)}},
	}
	var b strings.Builder
	for _, c := range cases {
		d, err := Decide(c.in)
		fmt.Fprintf(&b, "== %s\n", c.name)
		out, _ := json.MarshalIndent(struct {
			Use      Kind    `json:"use,omitempty"`
			NeedScan bool    `json:"needScan,omitempty"`
			Seed     Volume  `json:"seed,omitzero"`
			URL      string  `json:"url,omitempty"`
			Entries  []Entry `json:"entries"`
		}{d.Use, d.NeedScan, d.Seed, d.URL.Where, d.Entries}, "", "  ")
		b.Write(out)
		b.WriteString("\n")
		if err != nil {
			fmt.Fprintf(&b, "error: %v\n", err)
		}
		// The rules every decision keeps.
		switch {
		case d.NeedScan:
			if d.Use != "" || d.Entries != nil {
				t.Errorf("%s: NeedScan with a source or entries: %+v", c.name, d)
			}
			continue
		case err == nil && d.Use == "":
			t.Errorf("%s: no source and no error", c.name)
		}
		used := 0
		for _, e := range d.Entries {
			if e.Used && e.Source != Image {
				used++
			}
			if e.Why == "" {
				t.Errorf("%s: %s has no why", c.name, e.Source)
			}
		}
		if used > 1 {
			t.Errorf("%s: %d sources used", c.name, used)
		}
		if err == nil && d.Entries[len(d.Entries)-1].Source != Image {
			t.Errorf("%s: the image's entry is not last", c.name)
		}
		if c.in.EC2.Verdict == platform.No && c.in.IMDS.Endpoint == "" && d.Use == IMDS {
			t.Errorf("%s: IMDS on a machine that is not EC2", c.name)
		}
	}
	golden.Check(t, filepath.Join("testdata", "decide.golden"), []byte(b.String()), *update)
}
