package controlplane

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// proc is one running component; its output goes to a log file in the
// state directory, appended to the output of earlier tries.
type proc struct {
	name    string
	logPath string
	// logStart is the log's size when this process started: its own output
	// begins there.
	logStart int64
	cmd      *exec.Cmd
	done     chan struct{}
	err      error // valid after done is closed
	log      *slog.Logger
}

func startProc(log *slog.Logger, name, bin, logPath string, args []string) (*proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("starting %s: opening log: %w", name, err)
	}
	var logStart int64
	if st, err := f.Stat(); err == nil {
		logStart = st.Size()
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// If this program is killed outright, the components die with it
		// rather than holding ports for the next test.
		Pdeathsig: syscall.SIGKILL,
		Setpgid:   true,
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, bin, err)
	}
	p := &proc{name: name, logPath: logPath, logStart: logStart, cmd: cmd, done: make(chan struct{}), log: log}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	log.Info("started", "component", name, "pid", cmd.Process.Pid, "log", logPath)
	return p, nil
}

// exited reports whether the process has ended, and how.
func (p *proc) exited() (bool, error) {
	select {
	case <-p.done:
		if p.err == nil {
			return true, fmt.Errorf("%s exited with status 0", p.name)
		}
		return true, fmt.Errorf("%s exited: %w", p.name, p.err)
	default:
		return false, nil
	}
}

// output is what this process has written to its log so far (its first
// MiB), without earlier tries' output.
func (p *proc) output() string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(p.logStart, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(f, 1<<20))
	return string(b)
}

// stop sends SIGTERM, waits up to timeout, then SIGKILLs and waits again.
func (p *proc) stop(timeout time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		p.log.Info("stopped", "component", p.name)
		return nil
	case <-time.After(timeout):
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
		p.log.Warn("killed after stop timeout", "component", p.name, "timeout", timeout)
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("stopping %s (pid %d): still running 5s after SIGKILL", p.name, p.cmd.Process.Pid)
	}
}

// failure wraps err with the component's name and the tail of its log, so a
// failed start says why without anyone opening files.
func (p *proc) failure(err error) error {
	return &ComponentError{Component: p.name, Log: p.logPath, Tail: tail(p.logPath, 25), Err: err}
}

// ComponentError is a component that failed to start or become ready.
type ComponentError struct {
	Component string
	Log       string
	Tail      string
	Err       error
}

func (e *ComponentError) Error() string {
	return fmt.Sprintf("%s: %v\n--- last lines of %s ---\n%s", e.Component, e.Err, e.Log, e.Tail)
}

func (e *ComponentError) Unwrap() error { return e.Err }

// tail returns the last n lines of a file, or a note saying why it cannot.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(bytes.TrimSpace(b)), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

var errNotReady = errors.New("not ready")
