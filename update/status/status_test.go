package status

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/berth-node/berth/internal/efivar"
)

const loader = "systemd-boot 252.39-1~deb12u2"

// The boots a node can have: the firmware variables as systemd-boot 252
// leaves them (LoaderEntrySelected is the entry id from before the
// counter's rename, LoaderBootCountPath the name after it).
func TestOf(t *testing.T) {
	for name, c := range map[string]struct {
		facts Facts
		want  Status
	}{
		"direct kernel boot, root in the initramfs": {
			facts: Facts{Version: "0.3.1"},
			want:  Status{Version: "0.3.1", Boot: BootDirect},
		},
		"UEFI without systemd-boot": {
			facts: Facts{Firmware: &efivar.Firmware{UEFI: true, SecureBoot: true}, Version: "0.3.1"},
			want:  Status{Version: "0.3.1", Boot: BootUEFI},
		},
		"UEFI variables unreadable": {
			facts: Facts{Firmware: &efivar.Firmware{UEFI: true, Error: "mounting efivarfs read-only on /sys/firmware/efi/efivars: no such device"}, Slot: "a"},
			want: Status{Slot: "a", Boot: BootUEFI,
				Error: "whether systemd-boot started this boot is unknown: mounting efivarfs read-only on /sys/firmware/efi/efivars: no such device"},
		},
		"blessed": {
			facts: Facts{Firmware: &efivar.Firmware{UEFI: true, Loader: loader, Entry: "berth-0.3.1.efi"}, Slot: "a", Version: "0.3.1"},
			want:  Status{Version: "0.3.1", Slot: "a", Boot: BootSystemdBoot, Entry: "berth-0.3.1.efi", State: "good"},
		},
		"first try of a staged version": {
			facts: Facts{Firmware: &efivar.Firmware{UEFI: true, Loader: loader, Entry: "berth-0.3.2+3.efi",
				BootCountPath: `\EFI\Linux\berth-0.3.2+2-1.efi`}, Slot: "b", Version: "0.3.2"},
			want: Status{Version: "0.3.2", Slot: "b", Boot: BootSystemdBoot, Entry: "berth-0.3.2+2-1.efi",
				State: "indeterminate", Trial: true, TriesLeft: 2, TriesDone: 1},
		},
		"last try": {
			facts: Facts{Firmware: &efivar.Firmware{UEFI: true, Loader: loader, Entry: "berth-0.3.2+1-2.efi",
				BootCountPath: `\EFI\Linux\berth-0.3.2+0-3.efi`}, Slot: "b", Version: "0.3.2"},
			want: Status{Version: "0.3.2", Slot: "b", Boot: BootSystemdBoot, Entry: "berth-0.3.2+0-3.efi",
				State: "bad", Trial: true, TriesDone: 3},
		},
		"entry id lowercased": {
			facts: Facts{Firmware: &efivar.Firmware{UEFI: true, Loader: loader, Entry: "berth-v1.4.0-rc1.efi"}, Version: "v1.4.0-RC1"},
			want:  Status{Version: "v1.4.0-RC1", Boot: BootSystemdBoot, Entry: "berth-v1.4.0-rc1.efi", State: "good"},
		},
		"another version's UKI": {
			facts: Facts{Firmware: &efivar.Firmware{UEFI: true, Loader: loader, Entry: "berth-0.3.0.efi"}, Slot: "a", Version: "0.3.1"},
			want: Status{Version: "0.3.1", Slot: "a", Boot: BootSystemdBoot, Entry: "berth-0.3.0.efi", State: "good",
				Error: "entry berth-0.3.0.efi is version 0.3.0, but the image is 0.3.1"},
		},
		"not a berth UKI": {
			facts: Facts{Firmware: &efivar.Firmware{UEFI: true, Loader: loader, Entry: "debian-6.1.efi"}, Version: "0.3.1"},
			want: Status{Version: "0.3.1", Boot: BootSystemdBoot,
				Error: `booted entry: LoaderEntrySelected "debian-6.1.efi": UKI file name "debian-6.1.efi": not a berth UKI (want berth-<version>.efi)`},
		},
		"boot counter outside EFI/Linux": {
			facts: Facts{Firmware: &efivar.Firmware{UEFI: true, Loader: loader, Entry: "berth-0.3.2+3.efi",
				BootCountPath: `\EFI\BOOT\berth-0.3.2+2-1.efi`}, Version: "0.3.2"},
			want: Status{Version: "0.3.2", Boot: BootSystemdBoot,
				Error: `booted entry: LoaderBootCountPath "\\EFI\\BOOT\\berth-0.3.2+2-1.efi": not a UKI in \EFI\Linux`},
		},
		"loader without an entry": {
			facts: Facts{Firmware: &efivar.Firmware{UEFI: true, Loader: loader}},
			want: Status{Boot: BootSystemdBoot,
				Error: "booted entry: neither LoaderBootCountPath nor LoaderEntrySelected is set: not started by systemd-boot"},
		},
		"bad slot": {
			facts: Facts{Slot: "c", Version: "0.3.1"},
			want:  Status{Version: "0.3.1", Slot: "c", Boot: BootDirect, Error: `berth.slot="c": want "a" or "b"`},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := Of(c.facts)
			if got.LastUpdate != nil {
				t.Errorf("Of filled LastUpdate: %+v", got.LastUpdate)
			}
			got.LastUpdate = nil
			if got != c.want {
				t.Errorf("Of =\n %+v\nwant\n %+v", got, c.want)
			}
		})
	}
}

