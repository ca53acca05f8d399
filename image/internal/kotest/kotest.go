// Package kotest writes fake kernel module files for the image builder's
// tests: minimal ELF64 relocatable files whose only content is a .modinfo
// section, which is all the builder reads from a real .ko. Tests then run
// without a kernel package on the machine.
package kotest

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// WriteKO writes a minimal x86-64 ELF64 relocatable file whose only
// content is a .modinfo section, which is all moddeps reads from a real .ko.
func WriteKO(t testing.TB, path string, fields ...string) {
	t.Helper()
	WriteKOFor(t, path, elf.EM_X86_64, fields...)
}

// WriteKOFor is WriteKO for machine m (an arm64 kernel's modules are
// EM_AARCH64).
func WriteKOFor(t testing.TB, path string, m elf.Machine, fields ...string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, ELF(m, fields...), 0o644); err != nil {
		t.Fatal(err)
	}
}

// ELF is the bytes WriteKOFor writes: also a stand-in for any ELF file of
// machine m where only the header is read (the image's architecture check).
func ELF(m elf.Machine, fields ...string) []byte {
	var modinfo bytes.Buffer
	for _, f := range fields {
		modinfo.WriteString(f)
		modinfo.WriteByte(0)
	}
	shstr := []byte("\x00.modinfo\x00.shstrtab\x00")
	const ehsize, shentsize = 64, 64
	modOff := uint64(ehsize)
	strOff := modOff + uint64(modinfo.Len())
	shOff := (strOff + uint64(len(shstr)) + 7) &^ 7
	var b bytes.Buffer
	le := binary.LittleEndian
	b.Write([]byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0})
	b.Write(make([]byte, 8))
	binary.Write(&b, le, uint16(1)) // ET_REL
	binary.Write(&b, le, uint16(m))
	binary.Write(&b, le, uint32(1))
	binary.Write(&b, le, uint64(0)) // entry
	binary.Write(&b, le, uint64(0)) // phoff
	binary.Write(&b, le, shOff)
	binary.Write(&b, le, uint32(0))
	binary.Write(&b, le, uint16(ehsize))
	binary.Write(&b, le, uint16(0)) // phentsize
	binary.Write(&b, le, uint16(0)) // phnum
	binary.Write(&b, le, uint16(shentsize))
	binary.Write(&b, le, uint16(3)) // shnum
	binary.Write(&b, le, uint16(2)) // shstrndx
	b.Write(modinfo.Bytes())
	b.Write(shstr)
	for uint64(b.Len()) < shOff {
		b.WriteByte(0)
	}
	sh := func(name, typ uint32, off, size uint64) {
		binary.Write(&b, le, name)
		binary.Write(&b, le, typ)
		binary.Write(&b, le, uint64(0)) // flags
		binary.Write(&b, le, uint64(0)) // addr
		binary.Write(&b, le, off)
		binary.Write(&b, le, size)
		binary.Write(&b, le, uint32(0))
		binary.Write(&b, le, uint32(0))
		binary.Write(&b, le, uint64(1))
		binary.Write(&b, le, uint64(0))
	}
	sh(0, 0, 0, 0)
	sh(1, 1, modOff, uint64(modinfo.Len())) // .modinfo, PROGBITS
	sh(10, 3, strOff, uint64(len(shstr)))   // .shstrtab, STRTAB
	return b.Bytes()
}
