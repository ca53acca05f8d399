package localstorage

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/berth-node/berth/mounts/instancestore"
	"github.com/berth-node/berth/mounts/partition"
	"github.com/berth-node/berth/mounts/raid"
	"github.com/berth-node/berth/mounts/sigprobe"
)

func blankDisks(n int) []DiskState {
	var ds []DiskState
	for i := range n {
		ds = append(ds, DiskState{
			Disk:  instancestore.Disk{Name: fmt.Sprintf("nvme%dn1", i+1), Path: fmt.Sprintf("/dev/nvme%dn1", i+1), Serial: fmt.Sprintf("AWS%d", i), SizeBytes: 1 << 30},
			Found: sigprobe.Signature{Kind: sigprobe.Blank},
		})
	}
	return ds
}

// marked returns the disks as a previous boot with the same decision left them.
func marked(d Decision, ds []DiskState) []DiskState {
	out := append([]DiskState(nil), ds...)
	for i := range out {
		m := d.Members[i].Mark
		out[i].Mark = &m
		out[i].Found = sigprobe.Signature{Kind: sigprobe.GPT}
	}
	return out
}

func TestDecideStrategies(t *testing.T) {
	for _, tc := range []struct {
		name    string
		o       Options
		n       int
		level   raid.Level
		mounts  []string
		member  int
		binds   []string
		raidTyp bool
	}{
		{"raid0 x1 uses the disk directly", Options{Strategy: StrategyRAID0}, 1, "", []string{"/mnt/k8s-disks/0"}, 0,
			[]string{"/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"}, false},
		{"raid0 x2", Options{Strategy: StrategyRAID0}, 2, raid.RAID0, []string{"/mnt/k8s-disks/0"}, -1,
			[]string{"/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"}, true},
		{"raid10 x4", Options{Strategy: StrategyRAID10, MountPath: "/data"}, 4, raid.RAID10, []string{"/data/0"}, -1,
			[]string{"/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"}, true},
		{"raid0 disabled mounts", Options{Strategy: StrategyRAID0, DisabledMounts: []string{DisableContainerd, DisablePodLogs}}, 2, raid.RAID0,
			[]string{"/mnt/k8s-disks/0"}, -1, []string{"/var/lib/kubelet"}, true},
		{"mount x2", Options{Strategy: StrategyMount}, 2, "", []string{"/mnt/k8s-disks/0", "/mnt/k8s-disks/1"}, 0, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Decide(tc.o, blankDisks(tc.n))
			if err != nil {
				t.Fatal(err)
			}
			if !d.Create || d.Level != tc.level || len(d.Members) != tc.n {
				t.Fatalf("decision %+v", d)
			}
			var mounts, targets []string
			for _, v := range d.Volumes {
				mounts = append(mounts, v.Mount)
			}
			for _, b := range d.Binds {
				targets = append(targets, b.Target)
				if (b.Target == "/var/lib/kubelet") != (b.Propagation == "rshared") {
					t.Errorf("bind %+v: only kubelet's is rshared", b)
				}
				if !strings.HasPrefix(b.Source, d.Volumes[0].Mount+"/") {
					t.Errorf("bind source %s not on the filesystem", b.Source)
				}
			}
			if !reflect.DeepEqual(mounts, tc.mounts) || !reflect.DeepEqual(targets, tc.binds) || d.Volumes[0].Member != tc.member {
				t.Fatalf("mounts %v binds %v member %d", mounts, targets, d.Volumes[0].Member)
			}
			for i, m := range d.Members {
				if m.Mark.Index != i || m.Mark.Count != tc.n || m.Mark.RAIDMember != tc.raidTyp || m.Mark.Array != d.ArrayID {
					t.Errorf("member %d mark %+v", i, m.Mark)
				}
			}
			// A reboot over the same disks reuses everything.
			again, err := Decide(tc.o, marked(d, blankDisks(tc.n)))
			if err != nil {
				t.Fatal(err)
			}
			if again.Create || again.ArrayID != d.ArrayID || !reflect.DeepEqual(again.Volumes, d.Volumes) {
				t.Fatalf("reboot decision %+v differs from %+v", again, d)
			}
		})
	}
}

func TestDecideRAID10TooFew(t *testing.T) {
	for n := 1; n < 4; n++ {
		_, err := Decide(Options{Strategy: StrategyRAID10}, blankDisks(n))
		want := fmt.Sprintf("strategy RAID10 needs at least 4 instance-store disks, found %d (/dev/nvme1n1", n)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%d disks: %v", n, err)
		}
	}
}

