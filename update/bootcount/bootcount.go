// Package bootcount knows the names systemd-boot's automatic boot
// assessment gives berth's unified kernel images (UKIs) on the ESP, and
// which of them systemd-boot boots.
//
// A UKI sits at EFI/Linux/berth-<version>.efi. An update stages the next
// version as berth-<version>+3.efi: three tries. Each time systemd-boot
// boots it, it first renames the file, +3 → +2-1 → +1-2 → +0-3, and tells
// the OS the new name in the LoaderBootCountPath EFI variable. A boot that
// proves itself is blessed (the counter is renamed away: berth-<version>.efi,
// "good"); one that fails is marked bad (+0-N). An entry with no tries
// left sorts after every other, so the next boot starts the previous
// version again.
//
// Everything here is pure and follows systemd 252's code, the version of
// Debian's systemd-boot-efi the disk image carries: the counter parser
// (config_entry_parse_tries in src/boot/efi/boot.c), the entry order
// (config_entry_compare, same file), and the good and bad names
// (make_good, make_bad in src/boot/bless-boot.c). Package esp acts on the
// ESP with these names; package trial decides when to.
package bootcount

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

const (
	// Dir is where systemd-boot finds UKIs, relative to the ESP's root.
	Dir = "EFI/Linux"
	// Prefix starts every berth UKI's file name.
	Prefix = "berth-"
	// Suffix ends every UKI's file name; systemd-boot matches it without
	// regard to case.
	Suffix = ".efi"
	// Tries is how many boots a staged version gets (kernel-install's
	// usual /etc/kernel/tries, and the walkthrough in systemd's
	// AUTOMATIC_BOOT_ASSESSMENT.md).
	Tries = 3
	// MaxCount is the largest counter systemd-boot accepts (its INT_MAX);
	// a name with a larger one is not boot counted at all.
	MaxCount = math.MaxInt32
	// MaxVersion is the longest version CheckVersion accepts, as
	// image/disk does for the UKI it builds.
	MaxVersion = 64
)

// State is what boot assessment makes of an entry.
type State int

const (
	// Good: no counter; systemd-boot boots it without counting.
	Good State = iota
	// Indeterminate: tries left; on trial.
	Indeterminate
	// Bad: no tries left; sorted after every good or indeterminate entry.
	Bad
)

