package qemutests

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/qemu-tests/controlplane"
)

// TestRolloutManifests applies the rollout controller's CRD and manifests
// (rollout/deploy) to a real kube-apiserver, the judge of what its unit
// tests only predict: the CRD's schema, defaults and CEL rules, and every
// object of controller.yaml, are accepted as written; an Update created
// without the defaulted fields reads back with the API server's defaults,
// which must be the Go types' (decide.ParseSpec's); `kubectl get updates`
// shows the printer columns; the version cannot change; a window whose
// start is its end is refused with the rule's message. No node boots:
// the controller's rollouts on berth nodes are issue 46's cluster tests.
func TestRolloutManifests(t *testing.T) {
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
}
