package shutdown

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-node/berth/internal/fsutil"
)

func TestCgroupPIDs(t *testing.T) {
	root := t.TempDir()
	for p, data := range map[string]string{
		"cgroup.procs":                "",
		"pod1/cgroup.procs":           "10\n11\n",
		"pod1/container/cgroup.procs": "12\n",
		"pod2/cgroup.procs":           "20\n",
		"pod2/cgroup.controllers":     "cpu memory\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := map[int]bool{}
	for _, pid := range cgroupPIDs(root) {
		got[pid] = true
	}
	for _, want := range []int{10, 11, 12, 20} {
		if !got[want] {
			t.Errorf("pid %d missing from %v", want, got)
		}
	}
	if len(got) != 4 {
		t.Errorf("pids %v, want 4", got)
	}
}

// TestPodStopperTermThenKill runs real processes under a fake cgroup tree:
// one exits on SIGTERM, one ignores it and must get SIGKILL once the grace
// period is over.
func TestPodStopperTermThenKill(t *testing.T) {
	root := t.TempDir()
	polite := exec.Command("sleep", "60")
	// The shell says when its trap is set: a SIGTERM that came before the
	// trap would kill it, as it did under CI's load.
	stubborn := exec.Command("sh", "-c", "trap '' TERM; echo trapped; while :; do sleep 0.05; done")
	stubbornOut, err := stubborn.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*exec.Cmd{polite, stubborn} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	if line, err := bufio.NewReader(stubbornOut).ReadString('\n'); err != nil || line != "trapped\n" {
		t.Fatalf("stubborn process did not set its trap: %q, %v", line, err)
	}
	procs := filepath.Join(root, "pod1", "cgroup.procs")
	if err := os.MkdirAll(filepath.Dir(procs), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(pids ...int) {
		var b strings.Builder
		for _, p := range pids {
			fmt.Fprintf(&b, "%d\n", p)
		}
		// Replaced whole, never truncated in place, so Stop never reads an
		// empty list that the kernel would not show.
		if err := fsutil.WriteFileAtomic(procs, []byte(b.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
	write(polite.Process.Pid, stubborn.Process.Pid)
	// The kernel empties cgroup.procs as processes exit; the test plays
	// that part by rewriting the file as each child is reaped.
	done := make(chan string, 2)
	var mu sync.Mutex
	left := map[string]int{"polite": polite.Process.Pid, "stubborn": stubborn.Process.Pid}
	for name, c := range map[string]*exec.Cmd{"polite": polite, "stubborn": stubborn} {
		go func() {
			err := c.Wait()
			mu.Lock()
			delete(left, name)
			var pids []int
			for _, p := range left {
				pids = append(pids, p)
			}
			write(pids...)
			mu.Unlock()
			done <- fmt.Sprintf("%s: %v", name, err)
		}()
	}
	s := PodStopper{Root: root, Grace: 500 * time.Millisecond, Log: slog.New(slog.DiscardHandler)}
	start := time.Now()
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for range 2 {
		select {
		case r := <-done:
			name, status, _ := strings.Cut(r, ": ")
			got[name] = status
		case <-time.After(5 * time.Second):
			t.Fatalf("processes left after Stop: %v", left)
		}
	}
	if got["polite"] != "signal: terminated" {
		t.Errorf("polite process: %s, want terminated by SIGTERM", got["polite"])
	}
	if got["stubborn"] != "signal: killed" {
		t.Errorf("stubborn process: %s, want killed by SIGKILL", got["stubborn"])
	}
	if d := time.Since(start); d < s.Grace {
		t.Errorf("SIGKILL came after %v, before the %v grace period", d, s.Grace)
	}
}
