// Package report is berth's boot report: the timeline of boot phases, the
// modules loaded, berth's own memory and CPU time, the split between berth's
// own work and the waits outside it, and whether boot succeeded. It is
// printed once on the console as `BERTH-REPORT {json}` (operators read it
// through EC2's console output, tests from the serial port) and kept in
// /run/berth/boot.json.
package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/berth-node/berth/internal/efivar"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/berth-node/berth/internal/fsutil"
	"github.com/berth-node/berth/mounts/localstorage"
	"github.com/berth-node/berth/network"
	"github.com/berth-node/berth/network/timesync"
	"github.com/berth-node/berth/update/status"
)

// DefaultPath is where the report is written on a booted node.
const DefaultPath = "/run/berth/boot.json"

// Prefix starts the console line, for grep and for parsers.
const Prefix = "BERTH-REPORT "

// Phase is one boot phase on the timeline. Times are ms since the kernel
// started (CLOCK_BOOTTIME), so they line up with dmesg.
type Phase struct {
	Name       string `json:"name"`
	StartMs    int64  `json:"startMs"`
	DurationMs int64  `json:"durationMs"`
	Error      string `json:"error,omitempty"`
}

// Report is the boot report, boot.json's schema (SchemaVersion). All
// durations are in milliseconds, in fields named ...Ms; times on the boot's
// clock are ms since the kernel started; the few wall-clock times are
// RFC 3339.
type Report struct {
	// SchemaVersion is the schema's version: JSON always writes
	// SchemaVersion; Decode reads older reports, and refuses newer ones.
	SchemaVersion int    `json:"schemaVersion"`
	Version       string `json:"version"`
	BootID        string `json:"bootId,omitempty"`
	// KernelToInitMs is when berth's first line was logged: the time the
	// kernel took to reach PID 1.
	KernelToInitMs int64 `json:"kernelToInitMs"`
	// EndMs is when the report was made: berth's own part of boot is
	// EndMs - KernelToInitMs.
	EndMs int64 `json:"endMs"`
	// EndWall is the wall clock at EndMs: it places the services' wall-clock
	// times (startedAt) on the kernel's clock, for `berth analyze`.
	EndWall time.Time `json:"endWall,omitzero"`
	Phases  []Phase   `json:"phases"`
	Modules []string  `json:"modules"`
	RSSKiB  int64     `json:"rssKiB"`
	// CPU is berth's processor time up to the report.
	CPU *CPU `json:"cpu,omitempty"`
	// Split is how berth's part of boot divides between its own work and
	// the waits outside it (analyze.Split decides which are which).
	Split *Split `json:"split,omitempty"`
	// RegisteredMs is when kubelet said it registered the node with the
	// API server (the join watcher), ms since kernel start; 0 if not yet.
	// Set after the report is out, so only boot.json carries it.
	RegisteredMs int64 `json:"registeredMs,omitempty"`
	// OK is true when boot reached the end without a fatal error; errors
	// of phases that boot survives are in Phases.
	OK bool `json:"ok"`
	// Error is the fatal error, "phase: message".
	Error string `json:"error,omitempty"`
	// The sections, each written by one phase (or, for the services, by
	// the services phase and then the supervisor's changes). Those that
	// `berth analyze` and the tests read are typed; the others hold the
	// writing package's own struct.
	Root    any                  `json:"root,omitempty"`
	Source  *Source              `json:"source,omitempty"`
	Config  *Config              `json:"config,omitempty"`
	Plan    *Plan                `json:"plan,omitempty"`
	Apply   *Apply               `json:"apply,omitempty"`
	Network *network.Result      `json:"network,omitempty"`
	Time    *timesync.Status     `json:"time,omitempty"`
	Storage *localstorage.Result `json:"storage,omitempty"`
	Host    any                  `json:"host,omitempty"`
	// Firmware is the UEFI firmware's state: Secure Boot, and the boot
	// loader and entry that started this kernel; nil on a boot without
	// UEFI (a direct-kernel boot).
	Firmware *efivar.Firmware `json:"firmware,omitempty"`
	// Update is the image version running, its root slot, and whether
	// systemd-boot started it on trial (update/status); nil in reports
	// from before it.
	Update   *status.Status `json:"update,omitempty"`
	Services *Services      `json:"services,omitempty"`
	// Shutdown is the way down once a power request came: its reason and
	// each step with its duration, written as the steps end.
	Shutdown any `json:"shutdown,omitempty"`
	// DevLinks are the NVMe device links (devlinks.Status).
	DevLinks any `json:"devlinks,omitempty"`
	// Lifecycle is the watcher of EC2's spot, rebalance and ASG notices
	// (lifecycle.Status): what it polls, the notices and what berth did.
	Lifecycle any `json:"lifecycle,omitempty"`
	// Panics are the panics berth recovered from, in order: each one a
	// bug, each one survived.
	Panics []Panic `json:"panics,omitempty"`
	// Live is berth's process at the last write of boot.json (Live).
	Live *Live `json:"live,omitempty"`
}

