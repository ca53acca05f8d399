package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestExitsZeroOnSignal builds the real binary and checks the contract
// containerd relies on: it keeps running, then exits 0 promptly on SIGTERM
// and on SIGINT.
func TestExitsZeroOnSignal(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "pause")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building pause: %v\n%s", err, out)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		cmd := exec.Command(bin)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			t.Fatalf("pause exited before any signal: %v", err)
		case <-time.After(300 * time.Millisecond):
		}
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("after %v: %v, want exit status 0", sig, err)
			}
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("pause did not exit within 5s of %v", sig)
		}
	}
}

// TestReapCollectsExitedChildren checks that reap leaves no zombie.
func TestReapCollectsExitedChildren(t *testing.T) {
	var pids []int
	for i := 0; i < 3; i++ {
		pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{})
		if err != nil {
			t.Fatalf("starting /bin/true: %v", err)
		}
		pids = append(pids, pid)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for {
			reap()
			// Once reaped, the pid is gone: kill(pid, 0) fails with ESRCH.
			if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("child %d was not reaped within 5s", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
