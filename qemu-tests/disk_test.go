package qemutests

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/image/disk"
	"github.com/berth-node/berth/image/secureboot"
	"github.com/berth-node/berth/mounts/partition"
	"github.com/berth-node/berth/qemu-tests/qemu"
	"github.com/u-root/u-root/pkg/cpio"
)

// diskCmdline is the test disk's UKI command line: the test image's
// conveniences (no IMDS, a shell on ttyS1, halt rather than reboot on a
// fatal error so the console can be read).
const diskCmdline = "console=ttyS0 quiet berth.imds=off berth.onfail=halt berth.debugshell=ttyS1"

// testDisk assembles a disk.raw from the test image the way `make disk`
// does from the default one: the image's root filesystem on the
// verity-protected root partition and, in the UKI, its initramfs without
// /root.erofs (an image built with -root-in-initramfs has one). The UKI's
// berth.verity= takes precedence over the root disk the manifest names.
func testDisk(t *testing.T, dir string) (string, disk.Result) {
	t.Helper()
	return testDiskWith(t, dir, diskCmdline)
}

// testDiskWith is testDisk with another UKI command line (a joined node's
// needs berth.imds=). Like every test disk it is signed with the test
// keys and carries them for enrollment, and uefiConfig boots it with
// Secure Boot on.
func testDiskWith(t *testing.T, dir, cmdline string) (string, disk.Result) {
	t.Helper()
	return testDiskKeys(t, dir, cmdline, testKeys(t))
}

// testDiskKeys is testDiskWith signed with k, or unsigned and carrying no
// keys when k is nil.
func testDiskKeys(t *testing.T, dir, cmdline string, k *secureboot.Keys) (string, disk.Result) {
	t.Helper()
	work := t.TempDir()
	f, err := os.Open(filepath.Join(dir, "initramfs.img"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := cpio.ReadAllRecords(cpio.Newc.Reader(f))
	if err != nil {
		t.Fatalf("reading the test image's initramfs: %v", err)
	}
	var kept []cpio.Record
	for _, r := range recs {
		if r.Name != "root.erofs" {
			kept = append(kept, r)
		}
	}
	initrd := filepath.Join(work, "initramfs-disk.img")
	out, err := os.Create(initrd)
	if err != nil {
		t.Fatal(err)
	}
	w := cpio.Newc.Writer(out)
	if err := cpio.WriteRecords(w, kept); err != nil {
		t.Fatal(err)
	}
	if err := cpio.WriteTrailer(w); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(work, "disk.raw")
	arch := qemu.ImageManifest(t, dir).Arch
	// As make disk does: the image's own kernel arguments too.
	cmdline = qemu.WithImageArgs(cmdline, qemu.ImageManifest(t, dir))
	if cmdline, err = qemu.ArchCmdline(cmdline, arch); err != nil {
		t.Fatal(err)
	}
	in := disk.Inputs{
		RootFS: filepath.Join(dir, "root.erofs"), RootFSSize: qemu.ImageManifest(t, dir).Root.Size, Kernel: filepath.Join(dir, "vmlinuz"), Initrd: initrd,
		// The UKI is named for the image's version, as make disk names it:
		// the boot report checks the two agree.
		Version: qemu.ImageManifest(t, dir).BerthVersion, Cmdline: cmdline, Arch: arch,
	}
	if k != nil {
		in.Sign, in.EnrollKeys = signer(k), enrollFiles(k)
	}
	start := time.Now()
	res, err := disk.Assemble(context.Background(), slog.New(slog.DiscardHandler), img, in)
	if err != nil {
		t.Fatal(err)
	}
	figure(t, "disk.raw assembled in %.1f s (signed %v): %d bytes (%.1f MiB), each root slot %d bytes, ESP %d bytes", time.Since(start).Seconds(), res.Signed,
		res.Layout.Size(), float64(res.Layout.Size())/(1<<20), partSize(t, res.Layout, partition.SlotA.PartName()), partSize(t, res.Layout, partition.NameESP))
	return img, res
}

func partSize(t *testing.T, l partition.DiskLayout, name string) int64 {
	t.Helper()
	p, _, ok := l.Find(name)
	if !ok {
		t.Fatalf("layout has no %s partition", name)
	}
	return int64(p.LastLBA-p.FirstLBA+1) * partition.SectorSize
}

// copyDisk copies src to a new file extended to size bytes (EC2 volumes
// are larger than the snapshot they come from).
func copyDisk(t *testing.T, src string, size int64) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "disk.raw")
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}

