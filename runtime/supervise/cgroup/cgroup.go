// Package cgroup places a service in its own cgroup v2 group at exec time.
//
// Plan (pure) turns the plan's group path, e.g. "/runtime.slice/kubelet",
// into directories under the cgroup2 mount; Prepare (acting) creates them,
// enables controllers down the path so kubelet's kubeReserved and
// systemReserved accounting sees them, and opens the group for
// SysProcAttr.CgroupFD. Using CLONE_INTO_CGROUP rather than writing the pid
// to cgroup.procs after start means the service never runs a single
// instruction, nor forks a child, outside its group.
package cgroup

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/berth-node/berth/mounts"
)

// DefaultRoot is where berth mounts cgroup2 (the early mount table's).
const DefaultRoot = mounts.CgroupRoot

// Wanted are the controllers berth enables down to each service group, when
// the kernel has them: what kubelet's node allocatable enforcement reads.
func Wanted() []string {
	return []string{"cpu", "cpuset", "io", "memory", "pids", "hugetlb"}
}

// Placement is where one service goes.
type Placement struct {
	// Group is the cgroup path as the kernel shows it in /proc/PID/cgroup.
	Group string
	// Dir is the group's directory.
	Dir string
	// Parents are the directories, root first, whose subtree_control must
	// enable controllers for Dir to have them.
	Parents []string
}

// Plan decides where a group lives under the cgroup2 mount at root.
func Plan(root, group string) (Placement, error) {
	if !path.IsAbs(group) {
		return Placement{}, fmt.Errorf("cgroup %q: must be an absolute path like /runtime.slice/kubelet", group)
	}
	if path.Clean(group) != group || group == "/" {
		return Placement{}, fmt.Errorf("cgroup %q: must be a clean path below the root group", group)
	}
	parts := strings.Split(strings.TrimPrefix(group, "/"), "/")
	p := Placement{Group: group, Dir: root}
	for _, part := range parts {
		if part == "." || part == ".." || strings.HasPrefix(part, "cgroup.") {
			return Placement{}, fmt.Errorf("cgroup %q: component %q is not a group name", group, part)
		}
		p.Parents = append(p.Parents, p.Dir)
		p.Dir = filepath.Join(p.Dir, part)
	}
	return p, nil
}

// Controllers returns the controllers to enable: those wanted that the
// kernel offers, in the order wanted.
func Controllers(available string, wanted []string) []string {
	have := strings.Fields(available)
	var out []string
	for _, w := range wanted {
		if slices.Contains(have, w) {
			out = append(out, w)
		}
	}
	return out
}

// Prepare creates p's directories, enables controllers along the way, and
// opens the group for CLONE_INTO_CGROUP; the caller closes the file after
// the exec. A controller that cannot be enabled is logged, not fatal: the
// service still runs in its group, only without that accounting.
func Prepare(log *slog.Logger, p Placement) (*os.File, error) {
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating cgroup %s: %w", p.Dir, err)
	}
	for _, dir := range p.Parents {
		avail, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
		if err != nil {
			return nil, fmt.Errorf("cgroup %s: %s is not a cgroup2 directory: %w", p.Group, dir, err)
		}
		ctl := filepath.Join(dir, "cgroup.subtree_control")
		enabled, _ := os.ReadFile(ctl)
		for _, c := range Controllers(string(avail), Wanted()) {
			if slices.Contains(strings.Fields(string(enabled)), c) {
				continue
			}
			// One write per controller so one refusal (cpuset busy, say)
			// does not cost the others. Not WriteFileAtomic: cgroupfs
			// files are control knobs, not files to replace.
			if err := os.WriteFile(ctl, []byte("+"+c), 0); err != nil {
				log.Warn("cgroup controller not enabled", "cgroup", p.Group, "dir", dir, "controller", c, "err", err)
			}
		}
	}
	f, err := os.OpenFile(p.Dir, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, fmt.Errorf("opening cgroup %s: %w", p.Dir, err)
	}
	return f, nil
}

// Remove removes the group's directory if it is empty; a group that still
// has processes, or is gone, is not an error worth more than a log line, so
// this reports only unexpected failures.
func Remove(p Placement) error {
	err := os.Remove(p.Dir)
	if err == nil || errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return fmt.Errorf("removing cgroup %s: %w", p.Dir, err)
}
