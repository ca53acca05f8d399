package disk

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/pe"
	"encoding/binary"
	"encoding/hex"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/image/disk/esp"
	"github.com/berth-node/berth/image/disk/uki"
	"github.com/berth-node/berth/mounts/partition"
	mverity "github.com/berth-node/berth/mounts/verity"
)

func writeRand(t *testing.T, path string, n int, seed byte) []byte {
	t.Helper()
	r := rand.New(rand.NewChaCha8([32]byte{seed}))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

// testSign stands in for Authenticode (image/secureboot signs for real,
// and the firmware judges it under QEMU): a marker after the PE, so the
// test sees which files were signed and that signing came last.
func testSign(pe []byte) ([]byte, error) { return append(pe, "SIGNED-BY-TEST"...), nil }

// TestAssemble builds disk.raw from a stand-in root filesystem, kernel and
// initramfs (CI needs cryptsetup-bin, dosfstools, mtools, systemd-boot-efi)
// and checks what the boot depends on: the table reads back with both
// root slots; slot a holds the filesystem and a hash tree veritysetup
// accepts for the root hash, slot b is as large and empty; the ESP holds
// systemd-boot at the removable-media path, its loader.conf, the keys to
// enroll, and the UKI under EFI/Linux named for the version, whose command
// line names slot a and carries the root hash, each EFI binary signed;
// and a second build (later, so clocks would show) is byte-identical.
func TestAssemble(t *testing.T) {
	dir := t.TempDir()
	rootfs := writeRand(t, filepath.Join(dir, "root.erofs"), 300*4096, 1)
	writeRand(t, filepath.Join(dir, "vmlinuz"), 200000, 2)
	writeRand(t, filepath.Join(dir, "initrd"), 100000, 3)
	var keys []esp.File
	for _, k := range []string{"PK.auth", "KEK.auth", "db.auth"} {
		writeRand(t, filepath.Join(dir, k), 1500, 4)
		keys = append(keys, esp.File{Path: k, Src: filepath.Join(dir, k)})
	}
	in := Inputs{RootFS: filepath.Join(dir, "root.erofs"), Kernel: filepath.Join(dir, "vmlinuz"), Initrd: filepath.Join(dir, "initrd"),
		Cmdline: "console=ttyS0", Version: "v1.2-3-gabcdef", Sign: testSign, EnrollKeys: keys, UKIOut: filepath.Join(dir, "berth.efi")}
	log := slog.New(slog.DiscardHandler)
	out := filepath.Join(dir, "disk.raw")
	r, err := Assemble(context.Background(), log, out, in)
	if err != nil {
		t.Fatal(err)
	}
	img, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	l, err := partition.ReadDisk(bytes.NewReader(img), int64(len(img)))
	if sum := sha256.Sum256(img); hex.EncodeToString(sum[:]) != r.SHA256 {
		t.Fatalf("Result.SHA256 %s is not the file's", r.SHA256)
	}
	if err != nil || len(img) != int(r.Layout.Size()) {
		t.Fatalf("reading back the table: %v (%d bytes)", err, len(img))
	}
	var names []string
	for _, p := range l.Parts {
		names = append(names, p.Name)
	}
	if strings.Join(names, " ") != "ESP berth-root-a berth-root-b berth-data" {
		t.Fatalf("partitions %v", names)
	}
	rootP, _, _ := l.Find(partition.SlotA.PartName())
	slotB, _, _ := l.Find(partition.SlotB.PartName())
	espP, _, _ := l.Find(partition.NameESP)
	rootPart := img[rootP.Offset() : rootP.Offset()+rootP.Size()]
	if !bytes.Equal(rootPart[:len(rootfs)], rootfs) {
		t.Fatal("slot a does not start with the root filesystem")
	}
	if slotB.Size() != rootP.Size() || rootP.Size() < SlotSize(int64(len(rootfs))) {
		t.Fatalf("slots of %d and %d bytes, want both SlotSize(%d) = %d", rootP.Size(), slotB.Size(), len(rootfs), SlotSize(int64(len(rootfs))))
	}
	if b := img[slotB.Offset() : slotB.Offset()+slotB.Size()]; !bytes.Equal(b, make([]byte, len(b))) {
		t.Fatal("slot b of a new disk is not empty")
	}
	if r.Slot != partition.SlotA || r.UKI != "EFI/Linux/berth-v1.2-3-gabcdef.efi" || !r.Signed || !r.Enroll {
		t.Fatalf("result %+v", r)
	}
	rp := filepath.Join(dir, "rootpart")
	if err := os.WriteFile(rp, rootPart, 0o644); err != nil {
		t.Fatal(err)
	}
	off := strconv.Itoa(len(rootfs))
	if b, err := exec.Command("veritysetup", "verify", "--no-superblock", "--salt="+r.Verity.Salt, "--data-blocks=300",
		"--hash-offset="+off, rp, rp, r.RootHash).CombinedOutput(); err != nil {
		t.Fatalf("veritysetup verify: %v\n%s", err, b)
	}
	if r.Verity.HashStartBlock != 300 || r.Verity.DataBlocks != 300 {
		t.Fatalf("verity param %+v", r.Verity)
	}
	ep := filepath.Join(dir, "esp")
	if err := os.WriteFile(ep, img[espP.Offset():espP.Offset()+espP.Size()], 0o644); err != nil {
		t.Fatal(err)
	}
	read := func(path string) []byte {
		t.Helper()
		b, err := exec.Command("mtype", "-i", ep, "::/"+path).Output()
		if err != nil {
			t.Fatalf("reading %s from the ESP: %v", path, err)
		}
		return b
	}
	ukiBytes := read(r.UKI)
	// No berth.slot=: the one UKI of a release boots from either slot,
	// found by the root hash.
	want := "console=ttyS0 " + mverity.ParamKey + "=" + r.Verity.String()
	if r.Cmdline != want || !bytes.Contains(ukiBytes, []byte(want)) || bytes.Contains(ukiBytes, []byte("berth.slot=")) {
		t.Fatalf("UKI command line %q not found, or the UKI names a slot (want %q)", r.Cmdline, want)
	}
	if !bytes.Contains(ukiBytes, []byte("VERSION_ID=v1.2-3-gabcdef\n")) {
		t.Error("the UKI's .osrel lacks the version systemd-boot orders entries by")
	}
	sdboot, err := os.ReadFile("/usr/lib/systemd/boot/efi/systemd-bootx64.efi")
	if err != nil {
		t.Fatal(err)
	}
	if got := read(esp.BootPath); !bytes.Equal(got, append(sdboot, "SIGNED-BY-TEST"...)) {
		t.Errorf("%s is not systemd-boot, signed (%d bytes)", esp.BootPath, len(got))
	}
	if !bytes.HasSuffix(ukiBytes, []byte("SIGNED-BY-TEST")) {
		t.Error("the UKI is not signed, or was changed after signing")
	}
	// The UKI beside the disk, for an update repository, is the ESP's.
	if out, err := os.ReadFile(in.UKIOut); err != nil || !bytes.Equal(out, ukiBytes) {
		t.Errorf("UKIOut %s is not the ESP's UKI (%v)", in.UKIOut, err)
	}
	if sum := sha256.Sum256(ukiBytes); r.UKISHA256 != hex.EncodeToString(sum[:]) || r.UKISize != int64(len(ukiBytes)) {
		t.Errorf("Result's UKI %d bytes sha256 %s, the ESP's %d bytes", r.UKISize, r.UKISHA256, len(ukiBytes))
	}
	if got := string(read("loader/loader.conf")); got != LoaderConf(true) || !strings.Contains(got, "secure-boot-enroll force\n") || !strings.Contains(got, "editor no\n") {
		t.Errorf("loader.conf %q", got)
	}
	for _, k := range keys {
		want, _ := os.ReadFile(k.Src)
		if got := read("loader/keys/auto/" + k.Path); !bytes.Equal(got, want) {
			t.Errorf("loader/keys/auto/%s differs from %s", k.Path, k.Src)
		}
	}
	p, err := mverity.ParseParam(strings.TrimPrefix(want, "console=ttyS0 "+mverity.ParamKey+"="))
	if err != nil || p.RootHash != r.RootHash {
		t.Fatalf("command line does not parse back: %+v %v", p, err)
	}

	time.Sleep(2100 * time.Millisecond)
	r2, err := Assemble(context.Background(), log, filepath.Join(dir, "disk2.raw"), in)
	if err != nil {
		t.Fatal(err)
	}
	img2, _ := os.ReadFile(filepath.Join(dir, "disk2.raw"))
	if r2.SHA256 != r.SHA256 || !bytes.Equal(img, img2) {
		t.Fatalf("two builds differ: %s vs %s", r.SHA256, r2.SHA256)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".disk-*"))
	if len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

// peMachine returns the PE file's COFF machine.
func peMachine(t *testing.T, b []byte) uint16 {
	t.Helper()
	f, err := pe.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("reading PE: %v", err)
	}
	return f.FileHeader.Machine
}

