package uki

import (
	"bytes"
	"context"
	"debug/pe"
	"encoding/binary"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPlace(t *testing.T) {
	stub := &pe.File{
		OptionalHeader: &pe.OptionalHeader64{SectionAlignment: 0x200, ImageBase: 0x10000000},
		Sections: []*pe.Section{
			{SectionHeader: pe.SectionHeader{Name: ".text", VirtualAddress: 0x4000, VirtualSize: 0xbff0, Size: 0xc000}},
			{SectionHeader: pe.SectionHeader{Name: ".sdmagic", VirtualAddress: 0x19100, VirtualSize: 0x34, Size: 0x200}},
		},
	}
	got, err := Place(stub, []Section{{".osrel", 9}, {".cmdline", 4096}, {".linux", 0x493e0}, {".initrd", 1}})
	if err != nil {
		t.Fatal(err)
	}
	want := []uint64{0x1001a000, 0x1001b000, 0x1001c000, 0x10066000}
	for i, p := range got {
		if p.VMA != want[i] {
			t.Errorf("%s at %#x, want %#x", p.Name, p.VMA, want[i])
		}
	}
	if _, err := Place(stub, []Section{{".text", 1}}); err == nil {
		t.Error("clash with a stub section accepted")
	}
	if _, err := Place(stub, []Section{{".linux", 0}}); err == nil {
		t.Error("empty section accepted")
	}
	if _, err := Place(&pe.File{OptionalHeader: &pe.OptionalHeader32{}}, nil); err == nil {
		t.Error("PE32 stub accepted")
	}
}

// TestChecksumMatchesStub: Checksum agrees with the checksum binutils
// wrote into Debian's stub.
func TestChecksumMatchesStub(t *testing.T) {
	b, err := os.ReadFile(DefaultStub)
	if err != nil {
		t.Fatalf("%v (CI needs Debian's systemd-boot-efi)", err)
	}
	off := int(binary.LittleEndian.Uint32(b[0x3c:])) + 4 + 20 + 64
	if got, want := Checksum(b, off), binary.LittleEndian.Uint32(b[off:]); got != want {
		t.Fatalf("checksum %#x, stub says %#x", got, want)
	}
}

// TestBuild builds a UKI from Debian's stub and checks, with debug/pe, that
// every section is there with its exact contents at a non-overlapping
// address, loadable and read-only, that the header is fixed up, and that a
// second build a second later is byte-identical.
func TestBuild(t *testing.T) {
	dir := t.TempDir()
	kernel := bytes.Repeat([]byte("kernel!"), 50001)
	initrd := bytes.Repeat([]byte("initrd"), 30001)
	kp, ip := filepath.Join(dir, "vmlinuz"), filepath.Join(dir, "initrd")
	if err := os.WriteFile(kp, kernel, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ip, initrd, 0o644); err != nil {
		t.Fatal(err)
	}
	in := Inputs{OSRelease: []byte("ID=berth\nVERSION_ID=0.1\n"), Cmdline: "console=ttyS0 berth.verity=sha256:ab:cd:1:2", Kernel: kp, Initrd: ip}
	out := filepath.Join(dir, "BOOTX64.EFI")
	log := slog.New(slog.DiscardHandler)
	if err := Build(context.Background(), log, out, in, Options{Epoch: 1700000000}); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(out)
	f, err := pe.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string][]byte{SectionOSRel: in.OSRelease, SectionCmdline: []byte(in.Cmdline), SectionLinux: kernel, SectionInitrd: initrd}
	type span struct{ lo, hi uint32 }
	var spans []span
	for _, s := range f.Sections {
		// Memory extent: VirtualSize (Size is the file size, rounded up).
		spans = append(spans, span{s.VirtualAddress, s.VirtualAddress + s.VirtualSize})
		w, ok := want[s.Name]
		if !ok {
			continue
		}
		delete(want, s.Name)
		d, err := s.Data()
		if err != nil {
			t.Fatal(err)
		}
		if s.VirtualSize != uint32(len(w)) || !bytes.Equal(d[:len(w)], w) {
			t.Errorf("%s: %d bytes, contents differ from input (%d bytes)", s.Name, s.VirtualSize, len(w))
		}
		const need = pe.IMAGE_SCN_CNT_INITIALIZED_DATA | pe.IMAGE_SCN_MEM_READ
		if s.Characteristics&need != need || s.Characteristics&pe.IMAGE_SCN_MEM_WRITE != 0 || s.VirtualAddress%pageSize != 0 {
			t.Errorf("%s: characteristics %#x at %#x", s.Name, s.Characteristics, s.VirtualAddress)
		}
	}
	if len(want) != 0 {
		t.Fatalf("sections missing: %v", want)
	}
	for i := range spans {
		for j := range spans {
			if i != j && spans[i].lo < spans[j].hi && spans[j].lo < spans[i].hi {
				t.Errorf("sections %d and %d overlap: %+v %+v", i, j, spans[i], spans[j])
			}
		}
	}
	oh := f.OptionalHeader.(*pe.OptionalHeader64)
	if last := spans[len(spans)-1]; oh.SizeOfImage < last.hi {
		t.Errorf("SizeOfImage %#x below the last section's end %#x", oh.SizeOfImage, last.hi)
	}
	if f.TimeDateStamp != 1700000000 {
		t.Errorf("timestamp %d", f.TimeDateStamp)
	}
	off := int(binary.LittleEndian.Uint32(a[0x3c:])) + 4 + 20 + 64
	if oh.CheckSum != Checksum(a, off) || oh.CheckSum == 0 {
		t.Errorf("checksum %#x, computed %#x", oh.CheckSum, Checksum(a, off))
	}
	time.Sleep(1100 * time.Millisecond)
	if err := Build(context.Background(), log, out, in, Options{Epoch: 1700000000}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out)
	if !bytes.Equal(a, b) {
		t.Fatal("two builds differ")
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".uki-*"))
	if len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

