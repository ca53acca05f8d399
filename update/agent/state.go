package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/berth-node/berth/internal/fsutil"
	"github.com/berth-node/berth/update/status"
)

// StateFile is the agent's state in its state directory (on the data
// partition, so it outlives the reboot into the new version and back).
const StateFile = "state.json"

// Pending phases: how far an update got before the machine went down.
const (
	// PhaseApplying: the update was being written; until the UKI's
	// rename nothing changes what boots.
	PhaseApplying = "applying"
	// PhaseStaged: the new version's UKI is on the ESP with a boot
	// counter: the next boot tries it.
	PhaseStaged = "staged"
	// PhaseReverted: the new version's trial failed; it marked itself
	// bad and rebooted into the previous one, leaving Reason.
	PhaseReverted = "reverted"
)

// State is what the agent keeps across reboots.
type State struct {
	// Pending is the update under way: written, staged or on trial.
	// Nil when none is.
	Pending *Pending `json:"pending,omitempty"`
	// Last is the outcome of the last update, for boot.json and the Node.
	Last *status.LastUpdate `json:"last,omitempty"`
	// RolledBack are the versions that failed their trial on this node,
	// with why: a trigger naming one again is refused, so a rollback is
	// not followed by the same update, forever.
	RolledBack map[string]string `json:"rolledBack,omitempty"`
	// Handled is the last trigger acted on (its annotation value), so a
	// refused or finished trigger is not acted on again at every look.
	Handled string `json:"handled,omitempty"`
}

// Pending is an update under way.
type Pending struct {
	Phase string `json:"phase"`
	// From and To are the running version when it began and the new one.
	From string `json:"from"`
	To   string `json:"to"`
	// Slot is the slot written; Entry the UKI staged (berth-1.2.0+3.efi).
	Slot  string `json:"slot,omitempty"`
	Entry string `json:"entry,omitempty"`
	// Reason is, for PhaseReverted, why the trial failed.
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// loadState reads dir's state; a missing file is the empty state. A file
// that does not parse is reported and replaced by the empty state: the
// agent must keep running, and what it forgets is only history.
func loadState(dir string) (State, error) {
	path := filepath.Join(dir, StateFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return State{}, nil
	}
	if err != nil {
		return State{}, fmt.Errorf("reading the update state %s: %w", path, err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return State{}, fmt.Errorf("the update state %s does not parse (starting afresh): %w", path, err)
	}
	return s, nil
}

// saveState writes s atomically (a crash leaves the old or the new file).
func saveState(dir string, s State) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("saving the update state: %w", err)
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("saving the update state: %w", err)
	}
	path := filepath.Join(dir, StateFile)
	if err := fsutil.WriteFileAtomic(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("saving the update state %s: %w", path, err)
	}
	return nil
}
