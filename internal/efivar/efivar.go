// Package efivar reads the machine's UEFI variables through Linux's
// efivarfs: whether the firmware enforces Secure Boot (the global
// SecureBoot and SetupMode variables), and what systemd-boot says it
// started (LoaderInfo, LoaderEntrySelected), for the boot report.
//
// efivarfs is mounted read-only: berth only reads variables, and a
// writable efivarfs is how a mistaken `rm -rf /sys` (or a privileged
// container) bricks firmware that keeps its boot entries there.
package efivar

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf16"

	"golang.org/x/sys/unix"
)

// Where the kernel shows a UEFI boot: FirmwareDir exists only when the
// machine booted through UEFI, and efivarfs belongs on Dir.
const (
	FirmwareDir = "/sys/firmware/efi"
	Dir         = FirmwareDir + "/efivars"
)

// Vendor GUIDs: the UEFI specification's global variables
// (EFI_GLOBAL_VARIABLE) and systemd-boot's Boot Loader Interface.
const (
	GlobalGUID = "8be4df61-93ca-11d2-aa0d-00e098032b8c"
	LoaderGUID = "4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"
)

// Mount mounts efivarfs read-only on Dir when the machine booted through
// UEFI; booted is false (and nothing is done) when it did not. A Dir that
// is already a mount point is left as it is.
func Mount() (booted bool, err error) {
	if _, err := os.Stat(FirmwareDir); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	var st, parent unix.Stat_t
	if unix.Stat(Dir, &st) == nil && unix.Stat(FirmwareDir, &parent) == nil && st.Dev != parent.Dev {
		return true, nil
	}
	if err := unix.Mount("efivarfs", Dir, "efivarfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return true, fmt.Errorf("mounting efivarfs read-only on %s: %w", Dir, err)
	}
	return true, nil
}

// Read returns the data of the variable name of vendor guid under dir
// (an efivarfs) and its attributes, which efivarfs puts in the file's
// first 4 bytes.
func Read(dir, name, guid string) (data []byte, attrs uint32, err error) {
	p := filepath.Join(dir, name+"-"+guid)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, 0, err
	}
	if len(b) < 4 {
		return nil, 0, fmt.Errorf("UEFI variable %s: %d bytes, shorter than its attributes", p, len(b))
	}
	return b[4:], binary.LittleEndian.Uint32(b), nil
}

// Firmware is what the boot report says of the firmware.
type Firmware struct {
	// UEFI says the machine booted through UEFI.
	UEFI bool `json:"uefi"`
	// SecureBoot says the firmware verified what it started: the
	// SecureBoot variable is 1 (and so the machine is not in setup mode).
	SecureBoot bool `json:"secureBoot"`
	// SetupMode says no platform key is enrolled: anything boots, and
	// systemd-boot may enroll keys from the ESP.
	SetupMode bool `json:"setupMode"`
	// Loader is the boot loader that started the kernel, as it names
	// itself (systemd-boot's LoaderInfo, "systemd-boot 252.39-1~deb12u2").
	Loader string `json:"loader,omitempty"`
	// Entry is the boot entry systemd-boot started
	// (LoaderEntrySelected): for a UKI its file name.
	Entry string `json:"entry,omitempty"`
	// BootCountPath is the booted UKI's path on the ESP once
	// systemd-boot counted this boot against it (LoaderBootCountPath:
	// \EFI\Linux\berth-2+2-1.efi); empty when the entry has no boot
	// counter. Entry names the file as found before that rename, so only
	// this one says how many tries are left.
	BootCountPath string `json:"bootCountPath,omitempty"`
	// Error is why a variable that should be there could not be read.
	Error string `json:"error,omitempty"`
}

// State reads the firmware's state from dir (an efivarfs; Dir on a
// node). A missing SecureBoot variable is firmware without Secure Boot
// support, not an error; the loader's variables are there only when
// systemd-boot started the kernel.
func State(dir string) Firmware {
	f := Firmware{UEFI: true}
	var errs []string
	flag := func(name string) bool {
		b, _, err := Read(dir, name, GlobalGUID)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return false
		case err != nil:
			errs = append(errs, err.Error())
			return false
		case len(b) != 1:
			errs = append(errs, fmt.Sprintf("UEFI variable %s: %d bytes of data, want 1", name, len(b)))
			return false
		}
		return b[0] == 1
	}
	f.SecureBoot = flag("SecureBoot")
	f.SetupMode = flag("SetupMode")
	text := func(name string) string {
		b, _, err := Read(dir, name, LoaderGUID)
		if errors.Is(err, fs.ErrNotExist) {
			return ""
		}
		if err != nil {
			errs = append(errs, err.Error())
			return ""
		}
		s, err := UTF16(b)
		if err != nil {
			errs = append(errs, fmt.Sprintf("UEFI variable %s: %v", name, err))
		}
		return s
	}
	f.Loader = text("LoaderInfo")
	f.Entry = text("LoaderEntrySelected")
	f.BootCountPath = text("LoaderBootCountPath")
	f.Error = strings.Join(errs, "; ")
	return f
}

// UTF16 decodes a UEFI string variable: UTF-16LE, ended by a NUL (or by
// the data's end).
func UTF16(b []byte) (string, error) {
	if len(b)%2 != 0 {
		return "", fmt.Errorf("%d bytes: not UTF-16", len(b))
	}
	u := make([]uint16, 0, len(b)/2)
	for i := 0; i < len(b); i += 2 {
		c := binary.LittleEndian.Uint16(b[i:])
		if c == 0 {
			break
		}
		u = append(u, c)
	}
	return string(utf16.Decode(u)), nil
}
