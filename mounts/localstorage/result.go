package localstorage

import (
	"time"

	"github.com/berth-node/berth/mounts/instancestore"
)

// Status of the phase.
const (
	StatusReady   = "ready"
	StatusSkipped = "skipped"
	StatusFailed  = "failed"
)

// Result is the phase's part of the boot report (/run/berth/boot.json).
type Result struct {
	Strategy string `json:"strategy,omitempty"`
	Status   string `json:"status"`
	// Reason says why the phase was skipped.
	Reason string `json:"reason,omitempty"`
	// Step and Error say where and why it failed; Fallback what the node
	// does instead ("root disk") when the failure is not fatal.
	Step     string                  `json:"step,omitempty"`
	Error    string                  `json:"error,omitempty"`
	Fallback string                  `json:"fallback,omitempty"`
	Disks    []DiskReport            `json:"disks,omitempty"`
	Skipped  []instancestore.Skipped `json:"skipped,omitempty"`
	// Reclaimed lists what Force let berth overwrite.
	Reclaimed   []string       `json:"reclaimed,omitempty"`
	Array       *ArrayReport   `json:"array,omitempty"`
	Filesystems []FSReport     `json:"filesystems,omitempty"`
	Binds       []Bind         `json:"binds,omitempty"`
	Steps       []StepDuration `json:"steps,omitempty"`
}

// DiskReport is one claimed disk.
type DiskReport struct {
	instancestore.Disk
	// Found is what the disk held before this boot: "berth raid0 1/2" for
	// its own mark, or what the probe saw ("blank", "xfs"...).
	Found string `json:"found"`
	// Partition is the partition device used, e.g. /dev/nvme1n1p1.
	Partition string `json:"partition,omitempty"`
	// Partitioned says berth wrote a fresh GPT this boot.
	Partitioned bool `json:"partitioned"`
}

// ArrayReport is the device-mapper array.
type ArrayReport struct {
	Name      string   `json:"name"`   // device-mapper name
	Device    string   `json:"device"` // /dev/dm-N
	Level     string   `json:"level"`
	ID        string   `json:"id"` // berth's array ID (GPT disk GUID)
	ChunkKiB  int      `json:"chunkKiB"`
	SizeBytes int64    `json:"sizeBytes"`
	Members   []string `json:"members"`
	Table     string   `json:"table"`
}

// FSReport is one filesystem and where it is mounted.
type FSReport struct {
	Device  string `json:"device"`
	Type    string `json:"type"`
	Label   string `json:"label"`
	UUID    string `json:"uuid"`
	Created bool   `json:"created"` // mkfs ran this boot
	Mount   string `json:"mount"`
	Options string `json:"options"`
}

// StepDuration is how long one step took.
type StepDuration struct {
	Name       string  `json:"name"` // discover, probe, partition, array, mkfs, mount
	DurationMs float64 `json:"durationMs"`
}

func (r *Result) step(name string, start time.Time) {
	r.Steps = append(r.Steps, StepDuration{Name: name, DurationMs: float64(time.Since(start).Microseconds()) / 1000})
}
