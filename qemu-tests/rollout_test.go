package qemutests

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-node/berth/qemu-tests/controlplane"
	"github.com/berth-node/berth/rollout/controller"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestRolloutAPIServer applies the rollout controller's CRD and manifests
// (rollout/deploy) to a real kube-apiserver, the judge of what its unit
// tests only predict: the CRD's schema, defaults and CEL rules, and every
// object of controller.yaml, are accepted as written; an Update created
// without the defaulted fields reads back with the API server's defaults,
// which must be the Go types' (decide.ParseSpec's); `kubectl get updates`
// shows the printer columns; the version cannot change; a window whose
// start is its end is refused with the rule's message. Then the
// controller itself (in-process, rollout/controller) rolls two Node
// objects from 1.0.0 to 1.0.1 through that API server while a stand-in
// agent plays each node's part (heartbeats, and on berth.dev/update-to:
// downloading, trial on the new version, blessed), and never more than
// one is cordoned. No node boots: the controller's rollouts on berth
// nodes, with drains and reboots, are TestRollout's.
func TestRolloutAPIServer(t *testing.T) {
	dirs, err := controlplane.BinDirsUnder(componentsDir(t))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cp, err := controlplane.Start(context.Background(), log, controlplane.Options{BinDirs: dirs})
	if err != nil {
		t.Fatalf("starting the control plane: %v", err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	const timeout = time.Minute
	run := func(args ...string) string {
		t.Helper()
		out, err := kubectl(t, cp, timeout, args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	// go test runs in the package directory, qemu-tests/.
	deploy := filepath.Join("..", "rollout", "deploy")
	run("apply", "-f", filepath.Join(deploy, "crd.yaml"))
	run("wait", "--for=condition=Established", "crd/updates.updates.berth.dev", "--timeout=60s")
	if out := run("apply", "-f", filepath.Join(deploy, "controller.yaml")); !strings.Contains(out, "deployment.apps/berth-rollout") {
		t.Errorf("controller.yaml applied without its Deployment:\n%s", out)
	}
	run("apply", "-f", filepath.Join(deploy, "example-update.yaml"))

	// An Update naming only its version takes the API server's defaults.
	min := filepath.Join(t.TempDir(), "min.yaml")
	if err := os.WriteFile(min, []byte("apiVersion: updates.berth.dev/v1alpha1\nkind: Update\nmetadata:\n  name: bare\nspec:\n  version: 1.0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run("apply", "-f", min)
	got := run("get", "update", "bare", "-o", "jsonpath={.spec.maxUnavailable} {.spec.soak} {.spec.drainTimeout} {.spec.nodeTimeout}")
	if want := "1 2m 10m 20m"; strings.TrimSpace(got) != want {
		t.Errorf("defaults of an Update naming only its version: %q, want %q (the Go types' defaults)", got, want)
	}
	if out := run("get", "updates"); !strings.Contains(out, "VERSION") || !strings.Contains(out, "workers-1.2.0") || !strings.Contains(out, "1.0.1") {
		t.Errorf("kubectl get updates:\n%s\nwant the printer columns and both Updates", out)
	}

	// The CEL rules hold on the real server.
	out, err := kubectl(t, cp, timeout, "patch", "update", "bare", "--type=merge", "-p", `{"spec":{"version":"1.0.2"}}`)
	if err == nil || !strings.Contains(out+err.Error(), "version cannot change") {
		t.Errorf("changing an Update's version: %v\n%s\nwant it refused with the rule's message", err, out)
	}
	out, err = kubectl(t, cp, timeout, "patch", "update", "bare", "--type=merge", "-p",
		`{"spec":{"maintenanceWindow":{"days":["Mon"],"start":"02:00","end":"02:00"}}}`)
	if err == nil || !strings.Contains(out+err.Error(), "start and end must differ") {
		t.Errorf("a window whose start is its end: %v\n%s\nwant it refused with the rule's message", err, out)
	}

	run("delete", "update", "bare", "workers-1.2.0")
	rolloutTwoNodes(t, cp, run)
}

// rolloutTwoNodes runs the controller against cp's API server over two
// Node objects that a stand-in agent answers for.
func rolloutTwoNodes(t *testing.T, cp *controlplane.Cluster, run func(args ...string) string) {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", cp.Info().Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	// Both goroutines end before the test does: the controller logs to t.
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	names := []string{"fake-a", "fake-b"}
	for _, n := range names {
		_, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n,
			Labels:      map[string]string{"pool": "rollout-test"},
			Annotations: map[string]string{"berth.dev/version": "1.0.0", "berth.dev/slot": "a", "berth.dev/update-state": "idle"}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The stand-in agent: a heartbeat every round (the node lifecycle
	// controller marks a silent node NotReady), and on update-to the
	// agent's states, one a round.
	var mu sync.Mutex
	maxCordoned, asked := 0, map[string]int{}
	agentErr := make(chan error, 1)
	wg.Go(func() {
		for ctx.Err() == nil {
			cordoned := 0
			for _, n := range names {
				nd, err := kube.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
				if err != nil {
					continue
				}
				if nd.Spec.Unschedulable {
					cordoned++
				}
				now := metav1.Now()
				nd.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
					LastHeartbeatTime: now, LastTransitionTime: now}}
				if _, err := kube.CoreV1().Nodes().UpdateStatus(ctx, nd, metav1.UpdateOptions{}); err != nil {
					continue
				}
				a := nd.Annotations
				next := ""
				switch want := a["berth.dev/update-to"]; {
				case want == "" || a["berth.dev/version"] == want && a["berth.dev/update-state"] == "blessed":
				case a["berth.dev/update-state"] == "idle":
					next = `{"metadata":{"annotations":{"berth.dev/update-state":"downloading"}}}`
					mu.Lock()
					asked[n]++
					mu.Unlock()
				case a["berth.dev/update-state"] == "downloading":
					next = `{"metadata":{"annotations":{"berth.dev/update-state":"trial","berth.dev/version":"` + want + `","berth.dev/slot":"b"}}}`
				case a["berth.dev/update-state"] == "trial":
					next = `{"metadata":{"annotations":{"berth.dev/update-state":"blessed"}}}`
				}
				if next != "" {
					if _, err := kube.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, []byte(next), metav1.PatchOptions{}); err != nil && ctx.Err() == nil {
						select {
						case agentErr <- err:
						default:
						}
					}
				}
			}
			mu.Lock()
			maxCordoned = max(maxCordoned, cordoned)
			mu.Unlock()
			time.Sleep(300 * time.Millisecond)
		}
	})
	ctl := controller.New(controller.Options{Kube: kube, Dynamic: dyn, Poll: time.Second, Instance: "test",
		Log: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	wg.Go(func() { ctl.Run(ctx) })

	upd := filepath.Join(t.TempDir(), "roll.yaml")
	if err := os.WriteFile(upd, []byte("apiVersion: updates.berth.dev/v1alpha1\nkind: Update\nmetadata:\n  name: roll\nspec:\n  version: 1.0.1\n"+
		"  nodeSelector: {matchLabels: {pool: rollout-test}}\n  soak: 2s\n  nodeTimeout: 2m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	run("apply", "-f", upd)
	var phase string
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		phase = strings.TrimSpace(run("get", "update", "roll", "-o", "jsonpath={.status.phase} {.status.done}/{.status.total}"))
		if strings.HasPrefix(phase, "Completed") || strings.HasPrefix(phase, "Stopped") {
			break
		}
	}
	if phase != "Completed 2/2" {
		t.Fatalf("the rollout is %q, want Completed 2/2:\n%s\n%s", phase, run("get", "update", "roll", "-o", "yaml"), run("get", "nodes", "-o", "yaml"))
	}
	figure(t, "rollout of two stand-in nodes (soak 2 s, 1 s rounds) against the real API server: %.1f s", time.Since(start).Seconds())
	select {
	case err := <-agentErr:
		t.Errorf("the stand-in agent's patch: %v", err)
	default:
	}
	mu.Lock()
	defer mu.Unlock()
	if maxCordoned != 1 {
		t.Errorf("at most %d nodes cordoned at once, want 1 (maxUnavailable 1)", maxCordoned)
	}
	for _, n := range names {
		nd, err := kube.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if nd.Spec.Unschedulable || nd.Annotations["berth.dev/version"] != "1.0.1" || nd.Annotations["berth.dev/update-to"] != "" || nd.Annotations["berth.dev/rollout"] != "" || asked[n] != 1 {
			t.Errorf("%s after the rollout: unschedulable %t, annotations %v, asked %d times: want uncordoned, on 1.0.1, released, asked once",
				n, nd.Spec.Unschedulable, nd.Annotations, asked[n])
		}
	}
}