// dataReport is the report's root.data object, which must have no error.
func dataReport(t *testing.T, root map[string]any) map[string]any {
	t.Helper()
	v, _ := field(root, "data")
	data, _ := v.(map[string]any)
	if data == nil {
		t.Fatalf("report's root has no data partition section: %v", root)
	}
	if e, ok := data["error"]; ok {
		t.Fatalf("data partition failed: %v", e)
	}
	return data
}

// uefiConfig boots disk image img (a test disk, signed with the test
// keys) through firmware that enforces Secure Boot, with the test keys
// enrolled (enrolledVars).
func uefiConfig(t *testing.T, img string) qemu.Config {
	t.Helper()
	arch := qemu.ImageManifest(t, qemu.ImageDir(t)).Arch
	return qemu.Config{UEFI: true, SecureBoot: true, Vars: enrolledVars(t, arch, img), Shell: true, Timeout: vmTimeout, NICs: []qemu.NIC{{}},
		Disks: []qemu.Disk{{Path: img, Interface: "nvme", Serial: "berth-root-disk"}}}
}

// TestDiskBoot boots the disk image through OVMF from NVMe, as EC2 boots an
// AMI: berth finds the root slot whose hash tree has the UKI's root hash
// (slot a), verifies it through dm-verity and switches to it; the report
// says so and / is erofs on the dm device. The second boot finds the root
// in slot b, as after an update, with the same UKI. A disk where no slot
// holds the root, and one flipped byte inside the root filesystem, must
// each stop the boot with an error instead of booting an unverified node.
func TestDiskBoot(t *testing.T) {
	dir := qemu.ImageDir(t)
	img, res := testDisk(t, dir)
	if !strings.Contains(res.Cmdline, "berth.verity=sha256:"+res.RootHash+":") {
		t.Fatalf("UKI command line %q lacks the root hash %s", res.Cmdline, res.RootHash)
	}

	// One larger copy (as an EBS volume bigger than its snapshot) serves the
	// first and the second boot.
	big := copyDisk(t, img, res.Layout.Size()+256<<20)
	bigSt, err := os.Stat(big)
	if err != nil {
		t.Fatal(err)
	}
	grownL, err := partition.Grow(res.Layout, bigSt.Size())
	if err != nil {
		t.Fatal(err)
	}
	dataP, _, _ := grownL.Find(partition.NameData)
	wantData := partSize(t, grownL, partition.NameData)
	if wantData < 256<<20 {
		t.Fatalf("planned data partition %d bytes (%+v): not grown into the extra 256 MiB", wantData, dataP)
	}

	t.Run("verified root", func(t *testing.T) {
		vm := qemu.Start(t, uefiConfig(t, big))
		rep, err := vm.Report(bootTimeout)
		if err != nil {
			t.Fatal(err)
		}
		if !reportOK(rep) {
			t.Fatalf("boot report is not OK: %v", rep)
		}
		rootV, _ := field(rep, "root")
		root, _ := rootV.(map[string]any)
		verV, _ := field(root, "verity")
		ver, _ := verV.(map[string]any)
		if ver == nil {
			t.Fatalf("report's root has no verity section: %v", rootV)
		}
		if v, _ := field(ver, "verified"); v != true {
			t.Errorf("report's verity root not verified: %v", ver)
		}
		if h, _ := field(ver, "rootHash"); h != res.RootHash {
			t.Errorf("report's root hash %v, the disk's %s", h, res.RootHash)
		}
		// Slot a, the second partition: a new disk's root is there, and
		// the UKI, which names no slot, finds it by its root hash (slot b,
		// empty, does not match).
		part, _ := field(ver, "partition")
		if p, _ := part.(string); !regexp.MustCompile(`^/dev/nvme\d+n\d+p2$`).MatchString(p) {
			t.Errorf("verity partition %v, want partition 2 (berth-root-a) of the NVMe disk", part)
		}
		if s, _ := field(ver, "slot"); s != "a" {
			t.Errorf("report's root slot %v, want a", s)
		}
		if by, _ := field(ver, "slotBy"); by != "hash" {
			t.Errorf("report's root slot found by %v, want hash", by)
		}
		// Secure Boot was on: the firmware verified systemd-boot and
		// systemd-boot had it verify the UKI, named for the version.
		fwV, _ := field(rep, "firmware")
		fw, _ := fwV.(map[string]any)
		if fw["secureBoot"] != true || fw["setupMode"] != false || fw["entry"] != filepath.Base(res.UKI) ||
			!strings.HasPrefix(fmt.Sprint(fw["loader"]), "systemd-boot ") {
			t.Errorf("report's firmware %v: want Secure Boot on, not in setup mode, systemd-boot having started %s", fwV, filepath.Base(res.UKI))
		}
		// A fresh disk's UKI has no boot counter: the update section names
		// it, slot a, and no trial.
		upV, _ := field(rep, "update")
		up, _ := upV.(map[string]any)
		if up["boot"] != "systemd-boot" || up["slot"] != "a" || up["slotBy"] != "hash" || up["entry"] != filepath.Base(res.UKI) ||
			up["state"] != "good" || up["trial"] != false || up["error"] != nil {
			t.Errorf("report's update section %v: want systemd-boot's %s from slot a, good, not on trial", upV, filepath.Base(res.UKI))
		}
		out, err := vm.Shell("cat /proc/mounts", shellTimeout)
		if err != nil {
			t.Fatal(err)
		}
		m, ok := lastMount(parseMounts(out), "/")
		if !ok || m.fstype != "erofs" || !strings.HasPrefix(m.source, "/dev/dm-") || !strings.Contains(","+m.opts+",", ",ro,") {
			t.Errorf("root is %+v, want a read-only erofs on /dev/dm-N; /proc/mounts:\n%s", m, out)
		}
		// The UKI's command line reached the kernel, the image's own
		// kernel arguments with it.
		cl, err := vm.Shell("cat /proc/cmdline", shellTimeout)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range append(qemu.ImageManifest(t, dir).KernelArgs, "berth.verity=sha256:"+res.RootHash) {
			if !strings.Contains(cl, a) {
				t.Errorf("/proc/cmdline %q lacks %s", strings.TrimSpace(cl), a)
			}
		}
		if strings.Contains(cl, "berth.slot=") {
			t.Errorf("/proc/cmdline %q names a slot; a release's one UKI must boot from either", strings.TrimSpace(cl))
		}
		if first, ms, ok := firstBerthLine(vm); ok {
			figure(t, "UEFI boot: QEMU start to berth's first line %.1f s wall (guest boot clock %d ms)", first.At.Seconds(), ms)
		}
		if s, _ := field(ver, "setupMs"); s != nil {
			v, _ := field(ver, "verifyMs")
			b, _ := field(ver, "dataBytes")
			figure(t, "verity: setup %v ms, full read-through %v ms for %v bytes", s, v, b)
		}

		data := dataReport(t, root)
		if data["grown"] != true || data["formatted"] != true {
			t.Errorf("first boot: data partition %v, want grown and formatted", data)
		}
		if sz, _ := data["sizeBytes"].(float64); int64(sz) != wantData {
			t.Errorf("data partition is %v bytes, want %d (grown to the %d-byte disk's end)", data["sizeBytes"], wantData, bigSt.Size())
		}
		for _, d := range []string{"/var/lib/kubelet", "/var/log"} {
			if m, ok := lastMount(parseMounts(out), d); !ok || m.fstype != "ext4" || !strings.HasPrefix(m.source, "/dev/nvme") {
				t.Errorf("%s is %+v, want the ext4 data partition; /proc/mounts:\n%s", d, m, out)
			}
		}
		if dm, ok := data["durationMs"]; ok {
			figure(t, "data partition first boot (grow + mkfs.ext4 + mount): %v ms", dm)
		}
		if _, err := vm.Shell("echo kept > /var/log/berth-disk-test && sync", shellTimeout); err != nil {
			t.Fatal(err)
		}
	})

	// The second boot is also the first from slot b: the root moves there,
	// as an update into b leaves it, and slot a holds another root. The
	// same UKI (it names no slot) must find b by its root hash.
	moveRootToSlotB(t, big, res)

	t.Run("second boot", func(t *testing.T) {
		vm := qemu.Start(t, uefiConfig(t, big))
		rep, err := vm.Report(bootTimeout)
		if err != nil {
			t.Fatal(err)
		}
		if !reportOK(rep) {
			t.Fatalf("boot report is not OK: %v", rep)
		}
		rootV, _ := field(rep, "root")
		root, _ := rootV.(map[string]any)
		verV, _ := field(root, "verity")
		ver, _ := verV.(map[string]any)
		part, _ := field(ver, "partition")
		if s, _ := field(ver, "slot"); s != "b" || !regexp.MustCompile(`^/dev/nvme\d+n\d+p3$`).MatchString(fmt.Sprint(part)) {
			t.Errorf("report's root slot %v on %v, want b, partition 3 (berth-root-b)", s, part)
		}
		if by, _ := field(ver, "slotBy"); by != "hash" {
			t.Errorf("report's root slot found by %v, want hash", by)
		}
		if v, _ := field(ver, "verified"); v != true {
			t.Errorf("report's verity root not verified: %v", ver)
		}
		upV, _ := field(rep, "update")
		if up, _ := upV.(map[string]any); up["slot"] != "b" || up["slotBy"] != "hash" {
			t.Errorf("report's update section %v: want slot b, found by hash", upV)
		}
		data := dataReport(t, root)
		if data["grown"] != false || data["formatted"] != false {
			t.Errorf("second boot: data partition %v, want neither grown nor formatted", data)
		}
		if sz, _ := data["sizeBytes"].(float64); int64(sz) != wantData {
			t.Errorf("second boot: data partition is %v bytes, want %d", data["sizeBytes"], wantData)
		}
		got, err := vm.Shell("cat /var/log/berth-disk-test", shellTimeout)
		if err != nil || strings.TrimSpace(got) != "kept" {
			t.Errorf("file written on the first boot: %q (%v), want %q", got, err, "kept")
		}
	})

	t.Run("no slot holds the root", func(t *testing.T) {
		// Neither slot's tree has the UKI's root hash at its top: slot a's
		// top block zeroed, slot b empty.
		bad := copyDisk(t, img, res.Layout.Size())
		zeroTreeTop(t, bad, res, partition.SlotA)
		vm := qemu.Start(t, uefiConfig(t, bad))
		l, err := vm.ExpectLine(regexp.MustCompile(`FATAL.*no root slot holds the root this UKI seals \(root hash `+res.RootHash+`\)`), bootTimeout)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"berth-root-a (/dev/nvme", "berth-root-b (/dev/nvme", "its tree's top hashes to "} {
			if !strings.Contains(l.Text, want) {
				t.Errorf("the error does not say %q: %s", want, l.Text)
			}
		}
		for _, l := range vm.Lines() {
			if strings.Contains(l.Text, "switched root") || strings.Contains(l.Text, "dm-verity device ready") {
				t.Errorf("berth went on without a slot holding its root: %s", l.Text)
			}
		}
	})

	t.Run("corrupted root", func(t *testing.T) {
		bad := copyDisk(t, img, res.Layout.Size())
		rp, _, _ := res.Layout.Find(partition.SlotA.PartName())
		f, err := os.OpenFile(bad, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		// A byte in the middle of the filesystem, well past the superblock:
		// only the hash tree can tell.
		off := rp.Offset() + int64(res.Verity.DataBlocks)*4096/2 + 123
		b := make([]byte, 1)
		if _, err := f.ReadAt(b, off); err != nil {
			t.Fatal(err)
		}
		b[0] ^= 0xff
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		clean, _ := os.ReadFile(img)
		tampered, _ := os.ReadFile(bad)
		if bytes.Equal(clean, tampered) {
			t.Fatal("the byte flip did not change the disk")
		}
		vm := qemu.Start(t, uefiConfig(t, bad))
		if _, err := vm.Expect(regexp.MustCompile(`FATAL.*dm-verity: /dev/dm-\d+ is corrupted at byte`), bootTimeout); err != nil {
			t.Fatal(err)
		}
		if rep, err := vm.Report(5 * time.Second); err == nil && reportOK(rep) {
			t.Errorf("report says OK on a tampered root: %v", rep)
		}
		for _, l := range vm.Lines() {
			if strings.Contains(l.Text, "switched root") {
				t.Errorf("berth switched to the tampered root: %s", l.Text)
			}
		}
	})
}