// asArm64Stub copies the host's x86-64 EFI binary src (the stub, or
// systemd-boot) with its PE machine set to arm64's: Assemble reads only the
// header and section table, so the test needs no systemd-boot-efi:arm64
// (which only make deps ARCH=arm64 installs).
func asArm64Stub(t *testing.T, src string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	off := int(binary.LittleEndian.Uint32(b[0x3c:]))
	binary.LittleEndian.PutUint16(b[off+4:], pe.IMAGE_FILE_MACHINE_ARM64)
	p := filepath.Join(t.TempDir(), filepath.Base(src)+".aa64")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// An arm64 disk's stub must be for arm64, whatever builds it; the
// architecture must be known.
func TestAssembleArm64Refuses(t *testing.T) {
	dir := t.TempDir()
	in := arm64Inputs(t, dir)
	log := slog.New(slog.DiscardHandler)
	in.Stub = uki.DefaultStub
	if _, err := Assemble(context.Background(), log, filepath.Join(dir, "x.raw"), in); err == nil || !strings.Contains(err.Error(), uki.DefaultStub) {
		t.Errorf("arm64 disk on the x86-64 stub: %v, want an error naming the stub", err)
	}
	in.Arch, in.Stub = "riscv64", ""
	if _, err := Assemble(context.Background(), log, filepath.Join(dir, "y.raw"), in); err == nil || !strings.Contains(err.Error(), "riscv64") {
		t.Errorf("riscv64 disk: %v, want an error naming the arch", err)
	}
}

func arm64Inputs(t *testing.T, dir string) Inputs {
	t.Helper()
	writeRand(t, filepath.Join(dir, "root.erofs"), 300*4096, 1)
	writeRand(t, filepath.Join(dir, "vmlinuz"), 200000, 2)
	writeRand(t, filepath.Join(dir, "initrd"), 100000, 3)
	return Inputs{RootFS: filepath.Join(dir, "root.erofs"), Kernel: filepath.Join(dir, "vmlinuz"), Initrd: filepath.Join(dir, "initrd"),
		Cmdline: "console=ttyAMA0", Arch: "arm64", Stub: asArm64Stub(t, uki.DefaultStub), BootLoader: asArm64Stub(t, "/usr/lib/systemd/boot/efi/systemd-bootx64.efi")}
}

// An arm64 disk's loader is EFI/BOOT/BOOTAA64.EFI, built on an arm64 stub
// by the cross objcopy.
func TestAssembleArm64(t *testing.T) {
	if _, err := exec.LookPath(uki.ObjcopyFor("arm64")); err != nil {
		// make deps installs it on every host (binutils-aarch64-linux-gnu):
		// the arm64 UKI build is checked on amd64 CI too.
		t.Fatalf("no %s: run make deps (binutils-aarch64-linux-gnu)", uki.ObjcopyFor("arm64"))
	}
	dir := t.TempDir()
	in := arm64Inputs(t, dir)
	out := filepath.Join(dir, "disk.raw")
	r, err := Assemble(context.Background(), slog.New(slog.DiscardHandler), out, in)
	if err != nil {
		t.Fatal(err)
	}
	img, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	espP, _, _ := r.Layout.Find(partition.NameESP)
	ep := filepath.Join(dir, "esp")
	if err := os.WriteFile(ep, img[espP.Offset():espP.Offset()+espP.Size()], 0o644); err != nil {
		t.Fatal(err)
	}
	loader, err := exec.Command("mtype", "-i", ep, "::/EFI/BOOT/BOOTAA64.EFI").Output()
	if err != nil {
		t.Fatalf("reading EFI/BOOT/BOOTAA64.EFI from the ESP: %v", err)
	}
	if m := peMachine(t, loader); m != pe.IMAGE_FILE_MACHINE_ARM64 {
		t.Errorf("BOOTAA64.EFI is for PE machine %#x", m)
	}
	if want, _ := os.ReadFile(in.BootLoader); !bytes.Equal(loader, want) {
		t.Error("BOOTAA64.EFI is not the arm64 systemd-boot")
	}
	ukiBytes, err := exec.Command("mtype", "-i", ep, "::/"+r.UKI).Output()
	if err != nil {
		t.Fatalf("reading %s from the ESP: %v", r.UKI, err)
	}
	if m := peMachine(t, ukiBytes); m != pe.IMAGE_FILE_MACHINE_ARM64 {
		t.Errorf("the UKI is for PE machine %#x", m)
	}
	if !bytes.Contains(ukiBytes, []byte("console=ttyAMA0 "+mverity.ParamKey+"=")) {
		t.Error("the arm64 UKI lacks the command line")
	}
	if err := exec.Command("mtype", "-i", ep, "::/"+esp.BootPath).Run(); err == nil {
		t.Errorf("an arm64 ESP has %s", esp.BootPath)
	}
}

// RootFSSize takes the filesystem from the front of a longer file (an
// image's root.erofs with its own hash tree appended): the disk is the
// one the bare filesystem gives. A size beyond the file is refused.
func TestAssembleRootFSSize(t *testing.T) {
	dir := t.TempDir()
	in := arm64Inputs(t, dir)
	in.Arch, in.Stub, in.Cmdline = "", "", "console=ttyS0"
	log := slog.New(slog.DiscardHandler)
	bare, err := Assemble(context.Background(), log, filepath.Join(dir, "bare.raw"), in)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := os.ReadFile(in.RootFS)
	if err != nil {
		t.Fatal(err)
	}
	long := filepath.Join(dir, "root-long.erofs")
	if err := os.WriteFile(long, append(fs, bytes.Repeat([]byte{0xa5}, 5*4096)...), 0o644); err != nil {
		t.Fatal(err)
	}
	in.RootFS, in.RootFSSize = long, int64(len(fs))
	got, err := Assemble(context.Background(), log, filepath.Join(dir, "long.raw"), in)
	if err != nil {
		t.Fatal(err)
	}
	if got.SHA256 != bare.SHA256 || got.RootHash != bare.RootHash {
		t.Errorf("disk from the first %d bytes: sha256 %s root hash %s; from the bare filesystem: %s %s",
			len(fs), got.SHA256, got.RootHash, bare.SHA256, bare.RootHash)
	}
	in.RootFSSize = int64(len(fs)) + 6*4096
	if _, err := Assemble(context.Background(), log, filepath.Join(dir, "over.raw"), in); err == nil || !strings.Contains(err.Error(), "RootFSSize") {
		t.Errorf("RootFSSize past the file's end: %v", err)
	}
}
