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

// TestAssemble builds disk.raw from a stand-in root filesystem, kernel and
// initramfs (CI needs cryptsetup-bin, dosfstools, mtools, systemd-boot-efi)
// and checks what the boot depends on: the table reads back; the root
// partition holds the filesystem and a hash tree veritysetup accepts for
// the root hash; the UKI in the ESP carries that root hash in berth.verity=;
// and a second build (later, so clocks would show) is byte-identical.
func TestAssemble(t *testing.T) {
	dir := t.TempDir()
	rootfs := writeRand(t, filepath.Join(dir, "root.erofs"), 300*4096, 1)
	writeRand(t, filepath.Join(dir, "vmlinuz"), 200000, 2)
	writeRand(t, filepath.Join(dir, "initrd"), 100000, 3)
	in := Inputs{RootFS: filepath.Join(dir, "root.erofs"), Kernel: filepath.Join(dir, "vmlinuz"), Initrd: filepath.Join(dir, "initrd"),
		OSRelease: []byte("ID=berth\n"), Cmdline: "console=ttyS0"}
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
	rootP, _, _ := l.Find(partition.NameRoot)
	espP, _, _ := l.Find(partition.NameESP)
	rootPart := img[rootP.Offset() : rootP.Offset()+rootP.Size()]
	if !bytes.Equal(rootPart[:len(rootfs)], rootfs) {
		t.Fatal("root partition does not start with the root filesystem")
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
	ukiBytes, err := exec.Command("mtype", "-i", ep, "::/"+esp.BootPath).Output()
	if err != nil {
		t.Fatalf("reading the UKI from the ESP: %v", err)
	}
	want := "console=ttyS0 " + mverity.ParamKey + "=" + r.Verity.String()
	if r.Cmdline != want || !bytes.Contains(ukiBytes, []byte(want)) {
		t.Fatalf("UKI command line %q not found (want %q)", r.Cmdline, want)
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

// asArm64Stub copies the host's x86-64 stub with its PE machine set to
// arm64's: Assemble reads only the header and section table, so the test
// needs no systemd-boot-efi:arm64 (which only make deps ARCH=arm64 installs).
func asArm64Stub(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(uki.DefaultStub)
	if err != nil {
		t.Fatal(err)
	}
	off := int(binary.LittleEndian.Uint32(b[0x3c:]))
	binary.LittleEndian.PutUint16(b[off+4:], pe.IMAGE_FILE_MACHINE_ARM64)
	p := filepath.Join(t.TempDir(), "linuxaa64.efi.stub")
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
		OSRelease: []byte("ID=berth\n"), Cmdline: "console=ttyAMA0", Arch: "arm64", Stub: asArm64Stub(t)}
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
	if !bytes.Contains(loader, []byte("console=ttyAMA0 "+mverity.ParamKey+"=")) {
		t.Error("BOOTAA64.EFI lacks the command line")
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