// boot.json's update section: the keys users read, with the trial's and
// the last update's only where they say something.
func TestJSON(t *testing.T) {
	for name, c := range map[string]struct {
		s    Status
		want string
	}{
		"direct": {
			s:    Of(Facts{Version: "0.3.1"}),
			want: `{"version":"0.3.1","boot":"direct","trial":false}`,
		},
		"trial": {
			s: Of(Facts{Firmware: &efivar.Firmware{UEFI: true, Loader: loader, Entry: "berth-0.3.2+3.efi",
				BootCountPath: `\EFI\Linux\berth-0.3.2+2-1.efi`}, Slot: "b", SlotBy: "hash", Version: "0.3.2"}),
			want: `{"version":"0.3.2","slot":"b","slotBy":"hash","boot":"systemd-boot","entry":"berth-0.3.2+2-1.efi","state":"indeterminate","trial":true,"triesLeft":2,"triesDone":1}`,
		},
		"last update": {
			s: Status{Version: "0.3.1", Slot: "a", Boot: BootSystemdBoot, Entry: "berth-0.3.1.efi", State: "good",
				LastUpdate: &LastUpdate{Result: "reverted", Reason: "Node not Ready within 10m0s", From: "0.3.1", To: "0.3.2",
					At: time.Date(2026, 11, 24, 2, 9, 52, 0, time.UTC)}},
			want: `{"version":"0.3.1","slot":"a","boot":"systemd-boot","entry":"berth-0.3.1.efi","state":"good","trial":false,` +
				`"lastUpdate":{"result":"reverted","reason":"Node not Ready within 10m0s","from":"0.3.1","to":"0.3.2","at":"2026-11-24T02:09:52Z"}}`,
		},
		"staged": {
			s: Status{Version: "0.3.1", Slot: "a", Boot: BootSystemdBoot, Entry: "berth-0.3.1.efi", State: "good",
				LastUpdate: &LastUpdate{Result: ResultStaged, From: "0.3.1", To: "0.3.2", Slot: "b", Entry: "berth-0.3.2+3.efi",
					At:    time.Date(2026, 11, 24, 2, 9, 52, 0, time.UTC),
					Steps: []Step{{Name: "write-root", Ms: 5210, Bytes: 209715200}, {Name: "verify-root", Ms: 1200, Bytes: 209715200}}}},
			want: `{"version":"0.3.1","slot":"a","boot":"systemd-boot","entry":"berth-0.3.1.efi","state":"good","trial":false,` +
				`"lastUpdate":{"result":"staged","from":"0.3.1","to":"0.3.2","slot":"b","entry":"berth-0.3.2+3.efi","at":"2026-11-24T02:09:52Z",` +
				`"steps":[{"name":"write-root","ms":5210,"bytes":209715200},{"name":"verify-root","ms":1200,"bytes":209715200}]}}`,
		},
		"failed": {
			s: Status{Version: "0.3.1", Slot: "a", Boot: BootSystemdBoot, Entry: "berth-0.3.1.efi", State: "good",
				LastUpdate: &LastUpdate{Result: ResultFailed, Reason: "verify-root: data block 7 does not match", From: "0.3.1", To: "0.3.2", Slot: "b",
					Steps: []Step{{Name: "verify-root", Ms: 3, Error: "data block 7 does not match"}}}},
			want: `{"version":"0.3.1","slot":"a","boot":"systemd-boot","entry":"berth-0.3.1.efi","state":"good","trial":false,` +
				`"lastUpdate":{"result":"failed","reason":"verify-root: data block 7 does not match","from":"0.3.1","to":"0.3.2","slot":"b",` +
				`"steps":[{"name":"verify-root","ms":3,"error":"data block 7 does not match"}]}}`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := json.Marshal(c.s)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != c.want {
				t.Errorf("JSON =\n %s\nwant\n %s", b, c.want)
			}
			var back Status
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if string(mustJSON(t, back)) != c.want {
				t.Errorf("round trip changed it: %s", mustJSON(t, back))
			}
		})
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Whatever the UEFI variables hold (they are outside input: written by
// the loader, or by anyone root on the last boot of a writable efivarfs),
// Of gives a status that agrees with itself.
func FuzzOf(f *testing.F) {
	f.Add(true, loader, "berth-0.3.2+3.efi", `\EFI\Linux\berth-0.3.2+2-1.efi`, "b", "0.3.2")
	f.Add(true, loader, "berth-0.3.1.efi", "", "a", "0.3.1")
	f.Add(true, "", "", "", "", "")
	f.Add(false, "", "", "", "a", "0.3.1")
	f.Add(true, loader, "berth-1+2+1-1.efi", `/efi/linux/BERTH-1+0.EFI`, "c", "1")
	f.Fuzz(func(t *testing.T, uefi bool, ldr, entry, countPath, slot, version string) {
		var fw *efivar.Firmware
		if uefi {
			fw = &efivar.Firmware{UEFI: true, Loader: ldr, Entry: entry, BootCountPath: countPath}
		}
		s := Of(Facts{Firmware: fw, Slot: slot, Version: version})
		switch {
		case !uefi && s.Boot != BootDirect:
			t.Fatalf("no UEFI, but boot %q", s.Boot)
		case s.Entry != "" && s.Boot != BootSystemdBoot:
			t.Fatalf("entry %q on a %q boot", s.Entry, s.Boot)
		case s.Trial && s.Entry == "":
			t.Fatalf("trial without an entry: %+v", s)
		case !s.Trial && (s.TriesLeft != 0 || s.TriesDone != 0):
			t.Fatalf("tries counted on a boot not on trial: %+v", s)
		case s.Trial && s.State == "good":
			t.Fatalf("trial of a good entry: %+v", s)
		case countPath != "" && s.Entry != "" && !s.Trial:
			t.Fatalf("LoaderBootCountPath %q set and accepted, but no trial: %+v", countPath, s)
		case s.Version != version || s.Slot != slot:
			t.Fatalf("version/slot %q/%q, want %q/%q as given", s.Version, s.Slot, version, slot)
		case s.LastUpdate != nil:
			t.Fatalf("Of filled LastUpdate")
		}
		if s.Entry == "" && s.Boot == BootSystemdBoot && s.Error == "" {
			t.Fatalf("systemd-boot boot without an entry or an error: %+v", s)
		}
	})
}
