package instancestore

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func discoverFixture(t *testing.T, tree string, m Matcher) ([]Disk, []Skipped) {
	t.Helper()
	root := filepath.Join("testdata", tree)
	mi, err := os.ReadFile(filepath.Join(root, "mountinfo"))
	if err != nil {
		t.Fatal(err)
	}
	inUse, err := InUseDisks(filepath.Join(root, "sys"), mi)
	if err != nil {
		t.Fatal(err)
	}
	disks, skipped, err := Discover(filepath.Join(root, "sys"), m, inUse)
	if err != nil {
		t.Fatal(err)
	}
	return disks, skipped
}

func names(ds []Disk) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Name)
	}
	return out
}

func TestDiscoverEC2(t *testing.T) {
	for _, tc := range []struct {
		tree  string
		want  []string
		size  int64
		first string
	}{
		{"ec2-0", nil, 0, ""},
		{"ec2-1", []string{"nvme1n1"}, 464843750 * 512, "AWS1A2B3C4D5E6F70001"},
		{"ec2-2", []string{"nvme1n1", "nvme2n1"}, 464843750 * 512, "AWS1A2B3C4D5E6F70001"},
		{"ec2-4", []string{"nvme1n1", "nvme2n1", "nvme3n1", "nvme4n1"}, 1831831216 * 512, "AWS1A2B3C4D5E6F70001"},
		{"multipath", []string{"nvme1n1", "nvme2n1"}, 781250000 * 512, "AWSMP001"},
	} {
		t.Run(tc.tree, func(t *testing.T) {
			disks, _ := discoverFixture(t, tc.tree, DefaultMatcher())
			if got := names(disks); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("disks = %v, want %v", got, tc.want)
			}
			for _, d := range disks {
				if d.Model != EC2Model {
					t.Errorf("%s: model %q not trimmed/EC2", d.Name, d.Model)
				}
				if d.SizeBytes != tc.size {
					t.Errorf("%s: size %d, want %d", d.Name, d.SizeBytes, tc.size)
				}
				if d.Path != "/dev/"+d.Name || d.Dev == "" {
					t.Errorf("%s: path %q dev %q", d.Name, d.Path, d.Dev)
				}
			}
			if len(disks) > 0 && disks[0].Serial != tc.first {
				t.Errorf("first serial %q, want %q", disks[0].Serial, tc.first)
			}
		})
	}
}

// The EBS root and any EBS data volume stay untouched even with a matcher
// that takes every model: the model check and the mountinfo check both hold.
func TestDiscoverNeverTakesEBSOrBootDisk(t *testing.T) {
	disks, skipped := discoverFixture(t, "ec2-4", Matcher{Models: []string{"*"}})
	if got, want := names(disks), []string{"nvme1n1", "nvme2n1", "nvme3n1", "nvme4n1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("disks = %v, want %v", got, want)
	}
	reasons := map[string]string{}
	for _, s := range skipped {
		reasons[s.Name] = s.Reason
	}
	for _, n := range []string{"nvme0n1", "nvme5n1"} {
		if reasons[n] != "EBS volume: never claimed" {
			t.Errorf("%s: skipped reason %q", n, reasons[n])
		}
	}
}

func TestDiscoverSkipsMountedDisk(t *testing.T) {
	disks, skipped := discoverFixture(t, "inuse", DefaultMatcher())
	if got, want := names(disks), []string{"nvme1n1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("disks = %v, want %v", got, want)
	}
	found := false
	for _, s := range skipped {
		if s.Name == "nvme2n1" && s.Reason == "in use: holds a mounted filesystem or is held by another device" {
			found = true
		}
	}
	if !found {
		t.Fatalf("nvme2n1 not reported as in use: %+v", skipped)
	}
}

func TestDiscoverQEMUWithConfig(t *testing.T) {
	// Default matcher: QEMU disks are seen but not taken.
	disks, skipped := discoverFixture(t, "qemu", DefaultMatcher())
	if len(disks) != 0 || len(skipped) != 3 {
		t.Fatalf("default matcher on QEMU: disks %v skipped %+v", names(disks), skipped)
	}
	c, err := ParseConfig([]byte(`{"match":{"models":["QEMU NVMe Ctrl"],"serials":["berth-is-*"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	disks, _ = discoverFixture(t, "qemu", c.Match)
	if got, want := names(disks), []string{"nvme1n1", "nvme2n1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("disks = %v, want %v (the ebs-stand-in must stay out)", got, want)
	}
	if disks[0].Serial != "berth-is-0" || disks[1].SizeBytes != 1<<30 {
		t.Fatalf("unexpected disks %+v", disks)
	}
}

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig([]byte(`{}`))
	if err != nil || !reflect.DeepEqual(c.Match, DefaultMatcher()) {
		t.Fatalf("empty config = %+v, %v", c, err)
	}
	for _, bad := range []string{`{"match":{"modles":["x"]}}`, `{"match":{"models":["["]}}`, `{"match":{"serials":["["]}}`, `[`} {
		if _, err := ParseConfig([]byte(bad)); err == nil {
			t.Errorf("ParseConfig(%s) accepted", bad)
		}
	}
	c, err = LoadConfig(filepath.Join(t.TempDir(), "absent.json"))
	if err != nil || !reflect.DeepEqual(c.Match, DefaultMatcher()) {
		t.Fatalf("missing file = %+v, %v", c, err)
	}
}

func TestInUseDisksBadLine(t *testing.T) {
	if _, err := InUseDisks(t.TempDir(), []byte("1 2 nocolon / / rw - x y z\n")); err == nil {
		t.Fatal("bad major:minor accepted")
	}
}

// FuzzParseConfig: the storage config is outside input; it must never
// panic and an accepted config must have usable globs.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{"match":{"models":["QEMU NVMe Ctrl"],"serials":["berth-is-*"]}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(b)
		if err != nil {
			return
		}
		if len(c.Match.Models) == 0 {
			t.Fatal("accepted config without models")
		}
		_ = c.Match.Match("m", "s")
	})
}

// FuzzInUseDisks: mountinfo is kernel text but parsed by us; never panic.
func FuzzInUseDisks(f *testing.F) {
	f.Add([]byte("22 1 259:2 / / rw,relatime shared:1 - xfs /dev/nvme0n1p1 rw\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = InUseDisks(filepath.Join("testdata", "ec2-1", "sys"), b)
	})
}