func TestBuildRejects(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	out := filepath.Join(dir, "x.efi")
	ok := Inputs{OSRelease: []byte("ID=berth\n"), Cmdline: "x", Kernel: DefaultStub, Initrd: DefaultStub}
	for name, mut := range map[string]func(*Inputs){
		"newline in cmdline": func(i *Inputs) { i.Cmdline = "a\nb" },
		"empty cmdline":      func(i *Inputs) { i.Cmdline = "" },
		"no os-release":      func(i *Inputs) { i.OSRelease = nil },
		"missing kernel":     func(i *Inputs) { i.Kernel = filepath.Join(dir, "nope") },
	} {
		in := ok
		mut(&in)
		if err := Build(context.Background(), log, out, in, Options{}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := FixHeader([]byte("MZ short"), 0); err == nil {
		t.Error("FixHeader accepted a non-PE")
	}
}

// Each architecture's stub is the one Debian's systemd-boot-efi of that
// architecture installs, and is for its PE machine (where installed: the
// arm64 one only after make deps ARCH=arm64).
func TestStubFor(t *testing.T) {
	for arch, want := range map[string]struct {
		path    string
		machine uint16
	}{
		"":      {DefaultStub, pe.IMAGE_FILE_MACHINE_AMD64},
		"amd64": {"/usr/lib/systemd/boot/efi/linuxx64.efi.stub", pe.IMAGE_FILE_MACHINE_AMD64},
		"arm64": {"/usr/lib/systemd/boot/efi/linuxaa64.efi.stub", pe.IMAGE_FILE_MACHINE_ARM64},
	} {
		path, machine, ok := StubFor(arch)
		if !ok || path != want.path || machine != want.machine {
			t.Errorf("StubFor(%q) = %s, %#x, %v; want %s, %#x", arch, path, machine, ok, want.path, want.machine)
		}
		if f, err := pe.Open(path); err == nil {
			if f.FileHeader.Machine != machine {
				t.Errorf("%s is for PE machine %#x, want %#x", path, f.FileHeader.Machine, machine)
			}
			f.Close()
		}
	}
	if _, _, ok := StubFor("riscv64"); ok {
		t.Error("StubFor(riscv64) is known")
	}
}

func TestBuildRefusesStubOfOtherMachine(t *testing.T) {
	dir := t.TempDir()
	in := Inputs{OSRelease: []byte("ID=berth\n"), Cmdline: "x", Kernel: DefaultStub, Initrd: DefaultStub}
	err := Build(context.Background(), slog.New(slog.DiscardHandler), filepath.Join(dir, "uki.efi"), in,
		Options{Stub: DefaultStub, Machine: pe.IMAGE_FILE_MACHINE_ARM64})
	if err == nil || !strings.Contains(err.Error(), DefaultStub) || !strings.Contains(err.Error(), "0xaa64") {
		t.Errorf("Build = %v, want an error naming the stub and the machine", err)
	}
}
