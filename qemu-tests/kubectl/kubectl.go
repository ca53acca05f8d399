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
