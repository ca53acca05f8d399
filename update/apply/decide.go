package apply

import (
	"fmt"
	"strings"
	"time"

	"github.com/berth-node/berth/mounts/partition"
	"github.com/berth-node/berth/update/bootcount"
	"github.com/berth-node/berth/update/repo"
	"github.com/berth-node/berth/update/status"
)

// Reason names why an update was refused, for boot.json and for tests.
type Reason string

// Refusals by Decide, from the release metadata and this boot's status.
const (
	// ReasonRunning: this boot is not one an update can start from: not
	// a disk boot by systemd-boot, no root slot on the command line, or a
	// status that does not add up.
	ReasonRunning Reason = "running"
	// ReasonTrial: the running version is on trial; it must be blessed
	// (or rolled back) first, so that a version to fall back to stays.
	ReasonTrial Reason = "trial"
	// ReasonArch: the release is for another architecture.
	ReasonArch Reason = "arch"
	// ReasonVersion: the release's version cannot name a UKI
	// (bootcount.CheckVersion).
	ReasonVersion Reason = "version"
	// ReasonSameVersion: the release is the running version.
	ReasonSameVersion Reason = "same-version"
	// ReasonOlder: the release is older, and the trigger did not allow a
	// downgrade.
	ReasonOlder Reason = "older"
	// ReasonUnordered: the running version is not a release version, so
	// an upgrade cannot be told from a downgrade; only an explicit
	// downgrade permission updates such a node.
	ReasonUnordered Reason = "unordered"
	// ReasonNotFirst: systemd-boot would not start the staged version:
	// it starts the newest version with tries left, so an older one
	// staged beside a good newer one never boots.
	ReasonNotFirst Reason = "not-first"
	// ReasonIncomplete: the release lacks its UKI or its root image.
	ReasonIncomplete Reason = "incomplete"
	// ReasonRootHash: the release's root hash is not one berth's
	// dm-verity takes (64 lower-case hex digits of a sha256).
	ReasonRootHash Reason = "root-hash"
	// ReasonTooLarge: the root image does not fit the slot.
	ReasonTooLarge Reason = "too-large"
	// ReasonRootImage: the root image's length is no slot image's (data
	// blocks then their hash tree).
	ReasonRootImage Reason = "root-image"
)

// Refusals by Apply, before it writes anything.
const (
	// ReasonTarget: the target is the running slot's device, in use, or
	// not a device a slot can be.
	ReasonTarget Reason = "target"
	// ReasonUKI: the release's UKI does not boot what the update writes:
	// another slot, root hash, version or architecture, or no UKI berth
	// can read.
	ReasonUKI Reason = "uki"
	// ReasonESP: a UKI on the ESP that stays there boots the target slot.
	ReasonESP Reason = "esp"
)

// Refusal is an update refused with nothing written that changes what
// the machine boots.
type Refusal struct {
	Reason Reason
	// Detail says what was wrong, naming the values.
	Detail string
}

func (r *Refusal) Error() string { return "update refused (" + string(r.Reason) + "): " + r.Detail }

