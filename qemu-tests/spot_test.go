package qemutests

import (
	"fmt"
	"regexp"
	"testing"
	"time"
)

// A spot interruption notice on a joined node running a pod: the IMDS
// stand-in starts answering spot/instance-action, and the node shuts
// itself down in order (kubelet, the pods, containerd) and powers off,
// with no one pressing a button. The console names the notice.
func TestSpotInterruption(t *testing.T) {
	cluster := startControlPlane(t)
	info := cluster.Info()
	vm, _, srv := bootJoinedWith(t, cluster, cluster.nodeConfig())
	if _, err := vm.Expect(regexp.MustCompile(`lifecycle: watching IMDS for lifecycle notices .*spot=shutdown`), time.Minute); err != nil {
		t.Fatalf("the lifecycle watcher did not start: %v", err)
	}

	a := api{c: cluster.Client(), base: info.HostEndpoint}
	node := "ip-10-0-2-15.us-west-2.compute.internal"
	waitNodeReady(t, vm, a, node)
	if err := a.do("POST", "/api/v1/namespaces/default/pods", demoPod("default", "spot-demo", node), nil); err != nil {
		t.Fatal(err)
	}
	waitPodRunning(t, vm, a, "spot-demo")

	// EC2 gives two minutes; the notice's time says when.
	at := time.Now().Add(2 * time.Minute).UTC().Truncate(time.Second)
	if err := srv.SetSpotAction("terminate", at); err != nil {
		t.Fatal(err)
	}
	appeared := time.Now()
	notice := fmt.Sprintf("spot interruption notice: terminate at %s", at.Format(time.RFC3339))
	if _, err := vm.Expect(regexp.MustCompile(`lifecycle: lifecycle notice: `+regexp.QuoteMeta(notice)+`: starting the graceful shutdown`), time.Minute); err != nil {
		t.Fatalf("the console does not name the notice: %v\nconsole tail:\n%s", err, vm.ConsoleTail(40))
	}
	seen := time.Since(appeared)
	if err := vm.WaitExit(powerOffBound); err != nil {
		t.Fatalf("the node did not power off within %s of the notice: %v\nconsole tail:\n%s", powerOffBound, err, vm.ConsoleTail(40))
	}
	figure(t, "spot notice to berth acting on it: %.1f s; to QEMU exit: %.1f s (wall, poll interval 5 s)",
		seen.Seconds(), time.Since(appeared).Seconds())
	// The same graceful shutdown as the power button's.
	checkShutdownAftermath(t, a, node, []podRef{{"default", "spot-demo"}})

	expectShutdownInOrder(t, vm, regexp.MustCompile(`lifecycle: shutdown requested reason="`+regexp.QuoteMeta(notice)+`"`))
	if _, err := vm.Expect(regexp.MustCompile(`Kernel panic`), 0); err == nil {
		t.Errorf("kernel panicked during the shutdown")
	}
}
