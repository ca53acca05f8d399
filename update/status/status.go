// Package status says, for the boot report and `berth analyze`, which
// version of the image the node runs, from which root slot, and where it
// stands in an update: whether systemd-boot started it on trial (with a
// boot counter) and how many tries it has left.
//
// Of is pure: init reads the facts (the UEFI variables, the kernel command
// line, the image manifest) and Of decides what they say, with package
// bootcount's reading of systemd-boot's names, the same one the update's
// trial decides by.
package status

import (
	"fmt"
	"strings"
	"time"

	"github.com/berth-node/berth/internal/efivar"
	"github.com/berth-node/berth/mounts/partition"
	"github.com/berth-node/berth/update/bootcount"
)

// Boot is what started the kernel.
type Boot string

const (
	// BootSystemdBoot: systemd-boot started a UKI from the ESP, the disk
	// image's way; only such a boot has an entry, and boot counting.
	BootSystemdBoot Boot = "systemd-boot"
	// BootUEFI: UEFI firmware, but not through systemd-boot (the firmware
	// or another loader started the kernel), or its variables could not
	// be read.
	BootUEFI Boot = "uefi"
	// BootDirect: no UEFI; the kernel was started directly (QEMU's
	// -kernel, a BIOS loader), so there is no ESP entry and no trial.
	BootDirect Boot = "direct"
)

// Facts are what init knows of this boot when it asks.
type Facts struct {
	// Firmware is what the UEFI variables say (efivar.State); nil on a
	// boot without UEFI.
	Firmware *efivar.Firmware
	// Slot is the root slot a disk boot mounted its root from
	// (mounts.VerityRoot.Slot): the one whose dm-verity tree has the root
	// hash the UKI seals. Empty when the root is not a slot of the disk
	// (a root in the initramfs, berth.root=, a direct-kernel boot's root
	// disk).
	Slot string
	// SlotBy says how that slot was found (mounts.VerityRoot.SlotBy):
	// "hash", or "hint" when the command line named it (berth.slot=,
	// which older images seal) and its tree has the root hash.
	SlotBy string
	// Version is the image's version (its manifest's berthVersion, which
	// also names its UKI); empty when the manifest could not be read.
	Version string
}

// Status is the boot report's update section.
type Status struct {
	// Version is the image version running; empty when unknown.
	Version string `json:"version,omitempty"`
	// Slot is the root slot the node runs from ("a" or "b"): the one
	// whose dm-verity tree has the root hash the UKI seals. Empty when the
	// root is not a slot of the disk.
	Slot string `json:"slot,omitempty"`
	// SlotBy says how Slot was found: "hash", or "hint" (the command
	// line's berth.slot=, sealed by older images, named it and its tree
	// has the root hash).
	SlotBy string `json:"slotBy,omitempty"`
	// Boot is what started the kernel.
	Boot Boot `json:"boot"`
	// Entry is the booted UKI's file name on the ESP now, its boot
	// counter as systemd-boot left it this boot (berth-0.3.1+2-1.efi);
	// empty unless Boot is BootSystemdBoot.
	Entry string `json:"entry,omitempty"`
	// State is the entry's boot assessment state: "good" (no counter:
	// blessed, or installed so), "indeterminate" (on trial, tries left)
	// or "bad" (no tries left).
	State string `json:"state,omitempty"`
	// Trial says systemd-boot counted this boot: the version has not
	// proven itself yet, and a failure reboots into the previous one.
	Trial bool `json:"trial"`
	// TriesLeft and TriesDone are the entry's counter after this boot
	// (absent is zero): with no tries left, this boot is the last try.
	TriesLeft int `json:"triesLeft,omitempty"`
	TriesDone int `json:"triesDone,omitempty"`
	// Error says what could not be told, or does not add up (an entry
	// that is not a berth UKI, a UKI of another version than the image).
	Error string `json:"error,omitempty"`
	// LastUpdate is the outcome of the last update. The update engine
	// fills it in; Of never does, so boot.json leaves it out until then.
	LastUpdate *LastUpdate `json:"lastUpdate,omitempty"`
}

// LastUpdate is the outcome of the last update the node applied.
type LastUpdate struct {
	// Result is how it ended (for instance "blessed" or "reverted"; the
	// Result* constants are the applying's).
	Result string `json:"result"`
	// Reason says why, in words.
	Reason string `json:"reason,omitempty"`
	// From and To are the versions it went from and to.
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	// Slot is the root slot the update writes ("a" or "b"), also when
	// it stopped before writing; Entry the UKI it staged on the ESP
	// (berth-0.3.2+3.efi), once staged.
	Slot  string `json:"slot,omitempty"`
	Entry string `json:"entry,omitempty"`
	// At is when it ended (wall clock).
	At time.Time `json:"at,omitzero"`
	// Steps are the steps of applying it, in order, up to the one that
	// failed.
	Steps []Step `json:"steps,omitempty"`
}

// How applying an update ends (LastUpdate.Result).
const (
	// ResultStaged: the new version is in the other slot and its UKI on
	// the ESP with a boot counter; the next boot tries it.
	ResultStaged = "staged"
	// ResultRefused: the release was not applied (older, the same
	// version, another architecture, too large...); nothing was written.
	ResultRefused = "refused"
	// ResultFailed: a step failed; the ESP still boots the running
	// version.
	ResultFailed = "failed"
)

// Step is one step of applying an update, timed.
type Step struct {
	// Name says what the step does (update/apply's Step* constants).
	Name string `json:"name"`
	// Ms is how long it took, in milliseconds.
	Ms int64 `json:"ms"`
	// Bytes is how much it fetched, wrote or read, where it moves data.
	Bytes int64 `json:"bytes,omitempty"`
	// Error is why it failed; empty when it did not.
	Error string `json:"error,omitempty"`
}

// Of says what f makes of this boot. It never fails: what it cannot tell
// goes into Status.Error, beside what it can, since the report is read
// most when something is off.
func Of(f Facts) Status {
	s := Status{Version: f.Version, Slot: f.Slot, SlotBy: f.SlotBy, Boot: BootDirect}
	var errs []string
	if f.Slot != "" {
		if _, err := partition.ParseSlot(f.Slot); err != nil {
			errs = append(errs, err.Error())
		}
	}
	fw := f.Firmware
	switch {
	case fw == nil:
	case fw.Loader == "" && fw.Entry == "" && fw.BootCountPath == "":
		s.Boot = BootUEFI
		if fw.Error != "" {
			// The variables that were there to read may have been
			// systemd-boot's.
			errs = append(errs, "whether systemd-boot started this boot is unknown: "+fw.Error)
		}
	default:
		s.Boot = BootSystemdBoot
		e, err := bootcount.Booted(fw.Entry, fw.BootCountPath)
		if err != nil {
			errs = append(errs, fmt.Sprintf("booted entry: %v", err))
			break
		}
		s.Entry, s.State = e.Name, e.State().String()
		// Counted, not State: a try that leaves none is still a trial
		// (systemd-boot names the last one +0-N), as package trial has it.
		s.Trial = e.Counted
		s.TriesLeft, s.TriesDone = e.Left, e.Done
		// systemd-boot's entry id is the file name lowercased, so case
		// does not count.
		if f.Version != "" && !strings.EqualFold(e.Version, f.Version) {
			errs = append(errs, fmt.Sprintf("entry %s is version %s, but the image is %s", e.Name, e.Version, f.Version))
		}
	}
	s.Error = strings.Join(errs, "; ")
	return s
}
