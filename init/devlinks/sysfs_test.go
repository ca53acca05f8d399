package devlinks

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

// fakeSys is a sysfs tree as the kernel lays NVMe out:
// devices/.../nvme/nvmeX/{model,serial,dev} and nvmeXnY/{wwid,nsid,
// device → nvmeX, nvmeXnYpZ/partition}, with class/block links to them.
type fakeSys struct {
	t    *testing.T
	root string
}

func newFakeSys(t *testing.T) *fakeSys {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "class", "block"), 0o755); err != nil {
		t.Fatal(err)
	}
	return &fakeSys{t: t, root: root}
}

func (f *fakeSys) write(p, s string) {
	f.t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeSys) link(target, p string) {
	f.t.Helper()
	if err := os.Symlink(target, p); err != nil {
		f.t.Fatal(err)
	}
}

// addNamespace adds controller ctrl (if new) and namespace ns with parts.
func (f *fakeSys) addNamespace(ctrl, ns, model, serial string, parts ...string) {
	cdir := filepath.Join(f.root, "devices", "pci0000:00", ctrl, "nvme", ctrl)
	f.write(filepath.Join(cdir, "model"), model+"\n")
	f.write(filepath.Join(cdir, "serial"), serial+"\n")
	f.write(filepath.Join(cdir, "dev"), "240:0\n")
	ndir := filepath.Join(cdir, ns)
	f.write(filepath.Join(ndir, "nsid"), strings.SplitN(ns, "n", 3)[2]+"\n")
	f.write(filepath.Join(ndir, "wwid"), "eui."+serial+"\n")
	f.link("..", filepath.Join(ndir, "device"))
	f.link(ndir, filepath.Join(f.root, "class", "block", ns))
	for _, p := range parts {
		f.write(filepath.Join(ndir, p, "partition"), "1\n")
		f.link(filepath.Join(ndir, p), filepath.Join(f.root, "class", "block", p))
	}
}

func (f *fakeSys) remove(names ...string) {
	for _, n := range names {
		if err := os.Remove(filepath.Join(f.root, "class", "block", n)); err != nil {
			f.t.Fatal(err)
		}
	}
}

// fakeIdentify answers for the EBS namespaces it knows, and counts calls.
type fakeIdentify struct {
	data  map[string][]byte
	calls []string
}

func (fi *fakeIdentify) fn(disk, sysDir string) ([]byte, error) {
	fi.calls = append(fi.calls, disk)
	if _, err := controllerOf(sysDir); err != nil {
		return nil, err
	}
	if b, ok := fi.data[disk]; ok {
		return b, nil
	}
	return nil, errors.New("no such controller")
}

// readLinks lists the symlinks under dev as name → target text.
func readLinks(t *testing.T, dev string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.Walk(dev, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.Mode()&os.ModeSymlink != 0 {
			tgt, err := os.Readlink(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dev, p)
			got[rel] = tgt
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func names(ls []Link) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Name)
	}
	sort.Strings(out)
	return out
}

