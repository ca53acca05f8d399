package diskboot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/berth-node/berth/mounts/partition"
	"github.com/berth-node/berth/mounts/verity"
)

// A release has one signed UKI, which boots from slot a on one node and
// from slot b on another, so its command line cannot say which slot holds
// its root. It seals the root hash instead, and the root is the slot
// whose dm-verity tree has that hash at its top: berth reads the top block
// of each root slot on the boot disk and hashes it (verity.Param.TopHash),
// before anything is set up. The choice is only where to look: the whole
// root is still read through dm-verity before the switch, so a slot whose
// top block matches but whose data does not still stops the boot.

// How the root slot was chosen (mounts.VerityRoot.SlotBy).
const (
	// SlotByHash: the command line names no slot, and the slot whose tree
	// has the sealed root hash at its top was chosen.
	SlotByHash = "hash"
	// SlotByHint: the command line names the slot (berth.slot=, which
	// older images seal), and its tree has the sealed root hash.
	SlotByHint = "hint"
)

// SlotGrace is how long, once one root slot's partition is there, berth
// waits for the other's: the kernel adds a disk's partitions together, so
// this only covers the moment between the two, and a disk without the
// other slot boots from the one it has.
const SlotGrace = 5 * time.Second

// SlotRead is what was read from one root slot's partition.
type SlotRead struct {
	Slot partition.Slot
	// Partition is its /dev path; empty when the boot disk has none.
	Partition string
	// Top is the block at verity.Param.TopOffset; nil when Err is set.
	Top []byte
	// Err says why there is no Top: no such partition, or a failed read.
	Err error
}

// SlotChoice is the root slot ChooseSlot picked.
type SlotChoice struct {
	Slot      partition.Slot
	Partition string
	// By is SlotByHash or SlotByHint.
	By string
	// Both says both slots hold the root (the same release in each):
	// slot a was taken, so that every boot takes the same one.
	Both bool
}

// ChooseSlot decides which root slot holds the root p seals, from what
// was read of each slot's partition: the one whose top block hashes to
// p.RootHash; slot a when both do. hint is the command line's berth.slot=
// value ("" when there is none): that slot must hold the root, and any
// other outcome is an error. No slot holding the root is an error naming
// each partition looked at and what it holds, for a node never boots a
// root it cannot verify. It is pure: the reading is findSlots' and
// readSlots'.
func ChooseSlot(reads []SlotRead, p verity.Param, hint string) (SlotChoice, error) {
	var matched []SlotRead
	var seen []string
	for i, r := range reads {
		for _, q := range reads[:i] {
			if q.Slot == r.Slot {
				return SlotChoice{}, fmt.Errorf("two partitions for root slot %s (%s, %s): not choosing one", r.Slot, q.Partition, r.Partition)
			}
		}
		desc, ok := describeSlot(r, p)
		seen = append(seen, desc)
		if ok {
			matched = append(matched, r)
		}
	}
	slices.SortFunc(matched, func(a, b SlotRead) int { return strings.Compare(string(a.Slot), string(b.Slot)) })
	if hint != "" {
		want, err := partition.ParseSlot(hint)
		if err != nil {
			return SlotChoice{}, fmt.Errorf("the command line's root slot: %w", err)
		}
		for _, m := range matched {
			if m.Slot == want {
				return SlotChoice{Slot: m.Slot, Partition: m.Partition, By: SlotByHint, Both: len(matched) > 1}, nil
			}
		}
		msg := fmt.Sprintf("the command line's %s=%s names %s, which holds another root than the sealed root hash %s (%s)",
			partition.SlotKey, want, want.PartName(), p.RootHash, strings.Join(seen, "; "))
		if len(matched) > 0 {
			msg += fmt.Sprintf("; slot %s holds it, but this UKI boots only slot %s", matched[0].Slot, want)
		}
		return SlotChoice{}, errors.New(msg)
	}
	switch len(matched) {
	case 0:
		if len(seen) == 0 {
			return SlotChoice{}, fmt.Errorf("no root slot partition (%s, %s) to look for root hash %s in",
				partition.SlotA.PartName(), partition.SlotB.PartName(), p.RootHash)
		}
		return SlotChoice{}, fmt.Errorf("no root slot holds the root this UKI seals (root hash %s): %s; not booting a root that cannot be verified",
			p.RootHash, strings.Join(seen, "; "))
	case 1:
		return SlotChoice{Slot: matched[0].Slot, Partition: matched[0].Partition, By: SlotByHash}, nil
	}
	return SlotChoice{Slot: matched[0].Slot, Partition: matched[0].Partition, By: SlotByHash, Both: true}, nil
}

// describeSlot says what r holds, for ChooseSlot's errors, and whether
// it is p's root.
func describeSlot(r SlotRead, p verity.Param) (string, bool) {
	name := r.Slot.PartName()
	if r.Partition != "" {
		name += " (" + r.Partition + ")"
	}
	if r.Err != nil {
		return name + ": " + r.Err.Error(), false
	}
	h, err := p.TopHash(r.Top)
	if err != nil {
		return name + ": " + err.Error(), false
	}
	if h == p.RootHash {
		return name + ": holds it", true
	}
	return fmt.Sprintf("%s: its tree's top hashes to %s", name, h), false
}

