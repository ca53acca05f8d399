package mkfs

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestTool(t *testing.T) {
	for _, tc := range []struct {
		tools  map[string]string
		fstype string
		bin    string
		listed bool
	}{
		{map[string]string{"mkfs.ext4": "/nix/mkfs.ext4"}, "ext4", "/nix/mkfs.ext4", true},
		{map[string]string{"mkfs.ext4": ""}, "ext4", "/usr/sbin/mkfs.ext4", false},
		{map[string]string{"mkfs.ext4": "/nix/mkfs.ext4"}, "xfs", "/usr/sbin/mkfs.xfs", false},
		{nil, "xfs", "/usr/sbin/mkfs.xfs", false},
	} {
		bin, listed := Tool(tc.tools, tc.fstype)
		if bin != tc.bin || listed != tc.listed {
			t.Errorf("Tool(%v, %s) = %s, %v; want %s, %v", tc.tools, tc.fstype, bin, listed, tc.bin, tc.listed)
		}
	}
}

// A failed run's error wraps the runner's and ends with the tool's output,
// its tail only when it is long.
func TestRunError(t *testing.T) {
	boom := errors.New("exit status 1")
	var got *exec.Cmd
	var deadline time.Time
	run := func(ctx context.Context, cmd *exec.Cmd) ([]byte, error) {
		got = cmd
		deadline, _ = ctx.Deadline()
		return []byte("  mkfs.ext4: Device size reported to be zero.\n"), boom
	}
	err := Run(context.Background(), run, "/sbin/mkfs.ext4", "-q", "/dev/vdb1")
	if !errors.Is(err, boom) || err.Error() != "exit status 1: mkfs.ext4: Device size reported to be zero." {
		t.Fatalf("err = %v", err)
	}
	if got == nil || strings.Join(got.Args, " ") != "/sbin/mkfs.ext4 -q /dev/vdb1" {
		t.Fatalf("ran %v", got)
	}
	if d := time.Until(deadline); d <= 0 || d > Timeout {
		t.Fatalf("runner's deadline %s away, want within %s", d, Timeout)
	}

	long := strings.Repeat("x", 600) + "END"
	err = Run(context.Background(), func(context.Context, *exec.Cmd) ([]byte, error) { return []byte(long), boom }, "mkfs.xfs")
	if want := "exit status 1: ..." + long[len(long)-500:]; err.Error() != want {
		t.Fatalf("long output: error of %d bytes, want %d ending in END", len(err.Error()), len(want))
	}
}

// With no runner, os/exec runs the tool.
func TestRunExec(t *testing.T) {
	if err := Run(context.Background(), nil, "/bin/sh", "-c", "exit 0"); err != nil {
		t.Fatal(err)
	}
	err := Run(context.Background(), nil, "/bin/sh", "-c", "echo bad superblock >&2; exit 3")
	if err == nil || err.Error() != "exit status 3: bad superblock" {
		t.Fatalf("err = %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := Run(ctx, nil, "/bin/sh", "-c", "exec sleep 10"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the deadline", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("killed after %s", d)
	}
}
