package seeddisk

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/berth-node/berth/config/nocloud"
	"github.com/berth-node/berth/config/platform"
	"github.com/berth-node/berth/config/sources"
	"github.com/berth-node/berth/mounts/sigprobe"
)

func TestCandidate(t *testing.T) {
	for name, want := range map[string]bool{
		"vda": true, "vdb1": true, "sr0": true, "sda": true, "nvme1n1": true, "xvdb": true, "mmcblk0p1": true,
		"loop0": false, "ram0": false, "zram0": false, "dm-0": false, "md0": false, "nbd0": false,
	} {
		if got := Candidate(name, 2048); got != want {
			t.Errorf("Candidate(%s) = %v, want %v", name, got, want)
		}
	}
	if Candidate("sr0", 0) {
		t.Error("an empty CD drive (size 0) is a candidate")
	}
}

// head is a real filesystem's first bytes, from sigprobe's testdata
// (mkfs.vfat -n cidata and genisoimage -volid cidata).
func head(t *testing.T, name string) []byte {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "sigprobe", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Find reads every candidate's label through /dev and returns those
// labelled cidata in any case; the others are counted, and a device it
// cannot open is named.
func TestFind(t *testing.T) {
	sys, dev := t.TempDir(), t.TempDir()
	add := func(name, size string, data []byte) {
		if err := os.MkdirAll(filepath.Join(sys, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sys, name, "size"), []byte(size+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if data != nil {
			if err := os.WriteFile(filepath.Join(dev, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	upper := head(t, "vfat32.head.gz")
	add("vda", "4096", make([]byte, 8192))              // blank: read, not labelled
	add("vdb", "4096", head(t, "vfat12.head.gz"))       // cidata
	add("vdc", "81920", upper)                          // CIDATA
	add("sr0", "730", head(t, "iso9660.head.gz"))       // cidata
	add("sr1", "0", nil)                                // no disc: not read
	add("loop0", "4096", head(t, "vfat12.head.gz"))     // never a seed
	add("vdd", "4096", nil)                             // in sysfs, not in /dev
	add("vde", "4096", bytes.Repeat([]byte{0xff}, 100)) // short, unknown
	got := Find(context.Background(), slog.New(slog.DiscardHandler), sys, dev)
	want := sources.Scan{
		Devices: 6,
		Labelled: []sources.Volume{
			{Device: filepath.Join(dev, "sr0"), FS: sigprobe.ISO9660, Label: "cidata"},
			{Device: filepath.Join(dev, "vdb"), FS: sigprobe.VFAT, Label: "cidata"},
			{Device: filepath.Join(dev, "vdc"), FS: sigprobe.VFAT, Label: "CIDATA"},
		},
		Unreadable: []string{filepath.Join(dev, "vdd") + ": no such file or directory"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Find =\n%+v\nwant\n%+v", got, want)
	}
	// What Decide makes of it: three seeds is an error naming each.
	_, err := sources.Decide(sources.Inputs{EC2: platform.EC2{Verdict: platform.No}, Seeds: &got})
	if err == nil || !strings.Contains(err.Error(), "3 NoCloud seeds") {
		t.Errorf("Decide: %v, want 3 seeds refused", err)
	}

	if sc := Find(context.Background(), slog.New(slog.DiscardHandler), filepath.Join(sys, "none"), dev); len(sc.Unreadable) != 1 || sc.Devices != 0 {
		t.Errorf("no class/block: %+v, want it named", sc)
	}
}

func TestModules(t *testing.T) {
	if m := Modules(sigprobe.VFAT); !reflect.DeepEqual(m, []string{"vfat", "nls_cp437", "nls_ascii"}) {
		t.Errorf("vfat: %v", m)
	}
	if m := Modules(sigprobe.ISO9660); !reflect.DeepEqual(m, []string{"isofs"}) {
		t.Errorf("iso9660: %v", m)
	}
	if m := Modules(sigprobe.Ext4); m != nil {
		t.Errorf("ext4: %v, want none: not a seed", m)
	}
}

// Err names the device and every problem the seed has; none is nil.
func TestErr(t *testing.T) {
	in := &nocloud.Inspection{Errors: []nocloud.Problem{
		{File: nocloud.FileUserData, Message: "empty: a node booted from this seed has no NodeConfig"},
		{File: nocloud.FileNetworkConfig, Line: 4, Path: "ethernets.lan.nameserver", Message: "not supported"},
	}}
	err := Err(in, "/dev/vdb")
	for _, w := range []string{"the NoCloud seed /dev/vdb", "user-data: empty", "network-config: line 4: ethernets.lan.nameserver: not supported"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Err = %v, want %q in it", err, w)
		}
	}
	if err := Err(&nocloud.Inspection{}, "/dev/vdb"); err != nil {
		t.Errorf("no problems: %v", err)
	}
}