// findSlots waits up to wait for the boot disk's root slot partitions
// (berth-root-a, berth-root-b) and returns one SlotRead for each slot, a
// first, with Partition set, or Err when the disk has none for it. Once
// one is there (its device node ready), the other gets grace more. Root
// slot partitions on two disks are an error at once, as two berth disks
// were before: which disk's data partition is the node's is not
// something to guess.
func findSlots(ctx context.Context, classBlock string, wait, grace time.Duration, ready func(string) bool) ([]SlotRead, error) {
	slots := []partition.Slot{partition.SlotA, partition.SlotB}
	deadline := time.Now().Add(wait)
	var graceEnd time.Time
	for {
		found := make([][]partition.Candidate, len(slots))
		disks := map[string][]string{}
		for i, s := range slots {
			cs, err := partition.FindNamedDisks(classBlock, s.PartName())
			if err != nil {
				return nil, err
			}
			found[i] = cs
			for _, c := range cs {
				disks[c.Disk] = append(disks[c.Disk], c.Partition)
			}
		}
		if len(disks) > 1 {
			var ds []string
			for d, ps := range disks {
				ds = append(ds, fmt.Sprintf("%s (%s)", d, strings.Join(ps, ", ")))
			}
			slices.Sort(ds)
			return nil, fmt.Errorf("root slot partitions on %d disks: %s: attach only one berth disk", len(disks), strings.Join(ds, ", "))
		}
		reads := make([]SlotRead, len(slots))
		complete, some := true, false
		for i, s := range slots {
			reads[i].Slot = s
			switch cs := found[i]; {
			case len(cs) > 1:
				var ps []string
				for _, c := range cs {
					ps = append(ps, c.Partition)
				}
				return nil, fmt.Errorf("%d partitions named %s (%s): not choosing one", len(cs), s.PartName(), strings.Join(ps, ", "))
			case len(cs) == 1 && ready(cs[0].Partition):
				reads[i].Partition = cs[0].Partition
				some = true
			case len(cs) == 1:
				reads[i].Partition = cs[0].Partition
				reads[i].Err = errors.New("its device node did not appear")
				complete = false
			default:
				reads[i].Err = errors.New("no such partition on the boot disk")
				complete = false
			}
		}
		now := time.Now()
		if some && graceEnd.IsZero() {
			graceEnd = now.Add(grace)
		}
		switch {
		case complete:
			return reads, nil
		case some && now.After(graceEnd):
			return reads, nil
		case !some && now.After(deadline):
			var nodeless []string
			for _, r := range reads {
				if r.Partition != "" {
					nodeless = append(nodeless, r.Partition)
				}
			}
			if len(nodeless) > 0 {
				return nil, fmt.Errorf("root slot partitions %s have no device node after %s", strings.Join(nodeless, ", "), wait)
			}
			return nil, fmt.Errorf("no partition named %s or %s appeared within %s (is the disk attached, and its driver (nvme) in the image?)",
				partition.SlotA.PartName(), partition.SlotB.PartName(), wait)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the root slot partitions: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// readSlots reads the top block of each slot's partition that findSlots
// found, opening it with open (os.Open on a node), and sets Top or Err.
func readSlots(reads []SlotRead, p verity.Param, open func(string) (*os.File, error)) {
	for i := range reads {
		if reads[i].Err != nil {
			continue
		}
		f, err := open(reads[i].Partition)
		if err != nil {
			reads[i].Err = fmt.Errorf("opening it: %w", err)
			continue
		}
		reads[i].Top, reads[i].Err = ReadTop(f, p)
		f.Close()
	}
}

// ReadTop reads the block at p.TopOffset from a root slot's partition:
// the block whose hash ChooseSlot compares with the root hash.
func ReadTop(r io.ReaderAt, p verity.Param) ([]byte, error) {
	b := make([]byte, verity.BlockSize)
	off := p.TopOffset()
	n, err := r.ReadAt(b, off)
	switch {
	case n == len(b):
		return b, nil
	case errors.Is(err, io.EOF):
		return nil, fmt.Errorf("it ends before byte %d, where the tree's top block would end (%d data blocks, tree at block %d)",
			off+verity.BlockSize, p.DataBlocks, p.HashStartBlock)
	}
	return nil, fmt.Errorf("reading its tree's top block at byte %d: %w", off, err)
}

// findRoot finds the root slot that holds p's root: findSlots, readSlots,
// ChooseSlot, and a log line saying what was found and how.
func findRoot(ctx context.Context, log *slog.Logger, classBlock string, p verity.Param, hint string,
	wait, grace time.Duration, ready func(string) bool, open func(string) (*os.File, error)) (SlotChoice, error) {
	if hint != "" {
		// A bad hint is refused at once, not after the wait for the disk.
		if _, err := partition.ParseSlot(hint); err != nil {
			return SlotChoice{}, fmt.Errorf("the command line's root slot: %w", err)
		}
	}
	reads, err := findSlots(ctx, classBlock, wait, grace, ready)
	if err != nil {
		return SlotChoice{}, err
	}
	readSlots(reads, p, open)
	c, err := ChooseSlot(reads, p, hint)
	if err != nil {
		return SlotChoice{}, err
	}
	if c.Both {
		log.Info("both root slots hold this root (the same release in each); booting the one chosen, and an update writes the other",
			"slot", c.Slot, "partition", c.Partition, "root_hash", p.RootHash, "by", c.By)
	} else {
		log.Info("root slot found", "slot", c.Slot, "partition", c.Partition, "root_hash", p.RootHash, "by", c.By)
	}
	return c, nil
}