func TestDecideRefusesForeign(t *testing.T) {
	ds := blankDisks(2)
	ds[1].Found = sigprobe.Signature{Kind: sigprobe.XFS, Label: "data", UUID: "11111111-2222-3333-4444-555555555555"}
	_, err := Decide(Options{Strategy: StrategyRAID0}, ds)
	want := `disk /dev/nvme2n1 (serial AWS1) holds an xfs filesystem (label "data", uuid 11111111-2222-3333-4444-555555555555) that berth did not create`
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "set force") {
		t.Fatalf("err = %v", err)
	}
	d, err := Decide(Options{Strategy: StrategyRAID0, Force: true}, ds)
	if err != nil || !d.Create || len(d.Reclaimed) != 1 || !strings.Contains(d.Reclaimed[0], "xfs") {
		t.Fatalf("force: %+v %v", d, err)
	}
}

// Changing the strategy between boots must not silently reformat.
func TestDecideRefusesOtherBerthLayout(t *testing.T) {
	prev, err := Decide(Options{Strategy: StrategyRAID0}, blankDisks(4))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Decide(Options{Strategy: StrategyRAID10}, marked(prev, blankDisks(4)))
	if err == nil || !strings.Contains(err.Error(), "is berth's raid0 member 1/4") {
		t.Fatalf("err = %v", err)
	}
	// Half berth's, half blank: a member replaced.
	mixed := marked(prev, blankDisks(4))
	mixed[3].Mark, mixed[3].Found = nil, sigprobe.Signature{Kind: sigprobe.Blank}
	_, err = Decide(Options{Strategy: StrategyRAID0}, mixed)
	if err == nil || !strings.Contains(err.Error(), "3 of 4 disks carry berth's marks") {
		t.Fatalf("mixed err = %v", err)
	}
}

func TestDecideOptions(t *testing.T) {
	for _, o := range []Options{
		{Strategy: "raid0"}, {Strategy: StrategyRAID0, MountPath: "rel"}, {Strategy: StrategyRAID0, MountPath: "/"},
		{Strategy: StrategyRAID0, Filesystem: "btrfs"}, {Strategy: StrategyRAID0, DisabledMounts: []string{"Kubelet"}},
	} {
		if _, err := Decide(o, blankDisks(1)); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
}

func TestFSAction(t *testing.T) {
	v := Volume{UUID: FSUUID(partition.ArrayID("raid0", []string{"a"}), 0)}
	ours := sigprobe.Signature{Kind: sigprobe.XFS, UUID: v.UUID, Label: FSLabel}
	for name, tc := range map[string]struct {
		created bool
		found   sigprobe.Signature
		mkfs    bool
		err     string
	}{
		"fresh":           {true, sigprobe.Signature{Kind: sigprobe.Unknown}, true, ""},
		"reboot":          {false, ours, false, ""},
		"interrupted":     {false, sigprobe.Signature{Kind: sigprobe.Blank}, true, ""},
		"someone else fs": {false, sigprobe.Signature{Kind: sigprobe.Ext4, UUID: "x"}, false, "hold an ext4 filesystem (uuid x), not the filesystem berth made"},
	} {
		mkfs, err := FSAction(tc.created, v, "xfs", tc.found)
		if mkfs != tc.mkfs || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: mkfs %v err %v", name, mkfs, err)
		}
	}
}

func TestMkfsArgs(t *testing.T) {
	v := Volume{Label: "berth-is", UUID: "u"}
	got := strings.Join(MkfsArgs("xfs", v, raid.RAID0, 2, "/dev/dm-0"), " ")
	if want := "-q -f -K -L berth-is -m uuid=u -d su=512k,sw=2 /dev/dm-0"; got != want {
		t.Errorf("xfs raid0: %q, want %q", got, want)
	}
	got = strings.Join(MkfsArgs("xfs", v, "", 1, "/dev/nvme1n1p1"), " ")
	if want := "-q -f -K -L berth-is -m uuid=u /dev/nvme1n1p1"; got != want {
		t.Errorf("xfs single: %q", got)
	}
	got = strings.Join(MkfsArgs("ext4", v, raid.RAID10, 4, "/dev/dm-0"), " ")
	if want := "-q -F -L berth-is -U u -E nodiscard,stride=128,stripe_width=256 /dev/dm-0"; got != want {
		t.Errorf("ext4 raid10: %q", got)
	}
}

func TestIdentityIndependentOfEnumeration(t *testing.T) {
	// Discovery sorts by serial; the array ID is of the sorted serials, so
	// the same disks give the same ID whatever their nvme numbers.
	a := blankDisks(2)
	b := blankDisks(2)
	b[0].Disk.Name, b[1].Disk.Name = b[1].Disk.Name, b[0].Disk.Name
	da, _ := Decide(Options{Strategy: StrategyRAID0}, a)
	db, _ := Decide(Options{Strategy: StrategyRAID0}, b)
	if da.ArrayID != db.ArrayID {
		t.Fatal("array ID depends on device names")
	}
}
