package efivar

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf16"
)

// variable writes an efivarfs file: 4 bytes of attributes, then data.
func variable(t testing.TB, dir, name, guid string, data []byte) {
	t.Helper()
	b := binary.LittleEndian.AppendUint32(nil, 0x7) // NV|BS|RT
	if err := os.WriteFile(filepath.Join(dir, name+"-"+guid), append(b, data...), 0o644); err != nil {
		t.Fatal(err)
	}
}

func ucs2(s string) []byte {
	var b []byte
	for _, c := range utf16.Encode([]rune(s)) {
		b = binary.LittleEndian.AppendUint16(b, c)
	}
	return append(b, 0, 0)
}

// The variables as OVMF and systemd-boot leave them, in the states a node
// can boot in.
func TestState(t *testing.T) {
	for name, c := range map[string]struct {
		vars map[string][]byte
		want Firmware
	}{
		"secure boot, systemd-boot": {
			vars: map[string][]byte{"SecureBoot": {1}, "SetupMode": {0},
				"LoaderInfo": ucs2("systemd-boot 252.39-1~deb12u2"), "LoaderEntrySelected": ucs2("berth-v1.efi")},
			want: Firmware{UEFI: true, SecureBoot: true, Loader: "systemd-boot 252.39-1~deb12u2", Entry: "berth-v1.efi"},
		},
		"trial boot of a counted UKI": {
			vars: map[string][]byte{"SecureBoot": {1}, "SetupMode": {0},
				"LoaderInfo": ucs2("systemd-boot 252.39-1~deb12u2"), "LoaderEntrySelected": ucs2("berth-2+3.efi"),
				"LoaderBootCountPath": ucs2(`\EFI\Linux\berth-2+2-1.efi`)},
			want: Firmware{UEFI: true, SecureBoot: true, Loader: "systemd-boot 252.39-1~deb12u2", Entry: "berth-2+3.efi",
				BootCountPath: `\EFI\Linux\berth-2+2-1.efi`},
		},
		"odd-length LoaderBootCountPath": {
			vars: map[string][]byte{"LoaderEntrySelected": ucs2("berth-2+3.efi"), "LoaderBootCountPath": {0x5c}},
			want: Firmware{UEFI: true, Entry: "berth-2+3.efi", Error: "UEFI variable LoaderBootCountPath: 1 bytes: not UTF-16"},
		},
		"setup mode": {
			vars: map[string][]byte{"SecureBoot": {0}, "SetupMode": {1}},
			want: Firmware{UEFI: true, SetupMode: true},
		},
		"no secure boot support": {
			vars: map[string][]byte{},
			want: Firmware{UEFI: true},
		},
		"malformed": {
			vars: map[string][]byte{"SecureBoot": {1, 0}, "SetupMode": {0}},
			want: Firmware{UEFI: true, Error: "UEFI variable SecureBoot: 2 bytes of data, want 1"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			for n, d := range c.vars {
				guid := GlobalGUID
				if strings.HasPrefix(n, "Loader") {
					guid = LoaderGUID
				}
				variable(t, dir, n, guid, d)
			}
			if got := State(dir); got != c.want {
				t.Errorf("State = %+v, want %+v", got, c.want)
			}
		})
	}
}

// boot.json names the boot counter's path only on a counted boot.
func TestFirmwareJSON(t *testing.T) {
	b, err := json.Marshal(Firmware{UEFI: true, Entry: "berth-2.efi"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "bootCountPath") {
		t.Errorf("uncounted boot: %s, want no bootCountPath", b)
	}
	b, err = json.Marshal(Firmware{UEFI: true, Entry: "berth-2+3.efi", BootCountPath: `\EFI\Linux\berth-2+2-1.efi`})
	if err != nil {
		t.Fatal(err)
	}
	if want := `"bootCountPath":"\\EFI\\Linux\\berth-2+2-1.efi"`; !strings.Contains(string(b), want) {
		t.Errorf("counted boot: %s, want %s in it", b, want)
	}
}

func TestReadShort(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "SecureBoot-"+GlobalGUID), []byte{7, 0}, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Read(dir, "SecureBoot", GlobalGUID); err == nil || !strings.Contains(err.Error(), "SecureBoot-"+GlobalGUID) {
		t.Errorf("2-byte variable: %v, want an error naming the file", err)
	}
	if f := State(dir); f.Error == "" || f.SecureBoot {
		t.Errorf("State of a 2-byte SecureBoot = %+v, want an error", f)
	}
}

func FuzzUTF16(f *testing.F) {
	f.Add(ucs2("systemd-boot 252"))
	f.Add([]byte{0x41})
	f.Add([]byte{0x00, 0xd8, 0x41, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := UTF16(b)
		if err != nil {
			if len(b)%2 == 0 {
				t.Fatalf("even-length input refused: %v", err)
			}
			return
		}
		if strings.ContainsRune(s, 0) {
			t.Fatalf("decoded string %q holds a NUL", s)
		}
	})
}
