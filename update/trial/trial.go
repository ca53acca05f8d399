// Package trial decides, for a boot of a newly staged version, whether to
// keep waiting, bless the version, or roll back to the previous one. A
// trial boot is one whose UKI systemd-boot started with a boot counter
// (package bootcount). It passes once kubelet's Node has stayed Ready for
// a soak time, and fails when the Node is not Ready by a deadline after
// the boot started: then the version is marked bad and the machine
// rebooted, so that systemd-boot starts the previous version.
//
// Decide is pure: it looks at one Observation and says what to do now.
// The caller observes the Node, acts on the ESP (package esp) and asks
// again at the latest when a Wait says.
package trial

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/berth-node/berth/update/bootcount"
)

// Defaults for Config.
const (
	// DefaultSoak is how long the Node must stay Ready: long enough for
	// the kubelet to have synced pods and for a crash loop to show.
	DefaultSoak = 3 * time.Minute
	// DefaultReadyDeadline is how long after the boot started the Node
	// has to be Ready: a slow image pull or a cold cache still fits.
	DefaultReadyDeadline = 10 * time.Minute
)

// Setting names, as errors name them.
const (
	SettingSoak          = "update.trial.soak"
	SettingReadyDeadline = "update.trial.readyDeadline"
)

// Config holds a trial's timings. Zero means the default.
type Config struct {
	// Soak is how long the Node must be Ready without a break before
	// the version is blessed.
	Soak time.Duration
	// ReadyDeadline is how long after the boot started the Node has to
	// become Ready (the Ready streak the soak counts must start by then).
	ReadyDeadline time.Duration
}

// WithDefaults fills in zero fields.
func (c Config) WithDefaults() Config {
	if c.Soak == 0 {
		c.Soak = DefaultSoak
	}
	if c.ReadyDeadline == 0 {
		c.ReadyDeadline = DefaultReadyDeadline
	}
	return c
}

// Validate checks c after defaults. The upper bounds keep a typo from
// leaving a broken node out of service for most of a day; the lower ones
// still let a test VM run a trial in seconds.
func (c Config) Validate() error {
	c = c.WithDefaults()
	var errs []error
	if c.Soak < time.Second || c.Soak > time.Hour {
		errs = append(errs, fmt.Errorf("%s: %v: want 1s to 1h", SettingSoak, c.Soak))
	}
	if c.ReadyDeadline < 10*time.Second || c.ReadyDeadline > 2*time.Hour {
		errs = append(errs, fmt.Errorf("%s: %v: want 10s to 2h", SettingReadyDeadline, c.ReadyDeadline))
	}
	return errors.Join(errs...)
}

// Observation is what berth knows at one moment of a boot.
type Observation struct {
	// Booted is the entry systemd-boot started (bootcount.Booted).
	Booted bootcount.Entry
	// Entries are the UKIs in EFI/Linux now, Booted among them: what
	// systemd-boot will choose from after a rollback.
	Entries []bootcount.Entry
	// BootStart is when this boot started; Now is the moment observed.
	BootStart, Now time.Time
	// Ready says the Node's Ready condition is True now, and ReadySince
	// since when, without a break, as berth saw it in this boot. Not the
	// condition's lastTransitionTime: the Node object outlives a reboot,
	// and a Ready from before it proves nothing about this version.
	Ready      bool
	ReadySince time.Time
}

// Action is what to do.
type Action int

const (
	// None: not a trial boot, or nothing left to decide.
	None Action = iota
	// Wait: look again, at the latest at Decision.Until.
	Wait
	// Bless: the version passed; rename its counter away.
	Bless
	// Revert: the version failed; mark it bad and reboot into
	// Decision.To.
	Revert
)

func (a Action) String() string {
	switch a {
	case None:
		return "none"
	case Wait:
		return "wait"
	case Bless:
		return "bless"
	case Revert:
		return "revert"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Decision is what Decide says.
type Decision struct {
	Action Action
	// Until is, for Wait, when to decide again at the latest.
	Until time.Time
	// To is, for Revert, the entry systemd-boot will start once the
	// booted one is marked bad.
	To bootcount.Entry
	// Reason says why, for the log and the boot report.
	Reason string
}

// Decide says what to do about the booted entry at o.Now. It fails only
// on an invalid Config or an Observation that cannot be true.
func Decide(c Config, o Observation) (Decision, error) {
	if err := c.Validate(); err != nil {
		return Decision{}, err
	}
	c = c.WithDefaults()
	if !o.Booted.Counted {
		return Decision{Action: None, Reason: fmt.Sprintf("not a trial boot: %s has no boot counter", o.Booted.Name)}, nil
	}
	switch {
	case o.BootStart.IsZero() || o.Now.IsZero():
		return Decision{}, errors.New("trial: boot start and current time must be set")
	case o.Now.Before(o.BootStart):
		return Decision{}, fmt.Errorf("trial: now (%s) is before the boot started (%s)", stamp(o.Now), stamp(o.BootStart))
	case o.Ready && (o.ReadySince.Before(o.BootStart) || o.ReadySince.After(o.Now)):
		return Decision{}, fmt.Errorf("trial: Node Ready since %s, outside this boot (%s to %s): readiness must be seen in this boot",
			stamp(o.ReadySince), stamp(o.BootStart), stamp(o.Now))
	}
	// LoaderEntrySelected is lowercased; FAT finds the file all the same.
	booted := slices.IndexFunc(o.Entries, func(e bootcount.Entry) bool { return strings.EqualFold(e.Name, o.Booted.Name) })
	if booted < 0 {
		return Decision{}, fmt.Errorf("trial: booted entry %s is not among the UKIs on the ESP", o.Booted.Name)
	}
	deadline := o.BootStart.Add(c.ReadyDeadline)

	if o.Ready && !o.ReadySince.After(deadline) {
		blessAt := o.ReadySince.Add(c.Soak)
		if !o.Now.Before(blessAt) {
			return Decision{Action: Bless, Reason: fmt.Sprintf("kubelet Ready for %v since %s", o.Now.Sub(o.ReadySince), stamp(o.ReadySince))}, nil
		}
		return Decision{Action: Wait, Until: blessAt, Reason: fmt.Sprintf("kubelet Ready since %s; soaking %v, until %s", stamp(o.ReadySince), c.Soak, stamp(blessAt))}, nil
	}
	if o.Now.Before(deadline) {
		return Decision{Action: Wait, Until: deadline, Reason: fmt.Sprintf("waiting for kubelet Ready, at most %v after boot (until %s)", c.ReadyDeadline, stamp(deadline))}, nil
	}

	reason := fmt.Sprintf("kubelet not Ready within %v", c.ReadyDeadline)
	if o.Ready {
		reason = fmt.Sprintf("kubelet not Ready within %v (Ready only since %s)", c.ReadyDeadline, stamp(o.ReadySince))
	}
	// Rolling back only makes sense to another version: with none,
	// marking this one bad and rebooting would start it again, forever.
	others := slices.Clone(o.Entries)
	others[booted] = others[booted].MarkedBad()
	next, _ := bootcount.Pick(others)
	if strings.EqualFold(next.Version, others[booted].Version) { // FAT: names differing in case are one file
		return Decision{Action: None, Reason: reason + fmt.Sprintf("; no other version to roll back to, staying on %s", o.Booted.Version)}, nil
	}
	return Decision{Action: Revert, To: next, Reason: fmt.Sprintf("rolled back: %s; next boot starts %s", reason, next.Name)}, nil
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
