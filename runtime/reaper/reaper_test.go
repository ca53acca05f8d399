package reaper

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-node/berth/internal/syncbuf"
)

// subreaper makes the test process adopt its orphaned grandchildren, as
// PID 1 does, so orphan reaping is testable without root.
func subreaper(t *testing.T) {
	t.Helper()
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatalf("prctl(PR_SET_CHILD_SUBREAPER): %v", err)
	}
}

func startReaper(t *testing.T, log *slog.Logger) *Reaper {
	t.Helper()
	r := New(log)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

// zombies lists our children that are zombies (state Z in /proc/PID/stat).
func zombies(t *testing.T) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("reading /proc: %v", err)
	}
	me := os.Getpid()
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		// comm may hold spaces and parentheses: fields start after the last ')'.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == me && f[0] == "Z" {
			out = append(out, pid)
		}
	}
	return out
}

// TestManyChildrenAndOrphans starts many short children concurrently, each
// of which leaves an orphaned grandchild behind, and checks that every
// registered child gets its own exit code, no Start or Wait fails with
// "no child processes", every orphan is reaped and no zombie is left.
func TestManyChildrenAndOrphans(t *testing.T) {
	subreaper(t)
	var logBuf syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r := startReaper(t, log)

	const n = 300
	const workers = 12
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	errs := make(chan error, n)
	var wg sync.WaitGroup
	jobs := make(chan int)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				// The background sleep outlives sh: it is reparented to us
				// and must be reaped as an orphan.
				cmd := exec.Command("/bin/sh", "-c", fmt.Sprintf("sleep 0.0%d & exit %d", i%10, i%256))
				p, err := r.Start(cmd)
				if err != nil {
					errs <- fmt.Errorf("child %d: %w", i, err)
					continue
				}
				st, err := p.Wait(ctx)
				if err != nil {
					errs <- fmt.Errorf("child %d: %w", i, err)
					continue
				}
				if st.Code != i%256 || st.Signal != 0 {
					errs <- fmt.Errorf("child %d (pid %d): got %v, want exit status %d", i, p.Pid(), st, i%256)
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// The grandchildren sleep at most 0.09 s; all n must be reaped as orphans.
	deadline := time.Now().Add(20 * time.Second)
	for r.Orphans() < n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := r.Orphans(); got < n {
		t.Errorf("reaped %d orphans, want at least %d", got, n)
	}
	if z := zombies(t); len(z) > 0 {
		t.Errorf("zombies left among our children: %v", z)
	}
	if !strings.Contains(logBuf.String(), `msg="reaped orphan"`) {
		t.Errorf("no orphan log line at debug level; log:\n%s", logBuf.String())
	}
	if strings.Contains(logBuf.String(), "no child processes") {
		t.Errorf("log mentions ECHILD:\n%s", logBuf.String())
	}
}

func TestSignalledChild(t *testing.T) {
	subreaper(t)
	r := startReaper(t, nil)
	p, err := r.Start(exec.Command("/bin/sh", "-c", "kill -KILL $$"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := p.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Signal != syscall.SIGKILL || st.Code != -1 || st.Success() {
		t.Fatalf("got %+v, want killed by SIGKILL", st)
	}
	if st.String() != "signal: killed" {
		t.Fatalf("String() = %q", st.String())
	}
	// A reaped process cannot be signalled (its pid may be someone else's now).
	if err := p.Signal(syscall.SIGTERM); err != os.ErrProcessDone {
		t.Fatalf("Signal after reap: %v, want os.ErrProcessDone", err)
	}
}

func TestWaitDeadlineThenSignal(t *testing.T) {
	subreaper(t)
	r := startReaper(t, nil)
	p, err := r.Start(exec.Command("/bin/sleep", "30"))
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := p.Wait(short); err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("Wait on a running child with a short deadline: err = %v, want deadline exceeded", err)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	ctx, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	st, err := p.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Signal != syscall.SIGTERM {
		t.Fatalf("got %v, want signal: terminated", st)
	}
	// Wait is repeatable.
	if st2, err := p.Wait(ctx); err != nil || st2 != st {
		t.Fatalf("second Wait = %v, %v; want %v", st2, err, st)
	}
}

func TestStartRejectsWhatOnlyCmdWaitCleansUp(t *testing.T) {
	r := New(nil)
	withWriter := exec.Command("/bin/true")
	withWriter.Stdout = &bytes.Buffer{}
	if _, err := r.Start(withWriter); err == nil || !strings.Contains(err.Error(), "Stdout") {
		t.Errorf("io.Writer stdout: err = %v, want a refusal naming Stdout", err)
	}
	withCtx := exec.CommandContext(context.Background(), "/bin/true")
	if _, err := r.Start(withCtx); err == nil || !strings.Contains(err.Error(), "CommandContext") {
		t.Errorf("CommandContext: err = %v, want a refusal naming CommandContext", err)
	}
	if _, err := r.Start(exec.Command("/nonexistent/binary")); err == nil || !strings.Contains(err.Error(), "/nonexistent/binary") {
		t.Errorf("missing binary: err = %v, want one naming the path", err)
	}
}

func TestFileStdout(t *testing.T) {
	subreaper(t)
	r := startReaper(t, nil)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	cmd := exec.Command("/bin/echo", "hello")
	cmd.Stdout = pw
	p, err := r.Start(cmd)
	pw.Close() // the child has its own copy
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if st, err := p.Wait(ctx); err != nil || !st.Success() {
		t.Fatalf("Wait = %v, %v", st, err)
	}
	var out bytes.Buffer
	if _, err := out.ReadFrom(pr); err != nil {
		t.Fatal(err)
	}
	if out.String() != "hello\n" {
		t.Fatalf("stdout = %q", out.String())
	}
}

func TestExitStatusString(t *testing.T) {
	for _, c := range []struct {
		s    ExitStatus
		want string
	}{
		{ExitStatus{Code: 0}, "exit status 0"},
		{ExitStatus{Code: 3}, "exit status 3"},
		{ExitStatus{Code: -1, Signal: syscall.SIGTERM}, "signal: terminated"},
	} {
		if got := c.s.String(); got != c.want {
			t.Errorf("%+v.String() = %q, want %q", c.s, got, c.want)
		}
	}
}

func TestExecAndCombinedOutput(t *testing.T) {
	subreaper(t)
	r := startReaper(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	st, err := r.Exec(ctx, exec.Command("/bin/sh", "-c", "exit 7"))
	if err != nil || st.Code != 7 {
		t.Errorf("Exec(exit 7) = %v, %v", st, err)
	}

	out, st, err := r.CombinedOutput(ctx, exec.Command("/bin/sh", "-c", "echo out; echo err >&2; exit 3"))
	if err != nil || st.Code != 3 || string(out) != "out\nerr\n" {
		t.Errorf("CombinedOutput = %q, %v, %v", out, st, err)
	}

	// A grandchild holding the pipe open must not make it hang.
	start := time.Now()
	out, st, err = r.CombinedOutput(ctx, exec.Command("/bin/sh", "-c", "echo hi; sleep 3 & exit 0"))
	if err != nil || !st.Success() || string(out) != "hi\n" {
		t.Errorf("CombinedOutput with a lingering grandchild = %q, %v, %v", out, st, err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("CombinedOutput waited %v for a grandchild's pipe", d)
	}

	// A deadline kills the child, and says so.
	short, cancel2 := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel2()
	st, err = r.Exec(short, exec.Command("/bin/sleep", "30"))
	if !errors.Is(err, context.DeadlineExceeded) || st.Signal != syscall.SIGKILL {
		t.Errorf("Exec past its deadline = %v, %v; want killed with DeadlineExceeded", st, err)
	}

	if _, _, err := r.CombinedOutput(ctx, &exec.Cmd{Path: "/bin/true", Stdout: os.Stdout}); err == nil {
		t.Errorf("CombinedOutput with Stdout set: no error")
	}

	// Output: one error for a failed program, naming it and its status.
	if out, err := r.Output(ctx, exec.Command("/bin/sh", "-c", "echo ok")); err != nil || string(out) != "ok\n" {
		t.Errorf("Output(echo ok) = %q, %v", out, err)
	}
	out, err = r.Output(ctx, exec.Command("/bin/sh", "-c", "echo why >&2; exit 4"))
	if err == nil || !strings.Contains(err.Error(), "/bin/sh") || !strings.Contains(err.Error(), "4") || string(out) != "why\n" {
		t.Errorf("Output(exit 4) = %q, %v; want the output and an error naming /bin/sh and its status", out, err)
	}
}

func TestTailBuffer(t *testing.T) {
	b := &tailBuffer{max: 4}
	b.Write([]byte("abc"))
	b.Write([]byte("defg"))
	if string(b.Bytes()) != "defg" {
		t.Errorf("tail = %q, want the last 4 bytes", b.Bytes())
	}
}