// moveRootToSlotB copies slot a's partition whole into slot b of disk
// image img, then zeroes slot a's tree top: the disk as an update into b
// leaves it, slot a holding a root other than the UKI's.
func moveRootToSlotB(t *testing.T, img string, res disk.Result) {
	t.Helper()
	a, _, okA := res.Layout.Find(partition.SlotA.PartName())
	b, _, okB := res.Layout.Find(partition.SlotB.PartName())
	if !okA || !okB || a.Size() != b.Size() {
		t.Fatalf("disk layout %s: want two root slots of one size", res.Layout)
	}
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(io.NewOffsetWriter(f, b.Offset()), io.NewSectionReader(f, a.Offset(), a.Size())); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	zeroTreeTop(t, img, res, partition.SlotA)
}

// zeroTreeTop zeroes the block of slot's partition where the UKI's root
// hash tree has its top (the first block at the hash start): berth then
// finds no root in that slot.
func zeroTreeTop(t *testing.T, img string, res disk.Result, slot partition.Slot) {
	t.Helper()
	p, _, ok := res.Layout.Find(slot.PartName())
	if !ok {
		t.Fatalf("disk layout %s has no %s", res.Layout, slot.PartName())
	}
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, 4096), p.Offset()+res.Verity.TopOffset()); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// otherDataDisk makes a raw disk of size bytes whose GPT has one blank
// partition named berth-data, smaller than the disk: what an attached EBS
// volume, or a snapshot of another node's data, can look like. Were berth
// to take it, it would grow the partition and format it.
func otherDataDisk(t *testing.T, size int64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "other.raw")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	g := partition.UUIDv5(partition.Namespace, "qemu-tests other data disk")
	fs, _ := partition.ParseUUID(partition.TypeLinuxFS)
	l := partition.DiskLayout{DiskGUID: g, Sectors: uint64(size / partition.SectorSize), Parts: []partition.DiskPart{
		{Name: partition.NameData, Type: fs, GUID: partition.UUIDv5(g, "data"), FirstLBA: partition.AlignSectors, LastLBA: 17*partition.AlignSectors - 1},
	}}
	if err := partition.WriteDisk(f, l); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// nvmePart splits an NVMe partition into its disk and number: /dev/nvme0n1p3 -> /dev/nvme0n1.