func (s State) String() string {
	switch s {
	case Good:
		return "good"
	case Indeterminate:
		return "indeterminate"
	case Bad:
		return "bad"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Entry is one berth UKI as systemd-boot sees its file name.
type Entry struct {
	// Name is the file name in Dir, as found there.
	Name string
	// Version is the part between Prefix and the counter (or Suffix).
	// berth's UKIs carry the same version in their os-release
	// (VERSION_ID), which is what systemd-boot orders them by.
	Version string
	// Counted says the name carries a counter systemd-boot accepts.
	Counted bool
	// Left and Done are the counter's tries left and tries done; zero
	// when not Counted.
	Left, Done int
}

// State is the entry's boot assessment state.
func (e Entry) State() State {
	switch {
	case !e.Counted:
		return Good
	case e.Left > 0:
		return Indeterminate
	}
	return Bad
}

func (e Entry) String() string { return e.Name }

// Parse reads a file name in Dir the way systemd-boot does. A counter that
// systemd-boot would not accept (no digits, "-" without digits, a number
// over MaxCount, anything between the counter and the suffix) is no
// counter: the entry is good, and its version keeps the "+" and what
// follows, as the name is then booted as it is. Parse fails for a name
// systemd-boot would not list (hidden, no .efi suffix, auto-*) or that is
// not a berth UKI.
func Parse(name string) (Entry, error) {
	switch {
	case name == "":
		return Entry{}, errors.New("UKI file name is empty")
	case strings.ContainsAny(name, `/\`+"\x00"):
		return Entry{}, fmt.Errorf("UKI file name %q: not a plain file name", name)
	case name[0] == '.':
		return Entry{}, fmt.Errorf("UKI file name %q: hidden, systemd-boot skips it", name)
	case !hasSuffixFold(name, Suffix):
		return Entry{}, fmt.Errorf("UKI file name %q: no %s suffix, systemd-boot skips it", name, Suffix)
	case !strings.HasPrefix(name, Prefix):
		return Entry{}, fmt.Errorf("UKI file name %q: not a berth UKI (want %s<version>%s)", name, Prefix, Suffix)
	}
	e := Entry{Name: name}
	if c, ok := parseTries(name, Suffix); ok {
		e.Version = name[len(Prefix) : c.plus-1]
		e.Counted, e.Left, e.Done = true, c.left, c.done
	} else {
		e.Version = name[len(Prefix) : len(name)-len(Suffix)]
	}
	if e.Version == "" {
		return Entry{}, fmt.Errorf("UKI file name %q: no version after %q", name, Prefix)
	}
	return e, nil
}

// counter is where a name's counter is and what it says.
type counter struct {
	plus       int // index just past the last '+'
	left, done int
	tail       int // index of what follows the counter (the suffix)
}

// parseTries is config_entry_parse_tries() of systemd 252's
// src/boot/efi/boot.c: the counter starts after the last '+' in the whole
// name; "LEFT" needs at least one digit, "-DONE" is optional but needs a
// digit when the '-' is there; each must fit in a uint64 and be at most
// INT_MAX; and the suffix (case-insensitive) must follow at once ("boot
// counter in the middle of the name?"). Anything else is no counter.
func parseTries(name, suffix string) (counter, bool) {
	p := strings.LastIndexByte(name, '+')
	if p < 0 {
		return counter{}, false
	}
	c := counter{plus: p + 1}
	left, k, ok := parseNumber(name, c.plus)
	if !ok || left > MaxCount {
		return counter{}, false
	}
	done := uint64(0)
	if k < len(name) && name[k] == '-' {
		if done, k, ok = parseNumber(name, k+1); !ok || done > MaxCount {
			return counter{}, false
		}
	}
	if !strings.EqualFold(name[k:], suffix) {
		return counter{}, false
	}
	c.left, c.done, c.tail = int(left), int(done), k
	return c, true
}

// parseNumber is systemd-boot's parse_number16() with a tail: at least
// one ASCII digit, no sign, failing on uint64 overflow. It returns the
// value and the index after the digits.
func parseNumber(s string, i int) (uint64, int, bool) {
	if i >= len(s) || !isDigit(s[i]) {
		return 0, i, false
	}
	var u uint64
	for ; i < len(s) && isDigit(s[i]); i++ {
		d := uint64(s[i] - '0')
		if u > (math.MaxUint64-d)/10 {
			return 0, i, false
		}
		u = u*10 + d
	}
	return u, i, true
}

func hasSuffixFold(s, suffix string) bool {
	return len(s) >= len(suffix) && strings.EqualFold(s[len(s)-len(suffix):], suffix)
}

// Tried is the entry after systemd-boot starts it once more: a counted
// name becomes "+LEFT-DONE" with one try less (never below zero) and one
// more done (never above MaxCount), with the suffix written as ".efi"
// (config_entry_parse_tries' next_name). An entry without a counter is not
// renamed.
func (e Entry) Tried() Entry {
	c, ok := parseTries(e.Name, Suffix)
	if !ok {
		return e
	}
	return reparse(e.Name[:c.plus]+strconv.Itoa(max(c.left-1, 0))+"-"+strconv.Itoa(min(c.done+1, MaxCount))+Suffix, e)
}

// reparse is the entry that name, made from e's, reads as: what
// systemd-boot will see next. It cannot fail, as name keeps e's prefix and
// version and ends in a suffix; e is returned should it ever.
func reparse(name string, e Entry) Entry {
	n, err := Parse(name)
	if err != nil {
		return e
	}
	return n
}

// Blessed is the entry marked good: the counter renamed away, the suffix
// kept as it is (systemd-bless-boot's make_good). An entry without a
// counter already is good. A version with a '+' in it (CheckVersion keeps
// berth's out) can make the blessed name read as counted again, as it
// would for systemd-boot: "berth-1+2+1-1.efi" blesses to "berth-1+2.efi",
// version 1 with two tries left.
func (e Entry) Blessed() Entry {
	c, ok := parseTries(e.Name, Suffix)
	if !ok {
		return e
	}
	return reparse(e.Name[:c.plus-1]+e.Name[c.tail:], e)
}

// MarkedBad is the entry with no tries left, keeping the tries done:
// "+0" when none were done, "+0-DONE" otherwise (systemd-bless-boot's
// make_bad). An entry without a counter cannot be marked bad this way
// (systemd-bless-boot refuses: "not booted with boot counting in effect")
// and is returned as it is.
func (e Entry) MarkedBad() Entry {
	c, ok := parseTries(e.Name, Suffix)
	if !ok {
		return e
	}
	name := e.Name[:c.plus] + "0"
	if c.done != 0 {
		name += "-" + strconv.Itoa(c.done)
	}
	return reparse(name+e.Name[c.tail:], e)
}

// Staged is the entry an update writes for version: Tries tries left.
func Staged(version string) (Entry, error) {
	if err := CheckVersion(version); err != nil {
		return Entry{}, err
	}
	return Entry{Name: Prefix + version + "+" + strconv.Itoa(Tries) + Suffix, Version: version, Counted: true, Left: Tries}, nil
}

// CheckVersion keeps a version to what a UKI's file name can hold and
// systemd-boot reads back as the same version: 1 to MaxVersion letters,
// digits, '.', '_', '-' or '~' (image/disk's rule for the UKI it
// builds). A '+' above all would start a counter once the name is blessed:
// "berth-1+2.efi" is version 1 with two tries left.
func CheckVersion(v string) error {
	if v == "" || len(v) > MaxVersion {
		return fmt.Errorf("version %q: want 1 to %d characters", v, MaxVersion)
	}
	for _, r := range v {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune("._-~", r)) {
			return fmt.Errorf("version %q: %q cannot be in a UKI's file name (letters, digits, '.', '_', '-', '~')", v, r)
		}
	}
	return nil
}

// Booted is the entry systemd-boot started this boot, from its EFI
// variables. LoaderBootCountPath (volatile, so always this boot's) is set
// only when systemd-boot renamed a counted entry before starting it, and
// holds the new name, the one on the ESP now: "\EFI\Linux\berth-2+2-1.efi".
// Without it the boot is not counted, and LoaderEntrySelected names the
// entry (its id: the file name lowercased, which the case-insensitive FAT
// of the ESP still finds). An empty string is a variable that is not set.
func Booted(entrySelected, bootCountPath string) (Entry, error) {
	if bootCountPath != "" {
		p := strings.ReplaceAll(bootCountPath, `\`, "/")
		dir, name := "", p
		if i := strings.LastIndexByte(p, '/'); i >= 0 {
			dir, name = p[:i], p[i+1:]
		}
		if !strings.EqualFold(dir, "/"+Dir) {
			return Entry{}, fmt.Errorf("LoaderBootCountPath %q: not a UKI in \\EFI\\Linux", bootCountPath)
		}
		e, err := Parse(name)
		if err != nil {
			return Entry{}, fmt.Errorf("LoaderBootCountPath %q: %w", bootCountPath, err)
		}
		if !e.Counted {
			return Entry{}, fmt.Errorf("LoaderBootCountPath %q: no boot counter in the name", bootCountPath)
		}
		return e, nil
	}
	if entrySelected == "" {
		return Entry{}, errors.New("neither LoaderBootCountPath nor LoaderEntrySelected is set: not started by systemd-boot")
	}
	e, err := Parse(entrySelected)
	if err != nil {
		return Entry{}, fmt.Errorf("LoaderEntrySelected %q: %w", entrySelected, err)
	}
	return e, nil
}

// Compare orders two berth UKIs as systemd-boot 252's
// config_entry_compare() does (src/boot/efi/boot.c): negative when a comes
// first. Entries with no tries left go last; then newer versions first;
// then the file names lowercased (the entry ids) compared as versions,
// larger first; then, when both are counted, more tries left first and
// fewer tries done first. The sort key (os-release ID=berth) and the
// machine id (none) are the same for every berth UKI, so they never
// decide, and the version compared is VERSION_ID, which image/disk writes
// equal to the version in the file name.
func Compare(a, b Entry) int {
	if r := cmpBool(a.Counted && a.Left == 0, b.Counted && b.Left == 0); r != 0 {
		return r
	}
	if r := -VersionCompare(a.Version, b.Version); r != 0 {
		return r
	}
	if r := -VersionCompare(lower(a.Name), lower(b.Name)); r != 0 {
		return r
	}
	if !a.Counted || !b.Counted {
		return 0
	}
	if r := -cmpInt(a.Left, b.Left); r != 0 {
		return r
	}
	return cmpInt(a.Done, b.Done)
}

// lower is systemd-boot's strtolower16: ASCII letters only.
func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}

// Sort puts entries in systemd-boot's menu order. Like systemd-boot's
// sort_pointer_array (an insertion sort), it is stable.
func Sort(entries []Entry) { slices.SortStableFunc(entries, Compare) }

// Pick is the entry systemd-boot boots from entries: the first in its
// order. That holds for berth's loader.conf, which names no default, and
// as long as nothing sets LoaderEntryDefault or LoaderEntryOneShot.
func Pick(entries []Entry) (Entry, bool) {
	if len(entries) == 0 {
		return Entry{}, false
	}
	s := slices.Clone(entries)
	Sort(s)
	return s[0], true
}
