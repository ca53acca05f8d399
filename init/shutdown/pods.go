package shutdown

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// PodStopper is the step between kubelet and containerd: once kubelet has
// stopped, every process under the pods' cgroup gets SIGTERM, Grace to
// exit, then SIGKILL. It sits here, beside killRemaining, because it is the
// same kill-with-grace move applied to one cgroup subtree.
type PodStopper struct {
	// Root is the pods' cgroup (kubelet's cgroupfs driver: /sys/fs/cgroup/kubepods).
	Root  string
	Grace time.Duration
	Log   *slog.Logger
}

// Name implements Stopper.
func (PodStopper) Name() string { return "pods" }

// Stop implements Stopper. The grace period ends early, two seconds before
// ctx's deadline, so the SIGKILL always gets sent.
func (s PodStopper) Stop(ctx context.Context) error {
	pids := cgroupPIDs(s.Root)
	if len(pids) == 0 {
		s.Log.Info("no pod processes to stop")
		return nil
	}
	s.Log.Info("stopping pods", "processes", len(pids), "grace", s.Grace.String())
	signalAll(pids, unix.SIGTERM)
	deadline := time.Now().Add(s.Grace)
	if d, ok := ctx.Deadline(); ok && d.Add(-2*time.Second).Before(deadline) {
		deadline = d.Add(-2 * time.Second)
	}
	for time.Now().Before(deadline) {
		if len(cgroupPIDs(s.Root)) == 0 {
			s.Log.Info("pods stopped")
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	left := cgroupPIDs(s.Root)
	s.Log.Warn("pods still running after the grace period; killing", "processes", len(left))
	signalAll(left, unix.SIGKILL)
	return nil
}

// cgroupPIDs lists every process in the cgroup subtree at root.
func cgroupPIDs(root string) []int {
	var pids []int
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

func signalAll(pids []int, sig unix.Signal) {
	for _, pid := range pids {
		_ = unix.Kill(pid, sig)
	}
}
