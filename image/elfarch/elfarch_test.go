package elfarch

import (
	"debug/elf"
	"encoding/binary"
	"os"
	"strings"
	"testing"
)

// hostTrue is a program every build host has, an ELF file for its machine.
const hostTrue = "/bin/true"

// withMachine is a copy of /bin/true whose header claims machine m.
func withMachine(t *testing.T, m elf.Machine) []byte {
	t.Helper()
	b, err := os.ReadFile(hostTrue)
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint16(b[18:], uint16(m)) // e_machine
	return b
}

func TestMachine(t *testing.T) {
	for arch, want := range map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64} {
		if m, ok := Machine(arch); !ok || m != want {
			t.Errorf("Machine(%s) = %v, %v; want %v", arch, m, ok, want)
		}
		if !strings.Contains(Names, arch) {
			t.Errorf("Names %q lacks %s", Names, arch)
		}
	}
	for _, arch := range []string{"", "x86_64", "aarch64", "s390x"} {
		if _, ok := Machine(arch); ok {
			t.Errorf("Machine(%q) is known; want only Go's names", arch)
		}
	}
}

func TestCheck(t *testing.T) {
	x86, arm := withMachine(t, elf.EM_X86_64), withMachine(t, elf.EM_AARCH64)
	for name, tc := range map[string]struct {
		data   []byte
		want   elf.Machine
		errHas []string
	}{
		"script":            {[]byte("#!/bin/sh\n"), elf.EM_AARCH64, nil},
		"empty":             {nil, elf.EM_AARCH64, nil},
		"amd64 for amd64":   {x86, elf.EM_X86_64, nil},
		"arm64 for arm64":   {arm, elf.EM_AARCH64, nil},
		"amd64 in arm64":    {x86, elf.EM_AARCH64, []string{"/usr/bin/f", "EM_X86_64", "EM_AARCH64"}},
		"arm64 in amd64":    {arm, elf.EM_X86_64, []string{"/usr/bin/f", "EM_AARCH64", "EM_X86_64"}},
		"truncated ELF":     {[]byte("\x7fELF\x02\x01"), elf.EM_X86_64, []string{"/usr/bin/f", "ELF header"}},
		"ELF magic, 4 only": {[]byte(elf.ELFMAG), elf.EM_X86_64, []string{"/usr/bin/f"}},
	} {
		err := Check("/usr/bin/f", tc.data, tc.want)
		if len(tc.errHas) == 0 {
			if err != nil {
				t.Errorf("%s: Check = %v, want nil", name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: Check = nil, want an error", name)
			continue
		}
		for _, s := range tc.errHas {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: Check = %v, want it to name %s", name, err, s)
			}
		}
	}
}

// FuzzCheck: Check reads headers of files from anywhere on the build host;
// no input may panic it, and a file without the ELF magic always passes.
func FuzzCheck(f *testing.F) {
	f.Add([]byte("#!/bin/sh\n"))
	f.Add([]byte("\x7fELF\x02\x01\x01"))
	if b, err := os.ReadFile(hostTrue); err == nil {
		f.Add(b[:min(len(b), 256)])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := Check("f", data, elf.EM_AARCH64)
		if err != nil && !strings.HasPrefix(string(data), elf.ELFMAG) {
			t.Errorf("Check of a non-ELF file = %v", err)
		}
	})
}

// Every architecture Machine knows has a multiarch tuple, or its image could
// not find its libraries.
func TestMultiarch(t *testing.T) {
	for arch, want := range map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"} {
		m, _ := Machine(arch)
		if got, ok := Multiarch(m); !ok || got != want {
			t.Errorf("Multiarch(%v) = %q, %v; want %q", m, got, ok, want)
		}
	}
	if _, ok := Multiarch(elf.EM_S390); ok {
		t.Error("Multiarch(EM_S390) is known")
	}
}
