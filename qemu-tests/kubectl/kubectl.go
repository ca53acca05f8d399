// Package kubectl runs the kubectl that `make kube` builds beside the
// control plane, with a test cluster's admin kubeconfig. The QEMU tests and
// `make demo` both drive logs, exec and debug node through it, so the two
// cannot drift in how they call kubectl or read its answers.
package kubectl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Runner is one kubectl binary and the kubeconfig it always uses.
type Runner struct {
	Path       string
	Kubeconfig string
}

// Find looks for kubectl in binDirs (controlplane.BinDirsUnder's answer).
func Find(binDirs []string, kubeconfig string) (Runner, error) {
	for _, d := range binDirs {
		p := filepath.Join(d, "kubectl")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return Runner{Path: p, Kubeconfig: kubeconfig}, nil
		}
	}
	return Runner{}, fmt.Errorf("kubectl not found in %v: run make kube", binDirs)
}

// Run runs kubectl with args, stdin (nil: none), bounded by timeout, and
// returns its stdout. A failure's error has the arguments, the exit status
// and stderr, since kubectl's reason is only ever in stderr.
func (r Runner) Run(ctx context.Context, timeout time.Duration, stdin io.Reader, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	full := append([]string{"--kubeconfig=" + r.Kubeconfig}, args...)
	cmd := exec.CommandContext(ctx, r.Path, full...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %s: %w", timeout, ctx.Err())
	}
	if err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w\nstderr: %s\nstdout: %s", strings.Join(args, " "), err, stderr.String(), stdout.String())
	}
	return stdout.String(), nil
}

// debugPodRE finds the pod kubectl debug node creates, in its first line.
var debugPodRE = regexp.MustCompile(`Creating debugging pod (\S+) with container`)

// DebugPod is the name of the pod `kubectl debug node/...` says it
// created, for deleting it after.
func DebugPod(out string) (string, bool) {
	m := debugPodRE.FindStringSubmatch(out)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// UntilOK retries call every interval until it succeeds, timeout passes
// or ctx ends: the first kubectl logs after a node joins may race
// kubelet's serving certificate. It says how long it took and how many
// tries; a failure keeps the last two errors.
func UntilOK(ctx context.Context, timeout, interval time.Duration, call func() (string, error)) (string, time.Duration, int, error) {
	start := time.Now()
	var errs []error
	for tries := 1; ; tries++ {
		out, err := call()
		if err == nil {
			return out, time.Since(start), tries, nil
		}
		errs = append(errs, err)
		if time.Since(start) > timeout || ctx.Err() != nil {
			return out, time.Since(start), tries, fmt.Errorf("%d tries in %s: %w", tries, time.Since(start).Round(time.Second), errors.Join(errs[max(0, len(errs)-2):]...))
		}
		select {
		case <-time.After(interval):
		case <-ctx.Done():
		}
	}
}

// DebugNodeShell is the documented way onto a berth node:
// `kubectl debug node/NODE -i --image=IMAGE -- sh`, with commands on the
// shell's stdin (no terminal for -t). The shell waits for its input, so
// nothing runs before kubectl attaches; but the attach may lose what a
// container prints just before it exits (seen in CI: an empty answer), so
// the pod's log, which has all the shell wrote, is what it returns once
// the pod has succeeded. attached is what the attach showed. The debug pod
// is deleted after.
func (r Runner) DebugNodeShell(ctx context.Context, timeout time.Duration, node, image, commands string) (logs, attached string, err error) {
	attached, err = r.Run(ctx, timeout, strings.NewReader(commands),
		"debug", "node/"+node, "-i", "--profile=general", "--image="+image, "--", "sh")
	pod, ok := DebugPod(attached)
	if !ok {
		if err == nil {
			err = fmt.Errorf("kubectl debug node/%s did not name its pod:\n%s", node, attached)
		}
		return "", attached, err
	}
	defer func() {
		// Best effort: a leftover debug pod costs the node nothing.
		_, _ = r.Run(ctx, timeout, nil, "delete", "pod", pod, "--wait=false")
	}()
	if err != nil {
		return "", attached, err
	}
	if _, err := r.Run(ctx, timeout, nil, "wait", "--for=jsonpath={.status.phase}=Succeeded", "--timeout="+timeout.String(), "pod/"+pod); err != nil {
		return "", attached, fmt.Errorf("debug pod %s did not end after its shell's input: %w", pod, err)
	}
	logs, err = r.Run(ctx, timeout, nil, "logs", pod)
	return logs, attached, err
}
