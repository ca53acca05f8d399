// Package mkfs runs a filesystem's mkfs tool for the mounts packages (the
// instance-store phase and the disk boot's data partition): the tool the
// image manifest lists, bounded in time, through the caller's runner (PID
// 1's reaper on a node), with the tool's output in the error.
package mkfs

import (
	"context"
	"fmt"
	"os/exec"
	"path"
	"strings"
	"time"
)

// DefaultDir is where a tool the manifest does not list is looked for.
const DefaultDir = "/usr/sbin"

// Timeout bounds one run. mkfs without discard takes well under a second
// per TB.
const Timeout = 2 * time.Minute

// Runner runs cmd and returns its combined output, killing it when ctx
// ends. Under PID 1 it must go through the reaper (reaper.CombinedOutput):
// os/exec's own Wait would race PID 1's wait4(-1) loop and lose mkfs's
// exit status.
type Runner func(ctx context.Context, cmd *exec.Cmd) ([]byte, error)

// Tool is the path of mkfs.<fstype>: the entry in tools (the image
// manifest's Tools) when there is one, DefaultDir/mkfs.<fstype> otherwise.
// listed says whether the manifest named it.
func Tool(tools map[string]string, fstype string) (bin string, listed bool) {
	name := "mkfs." + fstype
	if p := tools[name]; p != "" {
		return p, true
	}
	return path.Join(DefaultDir, name), false
}

// Run runs bin with args through run (nil: os/exec, for callers that are
// not PID 1), bounded by Timeout. A failure's error wraps the runner's and
// ends with the tool's output (its last 500 bytes).
func Run(ctx context.Context, run Runner, bin string, args ...string) error {
	if run == nil {
		run = runExec
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	out, err := run(ctx, exec.Command(bin, args...))
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if len(msg) > 500 {
			msg = "..." + msg[len(msg)-500:]
		}
		return fmt.Errorf("%w: %s", err, msg)
	}
	return nil
}

// runExec is a Runner on os/exec, killing cmd when ctx ends; for callers
// that are not PID 1 (host tests).
func runExec(ctx context.Context, cmd *exec.Cmd) ([]byte, error) {
	c := exec.CommandContext(ctx, cmd.Path)
	c.Args, c.Env, c.Dir = cmd.Args, cmd.Env, cmd.Dir
	out, err := c.CombinedOutput()
	if err != nil && ctx.Err() != nil {
		return out, ctx.Err()
	}
	return out, err
}
