package reaper

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/berth-node/berth/internal/safe"
)

// killWait bounds how long Exec and CombinedOutput wait for a child they
// killed to be reaped: SIGKILL cannot be ignored, but a child stuck in the
// kernel (D state, a hung disk) takes as long as it takes.
const killWait = 5 * time.Second

// Exec starts cmd, waits for it and returns how it ended: the
// replacement for cmd.Run for every program berth runs (mkfs, mdadm...),
// since cmd.Run would race the reaper. When ctx ends first the child is
// killed; the error then wraps ctx's.
func (r *Reaper) Exec(ctx context.Context, cmd *exec.Cmd) (ExitStatus, error) {
	p, err := r.Start(cmd)
	if err != nil {
		return ExitStatus{}, err
	}
	return p.waitOrKill(ctx)
}

func (p *Process) waitOrKill(ctx context.Context) (ExitStatus, error) {
	st, err := p.Wait(ctx)
	if err == nil {
		return st, nil
	}
	_ = p.Signal(syscall.SIGKILL)
	kctx, cancel := context.WithTimeout(context.Background(), killWait)
	defer cancel()
	if st, kerr := p.Wait(kctx); kerr == nil {
		return st, fmt.Errorf("%s (pid %d) killed: %w", p.cmd.Path, p.pid, ctx.Err())
	}
	return ExitStatus{}, fmt.Errorf("%s (pid %d) killed, and not reaped %v later: %w", p.cmd.Path, p.pid, killWait, ctx.Err())
}

// outputLimit keeps CombinedOutput's memory bounded against a chatty child:
// only the last outputLimit bytes are kept (errors are at the end).
const outputLimit = 256 << 10

// CombinedOutput is Exec with stdout and stderr captured together, as
// cmd.CombinedOutput would, through a pipe it owns (see the package doc on
// why not an io.Writer). cmd.Stdout and cmd.Stderr must be unset. A
// grandchild that keeps the pipe open does not make it hang: once the child
// is reaped, the output is read for at most a second more.
func (r *Reaper) CombinedOutput(ctx context.Context, cmd *exec.Cmd) ([]byte, ExitStatus, error) {
	out := &tailBuffer{max: outputLimit}
	st, err := r.combinedOutput(ctx, cmd, out)
	return out.Bytes(), st, err
}

// Output is CombinedOutput for callers that want one error: a program
// that exits non-zero or by a signal is an error naming it and how it
// ended. It is the shape of the runner PID 1's phases hand their tools
// (mkfs, iptables, ctr): a method value, r.Output.
func (r *Reaper) Output(ctx context.Context, cmd *exec.Cmd) ([]byte, error) {
	out, st, err := r.CombinedOutput(ctx, cmd)
	if err != nil {
		return out, err
	}
	if !st.Success() {
		return out, fmt.Errorf("%s: %s", cmd.Path, st)
	}
	return out, nil
}

// combinedOutput is CombinedOutput copying the output to out. A panic in
// the copy (out's Write) is logged and becomes part of the returned
// error, the output being incomplete; the pipe is still drained to its
// end, so that the child neither blocks on a full pipe nor dies of
// SIGPIPE, and copied is still closed.
func (r *Reaper) combinedOutput(ctx context.Context, cmd *exec.Cmd, out io.Writer) (ExitStatus, error) {
	if cmd.Stdout != nil || cmd.Stderr != nil {
		return ExitStatus{}, errors.New("reaper: CombinedOutput: Stdout or Stderr already set")
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return ExitStatus{}, fmt.Errorf("running %s: %w", cmd.Path, err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	p, err := r.Start(cmd)
	pw.Close() // the child has its own copy; EOF comes when it and its children close theirs
	if err != nil {
		pr.Close()
		return ExitStatus{}, err
	}
	copied := make(chan struct{}) // closed once, by whichever of the two functions ends the copier
	var copyErr error             // written before copied is closed
	safe.Go(r.log, "output of "+cmd.Path, func() {
		_, _ = io.Copy(out, pr)
		close(copied)
	}, func(p *safe.Panic) {
		copyErr = fmt.Errorf("copying the output of %s: %w", cmd.Path, p)
		_, _ = io.Copy(io.Discard, pr)
		close(copied)
	})
	st, werr := p.waitOrKill(ctx)
	select {
	case <-copied:
	case <-time.After(time.Second):
		// Unblocks the copy: the read end is closed under it.
		pr.SetReadDeadline(time.Now())
		<-copied
	}
	pr.Close()
	if copyErr != nil {
		return st, errors.Join(werr, copyErr)
	}
	return st, werr
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   bytes.Buffer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b.Write(p)
	if over := t.b.Len() - t.max; over > 0 {
		t.b.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bytes.Clone(t.b.Bytes())
}
