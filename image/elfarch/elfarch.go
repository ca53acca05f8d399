// Package elfarch ties an architecture name (Go's and OCI's: amd64, arm64)
// to the ELF machine of its binaries, and checks files against it. The node
// image builder and the container image builder both refuse an ELF file of
// another machine: on a node it would only fail at exec, as "exec format
// error", or as a module the kernel will not load. It is a leaf package so
// that both builders (image/assemble, and image/oci/imagespec on top of
// it) share one check.
package elfarch

import (
	"bytes"
	"debug/elf"
	"fmt"
)

// Names lists the architectures Machine knows, for error messages.
const Names = "amd64, arm64"

// Machine is the ELF machine of an architecture's binaries.
func Machine(arch string) (elf.Machine, bool) {
	switch arch {
	case "amd64":
		return elf.EM_X86_64, true
	case "arm64":
		return elf.EM_AARCH64, true
	}
	return 0, false
}

// Check returns an error naming the file when data is an ELF file for
// another machine than want, or starts like one and does not parse. Other
// files (scripts, data, a kernel image) pass.
func Check(name string, data []byte, want elf.Machine) error {
	if !bytes.HasPrefix(data, []byte(elf.ELFMAG)) {
		return nil
	}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%s: reading ELF header: %w", name, err)
	}
	if f.Machine != want {
		return fmt.Errorf("%s: ELF for %v, the image is for %v", name, f.Machine, want)
	}
	return nil
}

// Multiarch is Debian's multiarch tuple for the machine: the directory its
// libraries and plugins live under (/lib/<tuple>, /usr/lib/<tuple>/xtables),
// and the name the dynamic loader searches.
func Multiarch(m elf.Machine) (string, bool) {
	switch m {
	case elf.EM_X86_64:
		return "x86_64-linux-gnu", true
	case elf.EM_AARCH64:
		return "aarch64-linux-gnu", true
	}
	return "", false
}