// TestScanAndReconcile: the coldplug makes the links of an EBS volume
// with a partition, and a QEMU disk; a stale link from a device gone is
// removed and a device node in the way is left alone; a second run
// changes nothing; removing the EBS volume removes its links, and other
// links in /dev are never touched.
func TestScanAndReconcile(t *testing.T) {
	sys := newFakeSys(t)
	sys.addNamespace("nvme0", "nvme0n1", "QEMU NVMe Ctrl", "root")
	sys.addNamespace("nvme1", "nvme1n1", EBSModel, "vol0123456789abcdef0", "nvme1n1p1")
	id := &fakeIdentify{data: map[string][]byte{"nvme1n1": ebsXvdba}}

	dev := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dev, "disk", "by-id"), 0o755))
	must(os.Symlink("../../nvme7n1", filepath.Join(dev, "disk", "by-id", "nvme-Gone_1")))       // stale
	must(os.Symlink("../../sda", filepath.Join(dev, "disk", "by-id", "ata-Other_1")))           // not ours
	must(os.Symlink("/proc/self/fd", filepath.Join(dev, "fd")))                                 // not ours
	must(os.Symlink("nvme7n1", filepath.Join(dev, "sdz")))                                      // stale EC2 name
	must(os.WriteFile(filepath.Join(dev, "xvdba1"), nil, 0o600))                                // something in the way
	must(os.Symlink("nvme0n1", filepath.Join(dev, "disk", "by-id", ".berth-devlink-leftover"))) // crash leftover

	devs, err := Scan(sys.root, id.fn)
	must(err)
	if !reflect.DeepEqual(id.calls, []string{"nvme1n1"}) {
		t.Errorf("identify asked for %v, want only the EBS namespace, once", id.calls)
	}
	ch, err := Reconcile(dev, LinkSet(devs))
	must(err)
	want := map[string]string{
		"disk/by-id/ata-Other_1":                                                     "../../sda",
		"disk/by-id/nvme-QEMU_NVMe_Ctrl_root":                                        "../../nvme0n1",
		"disk/by-id/nvme-QEMU_NVMe_Ctrl_root_1":                                      "../../nvme0n1",
		"disk/by-id/nvme-QEMU_NVMe_Ctrl_root-ns-1":                                   "../../nvme0n1",
		"disk/by-id/nvme-eui.root":                                                   "../../nvme0n1",
		"disk/by-id/nvme-Amazon_Elastic_Block_Store_vol0123456789abcdef0":            "../../nvme1n1",
		"disk/by-id/nvme-Amazon_Elastic_Block_Store_vol0123456789abcdef0_1":          "../../nvme1n1",
		"disk/by-id/nvme-Amazon_Elastic_Block_Store_vol0123456789abcdef0-ns-1":       "../../nvme1n1",
		"disk/by-id/nvme-eui.vol0123456789abcdef0":                                   "../../nvme1n1",
		"disk/by-id/nvme-Amazon_Elastic_Block_Store_vol0123456789abcdef0-part1":      "../../nvme1n1p1",
		"disk/by-id/nvme-Amazon_Elastic_Block_Store_vol0123456789abcdef0_1-part1":    "../../nvme1n1p1",
		"disk/by-id/nvme-Amazon_Elastic_Block_Store_vol0123456789abcdef0-ns-1-part1": "../../nvme1n1p1",
		"disk/by-id/nvme-eui.vol0123456789abcdef0-part1":                             "../../nvme1n1p1",
		"fd":    "/proc/self/fd",
		"xvdba": "nvme1n1",
	}
	if got := readLinks(t, dev); !reflect.DeepEqual(got, want) {
		t.Errorf("links after coldplug:\n%v\nwant\n%v", got, want)
	}
	if got := names(ch.Removed); !reflect.DeepEqual(got, []string{"disk/by-id/.berth-devlink-leftover", "disk/by-id/nvme-Gone_1", "sdz"}) {
		t.Errorf("removed %v", got)
	}
	if got := names(ch.Conflicts); !reflect.DeepEqual(got, []string{"xvdba1"}) {
		t.Errorf("conflicts %v, want xvdba1 (a file is there)", got)
	}
	if fi, err := os.Lstat(filepath.Join(dev, "xvdba1")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the file in the way was touched: %v %v", fi, err)
	}

	ch, err = Reconcile(dev, LinkSet(devs))
	must(err)
	if len(ch.Made)+len(ch.Removed) != 0 {
		t.Errorf("second reconcile changed %+v", ch)
	}

	// A link re-pointed by someone else is put back.
	must(os.Remove(filepath.Join(dev, "xvdba")))
	must(os.Symlink("nvme0n1", filepath.Join(dev, "xvdba")))
	ch, err = Reconcile(dev, LinkSet(devs))
	must(err)
	if got := names(ch.Made); !reflect.DeepEqual(got, []string{"xvdba"}) {
		t.Errorf("made %v, want xvdba re-pointed", got)
	}

	sys.remove("nvme1n1p1", "nvme1n1")
	devs, err = Scan(sys.root, id.fn)
	must(err)
	ch, err = Reconcile(dev, LinkSet(devs))
	must(err)
	if len(ch.Removed) != 9 || len(ch.Made) != 0 {
		t.Errorf("after removing the EBS volume: made %v removed %v; want its 9 links removed", names(ch.Made), names(ch.Removed))
	}
	for name := range readLinks(t, dev) {
		if strings.Contains(name, "Amazon") || name == "xvdba" {
			t.Errorf("%s left after its device went", name)
		}
	}
}

// TestScanIdentifyFails: an EBS volume whose identify data cannot be read
// still gets its by-id links, and the error says which volume.
func TestScanIdentifyFails(t *testing.T) {
	sys := newFakeSys(t)
	sys.addNamespace("nvme1", "nvme1n1", EBSModel, "vol1")
	id := &fakeIdentify{}
	devs, err := Scan(sys.root, id.fn)
	if err == nil || !strings.Contains(err.Error(), "nvme1n1") {
		t.Errorf("err = %v, want one naming nvme1n1", err)
	}
	if len(devs) != 1 || devs[0].EC2Name != "" || len(Links(devs[0])) == 0 {
		t.Errorf("devices %+v", devs)
	}
}

// TestRunColdplug: Run makes the coldplug's links, reports them, and
// returns soon after its context ends.
func TestRunColdplug(t *testing.T) {
	sys := newFakeSys(t)
	sys.addNamespace("nvme1", "nvme1n1", EBSModel, "vol0123456789abcdef0")
	id := &fakeIdentify{data: map[string][]byte{"nvme1n1": ebsSdf}}
	dev := t.TempDir()
	var st Status
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := Run(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{SysFS: sys.root, DevDir: dev, Identify: id.fn}, &st)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Run took %v to notice its context", took)
	}
	if tgt, err := os.Readlink(filepath.Join(dev, "sdf")); err != nil || tgt != "nvme1n1" {
		t.Errorf("/dev/sdf → %q, %v", tgt, err)
	}
	b, err := json.Marshal(&st)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Coldplug  []Link
		Links     int
		Following bool
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Coldplug) != 5 || rep.Links != 5 || !rep.Following {
		t.Errorf("report %s", b)
	}
}
