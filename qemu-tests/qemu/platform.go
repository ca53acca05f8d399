package qemu

import (
	"fmt"
	"strings"
	"time"
)

// platform is what differs between the architectures a VM emulates: the
// QEMU binary and machine, the guest's names for its consoles, how the
// debug shell's port is attached, and the UEFI firmware.
type platform struct {
	binary  string
	machine []string
	// console is the guest's first serial port, where berth logs.
	console string
	// shellTTY is the guest device berth.debugshell= names; shellArgs
	// attach the host socket chardev "sh0" to it.
	shellTTY  string
	shellArgs []string
	// fwCode and fwVars are the UEFI firmware (read-only code, and the
	// variable store each VM gets a copy of).
	fwCode, fwVars string
	// fwPackage is the Debian package that ships them, for the error.
	fwPackage string
	// kernelViaUEFI boots -kernel/-initrd through the firmware too, so
	// the guest has ACPI as on the real machine.
	kernelViaUEFI bool
	// silentFor is how long the guest may print nothing at all before
	// its VM counts as hung (stall.go); 0 never.
	silentFor time.Duration
	// secure is the platform with firmware that enforces Secure Boot
	// (Config.SecureBoot).
	secure func() platform
}

// platformFor is the platform of an image's architecture (its manifest's
// arch; amd64 when empty, as in images built before it was recorded).
//
// arm64 is QEMU's virt machine. It has one PL011 UART (QEMU 7.2, Debian
// 12), so the debug shell is a virtio console (hvc0) instead of a second
// serial port. Its kernel is loaded by AAVMF even on a direct kernel boot:
// without firmware virt gives the kernel a device tree, where
// system_powerdown is a gpio-keys KEY_POWER that berth does not watch; with
// it the kernel gets ACPI, and the power button is an ACPI event (GED →
// PNP0C0C) that berth's ACPI watcher already serves, as on Graviton, which
// boots through UEFI with ACPI. Measured under TCG: the firmware adds about
// 5 s to a boot.
func platformFor(arch string) (platform, error) {
	switch arch {
	case "", "amd64":
		return platform{
			binary:  "qemu-system-x86_64",
			machine: []string{"-machine", "q35"},
			console: "ttyS0", shellTTY: "ttyS1", shellArgs: []string{"-serial", "chardev:sh0"},
			fwCode: OVMFCode, fwVars: OVMFVars, fwPackage: "ovmf",
			silentFor: silentFor,
			secure:    secureAmd64,
		}, nil
	case "arm64":
		return platform{
			binary:  "qemu-system-aarch64",
			machine: []string{"-machine", "virt"},
			console: "ttyAMA0", shellTTY: "hvc0",
			shellArgs: []string{"-device", "virtio-serial-pci,id=vser0", "-device", "virtconsole,bus=vser0.0,chardev=sh0"},
			fwCode:    AAVMFCode, fwVars: AAVMFVars, fwPackage: "qemu-efi-aarch64",
			kernelViaUEFI: true,
			// AAVMF enforces Secure Boot once keys are enrolled; virt
			// has no SMM to protect the store, which a test does not
			// need.
			secure: func() platform { p, _ := platformFor("arm64"); return p },
			// No silentFor: AAVMF prints a line within a second
			// (berth's first comes 7-12 s in, 2026-11-30), so a
			// silent console would only catch a hang before the
			// firmware, not the kernel's.
		}, nil
	}
	return platform{}, fmt.Errorf("qemu: architecture %q: want amd64 or arm64", arch)
}

// OVMF's Secure Boot build (Debian's ovmf): its variable store is
// writable only from SMM, so it needs q35 with SMM and a secure flash; the
// 4 MiB store starts empty (setup mode).
const (
	OVMFSecureCode = "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd"
	OVMFSecureVars = "/usr/share/OVMF/OVMF_VARS_4M.fd"
)

// secureAmd64 is amd64 with OVMF's Secure Boot build. S3 is off, as
// OVMF's secure build requires with SMM (libvirt does the same).
func secureAmd64() platform {
	p, _ := platformFor("amd64")
	p.machine = []string{"-machine", "q35,smm=on", "-global", "driver=cfi.pflash01,property=secure,value=on", "-global", "ICH9-LPC.disable_s3=1"}
	p.fwCode, p.fwVars = OVMFSecureCode, OVMFSecureVars
	return p
}

// AAVMF firmware files (Debian's qemu-efi-aarch64), arm64's OVMF.
const (
	AAVMFCode = "/usr/share/AAVMF/AAVMF_CODE.fd"
	AAVMFVars = "/usr/share/AAVMF/AAVMF_VARS.fd"
)

// ArchCmdline returns cmdline, written with amd64's console names
// (console=ttyS0, berth.debugshell=ttyS1), with arch's instead. A disk's
// UKI fixes its command line when the disk is made, before any VM picks
// the platform, so the tests' disks are made with this.
func ArchCmdline(cmdline, arch string) (string, error) {
	p, err := platformFor(arch)
	if err != nil {
		return "", err
	}
	return strings.NewReplacer("console=ttyS0", "console="+p.console, "berth.debugshell=ttyS1", "berth.debugshell="+p.shellTTY).Replace(cmdline), nil
}

// SecureFirmware is arch's Secure Boot firmware (Config.SecureBoot): its
// code and its empty variable store, which a test hashes to know whether
// a store it enrolled keys in was made with the same firmware.
func SecureFirmware(arch string) (code, vars string, err error) {
	p, err := platformFor(arch)
	if err != nil {
		return "", "", err
	}
	p = p.secure()
	return p.fwCode, p.fwVars, nil
}
