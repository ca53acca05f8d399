package qemutests

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
	"testing"
	"time"

	"github.com/berth-node/berth/qemu-tests/controlplane"
	"github.com/berth-node/berth/qemu-tests/qemu"
)

// kubectlTimeout bounds one kubectl call under TCG: the apiserver reaches
// the kubelet through the test's CONNECT proxy and QEMU's slirp.
const kubectlTimeout = 2 * time.Minute

// kubectlPath finds the kubectl `make kube` built beside the control plane.
func kubectlPath(t *testing.T) string {
	t.Helper()
	dirs, err := controlplane.BinDirsUnder(componentsDir(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		p := filepath.Join(d, "kubectl")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
	}
	t.Fatalf("kubectl not found in %v: run make kube", dirs)
	return ""
}

// kubectl runs kubectl with the cluster's admin kubeconfig, bounded by
// timeout, and returns its stdout. A failure's error has the arguments,
// the exit status and stderr.
func kubectl(t *testing.T, cluster *controlplane.Cluster, timeout time.Duration, args ...string) (string, error) {
	t.Helper()
	return kubectlIn(t, cluster, timeout, nil, args...)
}

// kubectlIn is kubectl with stdin (nil: none).
func kubectlIn(t *testing.T, cluster *controlplane.Cluster, timeout time.Duration, stdin io.Reader, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	full := append([]string{"--kubeconfig=" + cluster.Kubeconfig()}, args...)
	cmd := exec.CommandContext(ctx, kubectlPath(t), full...)
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

// routeKubelet registers the VM's kubelet hostfwd (qemu.FwdKubelet on its
// NIC) with the control plane's egress proxy under the node's name, so
// kubectl logs, exec and debug reach it.
func routeKubelet(t *testing.T, cluster *controlplane.Cluster, vm *qemu.VM, node string) {
	t.Helper()
	port, err := vm.HostFwdPort(controlplane.KubeletPort)
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.RouteKubelet(node, port); err != nil {
		t.Fatal(err)
	}
}

// kubectlLogs is `kubectl logs -n ns pod`.
func kubectlLogs(t *testing.T, cluster *controlplane.Cluster, ns, pod string) (string, error) {
	t.Helper()
	return kubectl(t, cluster, kubectlTimeout, "logs", "-n", ns, pod)
}

// kubectlExec is `kubectl exec -n ns pod -- cmd...`.
func kubectlExec(t *testing.T, cluster *controlplane.Cluster, ns, pod string, cmd ...string) (string, error) {
	t.Helper()
	return kubectl(t, cluster, kubectlTimeout, append([]string{"exec", "-n", ns, pod, "--"}, cmd...)...)
}

// debugPodRE finds the pod kubectl debug node creates, in its first line.
var debugPodRE = regexp.MustCompile(`Creating debugging pod (\S+) with container`)

// untilOK retries call until it succeeds or timeout passes (the first call
// after a node joins may race kubelet's serving certificate), and says how
// long it took and how many tries.
func untilOK(timeout time.Duration, call func() (string, error)) (string, time.Duration, int, error) {
	start := time.Now()
	var errs []error
	for tries := 1; ; tries++ {
		out, err := call()
		if err == nil {
			return out, time.Since(start), tries, nil
		}
		errs = append(errs, err)
		if time.Since(start) > timeout {
			return out, time.Since(start), tries, fmt.Errorf("%d tries in %s: %w", tries, time.Since(start).Round(time.Second), errors.Join(errs[max(0, len(errs)-2):]...))
		}
		time.Sleep(3 * time.Second)
	}
}