func refuse(reason Reason, format string, args ...any) *Refusal {
	return &Refusal{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// Input is what Decide weighs.
type Input struct {
	// Running is this boot's update status (status.Of): the version, the
	// root slot the root was found in and the UKI systemd-boot started.
	Running status.Status
	// Arch is the node's architecture (GOARCH).
	Arch string
	// Release is the release the repository offers (repo.Client.Latest).
	Release repo.Release
	// SlotSize is the other root slot's size in bytes (its partition's).
	SlotSize int64
	// AllowDowngrade says the trigger explicitly allows an older version.
	AllowDowngrade bool
}

// Plan is an update Decide accepted: what Apply writes, and where.
type Plan struct {
	Release repo.Release
	// Arch is the node's architecture.
	Arch string
	// From and To are the running and the new version.
	From, To string
	// Running is the UKI this boot started from, good.
	Running bootcount.Entry
	// RunningSlot is the slot this boot's root is in; Slot the other
	// one, which the update writes.
	RunningSlot, Slot partition.Slot
	// SlotSize is Slot's size in bytes.
	SlotSize int64
	// Staged is the UKI's entry on the ESP once staged: To, three tries.
	Staged bootcount.Entry
	// Root is the root image's layout in the slot.
	Root Layout
}

// Layout is a root image as it lies in a slot, from offset 0: its
// DataBlocks blocks of 4096 bytes (the erofs filesystem), then at once
// its dm-verity hash tree (no superblock), as image/disk writes slot a.
// The new UKI's berth.verity= must say the same.
type Layout struct {
	// Bytes is the image's length, as the repository signed it.
	Bytes int64
	// DataBlocks is the number of data blocks; the tree starts at block
	// HashStartBlock, right after them.
	DataBlocks, HashStartBlock uint64
}

// Decide says whether in's release can be applied to this node, and
// where: into the slot the running one is not, under the UKI name the
// release's version gives. A refusal is a *Refusal naming its reason.
// It is pure: the caller reads the status, the slot's size and the
// release, and Apply acts on the plan.
func Decide(in Input) (Plan, error) {
	run := in.Running
	if run.Boot != status.BootSystemdBoot {
		return Plan{}, refuse(ReasonRunning, "this boot was started by %s, not by systemd-boot from the disk's ESP: there is no slot to update in place", run.Boot)
	}
	if run.Error != "" {
		return Plan{}, refuse(ReasonRunning, "this boot's status does not add up: %s", run.Error)
	}
	slot, err := partition.ParseSlot(run.Slot)
	if err != nil {
		return Plan{}, refuse(ReasonRunning, "the running root slot: %v", err)
	}
	running, err := bootcount.Parse(run.Entry)
	if err != nil {
		return Plan{}, refuse(ReasonRunning, "the running UKI: %v", err)
	}
	if running.State() != bootcount.Good {
		return Plan{}, refuse(ReasonTrial, "the running UKI %s is %v (on trial): it must be blessed or rolled back before another update, so that a version to fall back to stays", running.Name, running.State())
	}
	if run.Version == "" {
		return Plan{}, refuse(ReasonRunning, "the running version is unknown (the image manifest could not be read)")
	}

	rel := in.Release
	to := rel.Version.String()
	if rel.Arch != in.Arch {
		return Plan{}, refuse(ReasonArch, "release %s is for %q, this node is %q", to, rel.Arch, in.Arch)
	}
	if err := bootcount.CheckVersion(to); err != nil {
		return Plan{}, refuse(ReasonVersion, "release version: %v", err)
	}
	from, err := repo.ParseVersion(run.Version)
	switch {
	case strings.EqualFold(run.Version, to):
		return Plan{}, refuse(ReasonSameVersion, "release %s is the running version", to)
	case err != nil && !in.AllowDowngrade:
		return Plan{}, refuse(ReasonUnordered, "the running version %q is not a release version, so release %s cannot be told newer or older; only an explicit downgrade permission updates this node", run.Version, to)
	case err != nil:
		// Allowed either way.
	case rel.Version.Compare(from) == 0:
		return Plan{}, refuse(ReasonSameVersion, "release %s is the running version %s", to, run.Version)
	case rel.Version.Compare(from) < 0 && !in.AllowDowngrade:
		return Plan{}, refuse(ReasonOlder, "release %s is older than the running version %s, and the trigger does not allow a downgrade", to, run.Version)
	}
	staged, err := bootcount.Staged(to)
	if err != nil {
		return Plan{}, refuse(ReasonVersion, "release version: %v", err)
	}
	// Stage keeps the running UKI and the new one; systemd-boot must
	// pick the new one, or the update never boots. It orders by version,
	// so an allowed downgrade of one release to an older one ends here:
	// the good, newer running UKI would always come first.
	if first, _ := bootcount.Pick([]bootcount.Entry{running, staged}); first != staged {
		return Plan{}, refuse(ReasonNotFirst, "systemd-boot orders UKIs by version and would keep starting %s over %s: a version it does not sort first cannot be tried this way", running.Name, staged.Name)
	}

	for _, k := range repo.Kinds() {
		if t, ok := rel.Targets[k]; !ok || t.Length <= 0 {
			return Plan{}, refuse(ReasonIncomplete, "release %s has no %s target", to, k)
		}
	}
	if err := checkRootHash(rel.RootHash); err != nil {
		return Plan{}, refuse(ReasonRootHash, "release %s: %v", to, err)
	}
	size := rel.Targets[repo.KindRoot].Length
	if size > in.SlotSize {
		return Plan{}, refuse(ReasonTooLarge, "release %s's root image is %d bytes, slot %s holds %d", to, size, slot.Other(), in.SlotSize)
	}
	blocks, ok := dataBlocksFor(size)
	if !ok {
		return Plan{}, refuse(ReasonRootImage, "release %s's root image of %d bytes is not a slot image: no number of 4096-byte data blocks and their dm-verity hash tree adds up to it", to, size)
	}
	return Plan{
		Release: rel, Arch: in.Arch, From: run.Version, To: to,
		Running: running, RunningSlot: slot, Slot: slot.Other(), SlotSize: in.SlotSize,
		Staged: staged, Root: Layout{Bytes: size, DataBlocks: blocks, HashStartBlock: blocks},
	}, nil
}

// Refused is boot.json's record of a release Decide refused with err,
// at the time at: nothing was written.
func Refused(in Input, err error, at time.Time) status.LastUpdate {
	lu := status.LastUpdate{Result: status.ResultRefused, Reason: err.Error(), From: in.Running.Version,
		To: in.Release.Version.String(), At: at.UTC()}
	if s, perr := partition.ParseSlot(in.Running.Slot); perr == nil {
		lu.Slot = string(s.Other())
	}
	return lu
}

// checkRootHash takes what berth's dm-verity (sha256, mounts/verity)
// accepts, in the lower case berth.verity= carries it.
func checkRootHash(h string) error {
	if len(h) != 64 {
		return fmt.Errorf("root hash %q: want 64 hex digits (sha256), have %d characters", h, len(h))
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return fmt.Errorf("root hash %q: %q at %d is not a lower-case hex digit", h, c, i)
		}
	}
	return nil
}