// CPU is processor time in ms. Self is berth's own process, all its
// threads; Children are the processes berth started and reaped by the
// report (mkfs, ctr imports, iptables...): the still-running services are
// not in it, as getrusage counts a child only once it is waited for.
type CPU struct {
	UserMs         int64 `json:"userMs"`
	SysMs          int64 `json:"sysMs"`
	ChildrenUserMs int64 `json:"childrenUserMs"`
	ChildrenSysMs  int64 `json:"childrenSysMs"`
}

// Span is one wait outside berth: DHCP, IMDS, mkfs, containerd's start,
// an image import, the first NTP sync, kubelet's start.
type Span struct {
	Name string `json:"name"`
	// Phase is the boot phase the wait happened in.
	Phase      string `json:"phase"`
	StartMs    int64  `json:"startMs"`
	DurationMs int64  `json:"durationMs"`
	// Derived is true when the section recorded only a duration and the
	// start was placed from the order of the steps around it.
	Derived bool `json:"derived,omitempty"`
}

// Split divides berth's part of boot (KernelToInitMs to EndMs).
type Split struct {
	// WaitMs is the time covered by at least one wait; BerthMs the rest,
	// berth's own work (and the gaps it leaves, such as GC or scheduling).
	BerthMs int64  `json:"berthMs"`
	WaitMs  int64  `json:"waitMs"`
	Waits   []Span `json:"waits"`
}

// Panic is one recovered panic.
type Panic struct {
	Goroutine string `json:"goroutine"`
	Error     string `json:"error"`
	AtMs      int64  `json:"atMs"`
	Stack     string `json:"stack,omitempty"`
}

// JSON is the report as compact single-line JSON, without HTML escaping so
// that what a test reads is what was logged.
func (r *Report) JSON() ([]byte, error) {
	// What this code writes is the schema its types are, whatever the
	// field held (a report decoded from an older schema, too).
	c := *r
	c.SchemaVersion = SchemaVersion
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&c); err != nil {
		return nil, fmt.Errorf("encoding boot report: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Line is the console line: "BERTH-REPORT {json}" with no newline.
func (r *Report) Line() (string, error) {
	b, err := r.JSON()
	if err != nil {
		return "", err
	}
	return Prefix + string(b), nil
}

// Write writes the same JSON as Line, with a trailing newline, to path.
func (r *Report) Write(path string) error {
	b, err := r.JSON()
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing boot report: %w", err)
	}
	return nil
}

// ParseLine finds a BERTH-REPORT line in one line of console output (which
// may carry noise before the prefix) and decodes it (Decode: any schema
// this berth reads).
func ParseLine(line string) (*Report, error) {
	i := strings.Index(line, Prefix)
	if i < 0 {
		return nil, fmt.Errorf("no %q in line", strings.TrimSpace(Prefix))
	}
	return Decode([]byte(strings.TrimSpace(line[i+len(Prefix):])))
}

// Clock gives the time since the kernel started.
type Clock func() time.Duration

// Timer times one phase into a report.
type Timer struct {
	rep   *Report
	log   *slog.Logger
	clock Clock
	name  string
	start time.Duration
}

// Start begins timing phase name. The caller's logger should already carry
// the phase attribute so the end line is stamped with it.
func (r *Report) Start(log *slog.Logger, clock Clock, name string) *Timer {
	return &Timer{rep: r, log: log, clock: clock, name: name, start: clock()}
}

// End records the phase with its duration and error and logs one line:
// "phase done duration_ms=N", or "phase failed duration_ms=N err=..." at
// error level.
func (t *Timer) End(err error) Phase {
	end := t.clock()
	p := Phase{Name: t.name, StartMs: t.start.Milliseconds(), DurationMs: (end - t.start).Milliseconds()}
	if err != nil {
		p.Error = err.Error()
		t.log.Error("phase failed", "duration_ms", p.DurationMs, "err", err)
	} else {
		t.log.Info("phase done", "duration_ms", p.DurationMs)
	}
	t.rep.Phases = append(t.rep.Phases, p)
	return p
}

// ReadRSSKiB returns VmRSS from a /proc/PID/status file.
func ReadRSSKiB(statusPath string) (int64, error) {
	f, err := os.Open(statusPath)
	if err != nil {
		return 0, fmt.Errorf("reading RSS: %w", err)
	}
	defer f.Close()
	n, err := ParseRSSKiB(f)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", statusPath, err)
	}
	return n, nil
}

// ParseRSSKiB finds "VmRSS:   1234 kB" in /proc/PID/status text.
func ParseRSSKiB(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("VmRSS line %q: want \"N kB\"", sc.Text())
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("VmRSS line %q: bad number", sc.Text())
		}
		return n, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no VmRSS line")
}