var nvmePart = regexp.MustCompile(`^(/dev/nvme\d+n\d+)p(\d+)$`)

// bootWithOtherData boots root (a disk image copy) with other as a second
// NVMe disk and returns the VM, its report's root section, and the root
// partition's disk.
func bootWithOtherData(t *testing.T, root, other string) (*qemu.VM, map[string]any, string) {
	t.Helper()
	cfg := uefiConfig(t, root)
	cfg.Disks = append(cfg.Disks, qemu.Disk{Path: other, Interface: "nvme", Serial: "berth-other-data"})
	vm := qemu.Start(t, cfg)
	rep, err := vm.Report(bootTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if !reportOK(rep) {
		t.Fatalf("boot report is not OK: %v", rep)
	}
	rootV, _ := field(rep, "root")
	rootRep, _ := rootV.(map[string]any)
	verV, _ := field(rootRep, "verity")
	ver, _ := verV.(map[string]any)
	vp, _ := ver["partition"].(string)
	m := nvmePart.FindStringSubmatch(vp)
	if m == nil {
		t.Fatalf("verity root partition %q, want an NVMe partition; report root: %v", vp, rootRep)
	}
	return vm, rootRep, m[1]
}

// checkIgnored checks that the report's data section lists exactly the
// other disk's berth-data (its partition 1) as ignored, and that the
// console said so.
func checkIgnored(t *testing.T, vm *qemu.VM, data map[string]any, rootDisk string) {
	t.Helper()
	ign, _ := data["ignored"].([]any)
	if len(ign) != 1 {
		t.Fatalf("data partition ignored %v; want exactly the other disk's partition", data["ignored"])
	}
	ignored, _ := ign[0].(string)
	im := regexp.MustCompile(`^(/dev/nvme\d+n\d+)p1 \(not on the root disk ` + regexp.QuoteMeta(rootDisk) + `\)$`).FindStringSubmatch(ignored)
	if im == nil || im[1] == rootDisk {
		t.Errorf("ignored %q; want the other disk's partition 1, not on the root disk %s", ignored, rootDisk)
	}
	t.Logf("root disk %s, data %q, ignored %q", rootDisk, data["partition"], ignored)
	// The message alone: the kernel's echo of berth's next line (an ERROR,
	// above quiet) can land inside this one on the serial console and part
	// it from its attributes. The report above pins the partition.
	if _, err := vm.Expect(regexp.MustCompile(`ignoring a berth-data partition that is not on the root disk`), time.Second); err != nil {
		t.Errorf("no console line about the ignored partition: %v", err)
	}
}

// powerOffUnchanged powers the node off and checks that the other disk's
// bytes are what they were before the boot.
func powerOffUnchanged(t *testing.T, vm *qemu.VM, other string, before [32]byte) {
	t.Helper()
	pressed := time.Now()
	if err := vm.PowerDown(); err != nil {
		t.Fatal(err)
	}
	if err := vm.WaitExit(powerOffBound); err != nil {
		t.Fatalf("no clean power-off: %v", err)
	}
	figure(t, "disk boot with a foreign berth-data disk: power-off %.1f s", time.Since(pressed).Seconds())
	if after := fileSum(t, other); after != before {
		t.Errorf("the other disk changed: sha256 %x before the boot, %x after", before, after)
	} else {
		t.Logf("other disk sha256 %x before and after", before)
	}
}

// TestDiskDataOnRootDisk boots the disk image with a second NVMe disk that
// has a berth-data partition of its own (an attached volume, another
// node's data): the node's data partition must be the one on the verified
// root's disk, and the other disk's is refused: named as ignored in the
// report and the console, and its bytes unchanged after the node powered
// off. When the root disk has no berth-data at all, the other disk's is
// still refused, and the node runs on tmpfs.
func TestDiskDataOnRootDisk(t *testing.T) {
	dir := qemu.ImageDir(t)
	img, res := testDisk(t, dir)

	t.Run("root disk has its own", func(t *testing.T) {
		root := copyDisk(t, img, res.Layout.Size()+64<<20)
		other := otherDataDisk(t, 64<<20)
		before := fileSum(t, other)
		vm, rootRep, rootDisk := bootWithOtherData(t, root, other)
		data := dataReport(t, rootRep)
		dpart, _ := data["partition"].(string)
		dm := nvmePart.FindStringSubmatch(dpart)
		if dm == nil || dm[1] != rootDisk || data["disk"] != rootDisk || dm[2] != "4" {
			t.Errorf("data partition %q on disk %v; want partition 4 of the root disk %s", dpart, data["disk"], rootDisk)
		}
		if data["formatted"] != true || data["grown"] != true {
			t.Errorf("data partition %v: want the root disk's grown and formatted (first boot)", data)
		}
		checkIgnored(t, vm, data, rootDisk)
		out, err := vm.Shell("cat /proc/mounts", shellTimeout)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{"/var/lib/kubelet", "/var/log"} {
			if m, ok := lastMount(parseMounts(out), d); !ok || m.fstype != "ext4" || m.source != dpart {
				t.Errorf("%s is %+v, want ext4 from %s; /proc/mounts:\n%s", d, m, dpart, out)
			}
		}
		powerOffUnchanged(t, vm, other, before)
	})

	// The hijack: a disk image whose own berth-data is gone, and another
	// disk offering one. Not fatal (the node runs on tmpfs), never taken.
	t.Run("root disk has none", func(t *testing.T) {
		root := copyDisk(t, img, res.Layout.Size())
		l := res.Layout
		l.Parts = nil
		for _, p := range res.Layout.Parts {
			if p.Name != partition.NameData {
				l.Parts = append(l.Parts, p)
			}
		}
		f, err := os.OpenFile(root, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := partition.WriteDisk(f, l); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		other := otherDataDisk(t, 64<<20)
		before := fileSum(t, other)
		vm, rootRep, rootDisk := bootWithOtherData(t, root, other)
		dv, _ := field(rootRep, "data")
		data, _ := dv.(map[string]any)
		if data == nil {
			t.Fatalf("report's root has no data partition section: %v", rootRep)
		}
		if e, _ := data["error"].(string); !strings.Contains(e, "no partition named berth-data on the root disk "+rootDisk) {
			t.Errorf("data partition error %q; want the root disk's missing berth-data", e)
		}
		if p, _ := data["partition"].(string); p != "" {
			t.Errorf("data partition %q chosen; want none", p)
		}
		checkIgnored(t, vm, data, rootDisk)
		out, err := vm.Shell("cat /proc/mounts", shellTimeout)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range parseMounts(out) {
			if m.fstype == "ext4" || m.target == "/mnt/berth-data" {
				t.Errorf("mounted %+v; want no data partition; /proc/mounts:\n%s", m, out)
			}
		}
		powerOffUnchanged(t, vm, other, before)
	})
}
