package qemutests

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/berth-node/berth/qemu-tests/controlplane"
	kubectlpkg "github.com/berth-node/berth/qemu-tests/kubectl"
)

// kubectlTimeout bounds one kubectl call under TCG: the apiserver reaches
// the kubelet through the test's CONNECT proxy and QEMU's slirp.
const kubectlTimeout = 2 * time.Minute

// kubectlRunner finds the kubectl `make kube` built beside the control
// plane, with the cluster's admin kubeconfig.
func kubectlRunner(t *testing.T, cluster *controlplane.Cluster) kubectlpkg.Runner {
	t.Helper()
	dirs, err := controlplane.BinDirsUnder(componentsDir(t))
	if err != nil {
		t.Fatal(err)
	}
	r, err := kubectlpkg.Find(dirs, cluster.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	return r
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
	return kubectlRunner(t, cluster).Run(context.Background(), timeout, stdin, args...)
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

// untilOK retries call until it succeeds or timeout passes (the first call
// after a node joins may race kubelet's serving certificate), and says how
// long it took and how many tries.
func untilOK(timeout time.Duration, call func() (string, error)) (string, time.Duration, int, error) {
	return kubectlpkg.UntilOK(context.Background(), timeout, 3*time.Second, call)
}
