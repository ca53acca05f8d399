// Package uki assembles the unified kernel image that disk.raw's ESP boots:
// systemd-boot's EFI stub (Debian's systemd-boot-efi, linuxx64.efi.stub,
// systemd 252) with the kernel, initramfs, command line and os-release
// added as PE sections by objcopy, as ukify does it. The stub finds the
// sections by name, hands the kernel the initramfs and the command line
// (which carries the dm-verity root hash), and starts it through the EFI
// handover protocol; with Secure Boot the one signature over the PE
// covers all of them.
//
// Placement (Place) is pure: each added section starts at the first
// page-aligned address after the stub's last section and after the one
// before it, so nothing overlaps. objcopy stamps the current time into
// the PE header (binutils 2.40 ignores SOURCE_DATE_EPOCH there), so Build
// rewrites the timestamp and the PE checksum afterwards (FixHeader) to make
// the file reproducible.
package uki

import (
	"bytes"
	"context"
	"debug/pe"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/berth-node/berth/internal/fsutil"
)

// DefaultStub is where Debian's systemd-boot-efi puts the x86-64 stub.
const DefaultStub = "/usr/lib/systemd/boot/efi/linuxx64.efi.stub"

// ObjcopyFor is the objcopy that can write an architecture's PE files: the
// host's binutils knows only pei-x86-64, arm64's pei-aarch64-little needs
// the cross binutils (binutils-aarch64-linux-gnu, which make deps ARCH=arm64
// installs with gcc-aarch64-linux-gnu).
func ObjcopyFor(arch string) string {
	if arch == "arm64" {
		return "aarch64-linux-gnu-objcopy"
	}
	return "objcopy"
}

// StubFor is the EFI stub for an architecture's UKI, from Debian's
// systemd-boot-efi of that architecture (systemd-boot-efi:arm64 installs
// beside the amd64 one: the package is Multi-Arch: same), and the PE
// machine it must be built for.
func StubFor(arch string) (path string, machine uint16, ok bool) {
	switch arch {
	case "", "amd64":
		return DefaultStub, pe.IMAGE_FILE_MACHINE_AMD64, true
	case "arm64":
		return "/usr/lib/systemd/boot/efi/linuxaa64.efi.stub", pe.IMAGE_FILE_MACHINE_ARM64, true
	}
	return "", 0, false
}

// Section names the 252 stub reads.
const (
	SectionOSRel   = ".osrel"
	SectionCmdline = ".cmdline"
	SectionLinux   = ".linux"
	SectionInitrd  = ".initrd"
)

// pageSize aligns added sections; EFI loads images page by page.
const pageSize = 4096

// Inputs are what goes into the UKI.
type Inputs struct {
	OSRelease []byte // os-release text (.osrel)
	Cmdline   string // kernel command line (.cmdline)
	Kernel    string // path of the bzImage (.linux)
	Initrd    string // path of the initramfs (.initrd)
}

// Options tune Build.
type Options struct {
	Stub string // DefaultStub when empty
	// Machine, when set, is the PE machine the stub must be for
	// (StubFor's): firmware of one architecture cannot run another's stub.
	Machine uint16
	Objcopy string // "objcopy" from PATH when empty
	// Epoch is the PE header's timestamp (seconds since 1970).
	Epoch uint32
}

// Section is one section to add: its name and size in bytes.
type Section struct {
	Name string
	Size int64
}

// Placed is a section with the address (VMA, image base included) it gets.
type Placed struct {
	Section
	VMA uint64
}

// Place puts sections after the stub's own, in order, each page aligned
// (or to the stub's SectionAlignment if that is larger).
func Place(stub *pe.File, sections []Section) ([]Placed, error) {
	oh, ok := stub.OptionalHeader.(*pe.OptionalHeader64)
	if !ok {
		return nil, errors.New("EFI stub is not a PE32+ image")
	}
	align := max(uint64(oh.SectionAlignment), pageSize)
	var end uint64
	for _, s := range stub.Sections {
		for _, a := range sections {
			if s.Name == a.Name {
				return nil, fmt.Errorf("EFI stub already has a %s section", s.Name)
			}
		}
		end = max(end, uint64(s.VirtualAddress)+uint64(max(s.VirtualSize, s.Size)))
	}
	next := oh.ImageBase + alignUp(end, align)
	out := make([]Placed, len(sections))
	for i, s := range sections {
		if s.Size <= 0 {
			return nil, fmt.Errorf("section %s is empty", s.Name)
		}
		out[i] = Placed{Section: s, VMA: next}
		next = alignUp(next+uint64(s.Size), align)
	}
	return out, nil
}

func alignUp(v, a uint64) uint64 { return (v + a - 1) / a * a }

// Build writes the UKI to out (atomically).
func Build(ctx context.Context, log *slog.Logger, out string, in Inputs, o Options) error {
	if o.Stub == "" {
		o.Stub = DefaultStub
	}
	if o.Objcopy == "" {
		o.Objcopy = "objcopy"
	}
	if strings.ContainsAny(in.Cmdline, "\x00\n") || in.Cmdline == "" {
		return fmt.Errorf("building UKI %s: command line %q must be one non-empty line", out, in.Cmdline)
	}
	if len(in.OSRelease) == 0 {
		return fmt.Errorf("building UKI %s: empty os-release", out)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(out), ".uki-")
	if err != nil {
		return fmt.Errorf("building UKI %s: %w", out, err)
	}
	defer os.RemoveAll(tmp)
	osrel, cmdline := filepath.Join(tmp, "osrel"), filepath.Join(tmp, "cmdline")
	if err := os.WriteFile(osrel, in.OSRelease, 0o644); err != nil {
		return fmt.Errorf("building UKI %s: %w", out, err)
	}
	if err := os.WriteFile(cmdline, []byte(in.Cmdline), 0o644); err != nil {
		return fmt.Errorf("building UKI %s: %w", out, err)
	}
	files := []struct{ name, path string }{
		{SectionOSRel, osrel}, {SectionCmdline, cmdline}, {SectionLinux, in.Kernel}, {SectionInitrd, in.Initrd},
	}
	var secs []Section
	for _, f := range files {
		st, err := os.Stat(f.path)
		if err != nil {
			return fmt.Errorf("building UKI %s: section %s: %w", out, f.name, err)
		}
		secs = append(secs, Section{Name: f.name, Size: st.Size()})
	}
	stub, err := pe.Open(o.Stub)
	if err != nil {
		return fmt.Errorf("building UKI %s: reading EFI stub %s (Debian's systemd-boot-efi): %w", out, o.Stub, err)
	}
	stubMachine := stub.FileHeader.Machine
	placed, err := Place(stub, secs)
	stub.Close()
	if o.Machine != 0 && stubMachine != o.Machine {
		return fmt.Errorf("building UKI %s: EFI stub %s is for PE machine %#x, want %#x", out, o.Stub, stubMachine, o.Machine)
	}
	if err != nil {
		return fmt.Errorf("building UKI %s: stub %s: %w", out, o.Stub, err)
	}
	args := []string{}
	for i, p := range placed {
		args = append(args, "--add-section", p.Name+"="+files[i].path,
			"--change-section-vma", fmt.Sprintf("%s=%#x", p.Name, p.VMA))
	}
	raw := filepath.Join(tmp, "uki.efi")
	args = append(args, o.Stub, raw)
	cmd := exec.CommandContext(ctx, o.Objcopy, args...)
	cmd.WaitDelay = 5 * time.Second
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building UKI %s: %s %s: %w\n%s", out, o.Objcopy, strings.Join(args, " "), err, b)
	}
	b, err := os.ReadFile(raw)
	if err != nil {
		return fmt.Errorf("building UKI %s: %w", out, err)
	}
	if err := FixHeader(b, o.Epoch); err != nil {
		return fmt.Errorf("building UKI %s: %w", out, err)
	}
	if err := fsutil.WriteFileAtomic(out, b, 0o644); err != nil {
		return fmt.Errorf("building UKI %s: %w", out, err)
	}
	log.Info("UKI built", "path", out, "bytes", len(b), "cmdline", in.Cmdline)
	return nil
}

// FixHeader sets the PE file's COFF timestamp to epoch and recomputes the
// optional header's checksum, in place.
func FixHeader(b []byte, epoch uint32) error {
	if len(b) < 0x40 || b[0] != 'M' || b[1] != 'Z' {
		return errors.New("not a PE file (no MZ header)")
	}
	off := int(binary.LittleEndian.Uint32(b[0x3c:]))
	if off < 0 || off+4+20+68 > len(b) || !bytes.Equal(b[off:off+4], []byte("PE\x00\x00")) {
		return errors.New("not a PE file (no PE signature)")
	}
	binary.LittleEndian.PutUint32(b[off+4+4:], epoch) // COFF TimeDateStamp
	sum := off + 4 + 20 + 64                          // optional header CheckSum
	binary.LittleEndian.PutUint32(b[sum:], 0)
	binary.LittleEndian.PutUint32(b[sum:], Checksum(b, sum))
	return nil
}

// Checksum is the PE image checksum (as IMAGEHLP's CheckSumMappedFile):
// the 16-bit one's-complement-style folded sum of the file's words,
// skipping the checksum field at sumOff, plus the file length.
func Checksum(b []byte, sumOff int) uint32 {
	var s uint64
	for i := 0; i < len(b); i += 2 {
		if i == sumOff || i == sumOff+2 {
			continue
		}
		w := uint64(b[i])
		if i+1 < len(b) {
			w |= uint64(b[i+1]) << 8
		}
		s += w
		s = (s & 0xffff) + (s >> 16)
	}
	s = (s & 0xffff) + (s >> 16)
	return uint32(s) + uint32(len(b))
}
