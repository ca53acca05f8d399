package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/berth-node/berth/config/manifest/builtin"
	"github.com/berth-node/berth/config/nodeconfig"
	"github.com/berth-node/berth/runtime/containerd"
)

// Every node of a run gets the e2e NodeConfig part, and the containerd
// config berth renders from it holds what the suite's RuntimeClass specs
// look for: the check in k8s.io/kubernetes test/e2e/framework/node/
// runtimeclass (NodeSupportsPreconfiguredRuntimeClassHandler) greps
// /etc/containerd/config.toml for 'runtimes.test-handler' (its
// PreconfiguredRuntimeClassHandler), and the handler must run pods: runc.
// A node would take the part: strict validation against what berth's
// containerd accepts finds nothing in it (the part alone lacks only the
// cluster, which each node's join gives).
func TestE2ENodeConfig(t *testing.T) {
	cfg, problems, err := nodeconfig.Parse("e2e-node.yaml", e2eNodeConfig)
	if err != nil || len(problems) > 0 {
		t.Fatalf("e2e-node.yaml: %v %v", err, problems)
	}
	m, err := builtin.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	checked, _ := nodeconfig.CheckWith(nodeconfig.Options{Accepts: m.Accepts}, true, "e2e-node.yaml")
	for _, p := range checked {
		if p.Path == "" || !strings.HasPrefix(p.Path, "spec.cluster.") {
			t.Errorf("a node would find in e2e-node.yaml: %v", p)
		}
	}
	rendered, err := containerd.Config(containerd.ConfigInputs{Schema: 3, User: cfg.Spec.Containerd.Config})
	if err != nil {
		t.Fatal(err)
	}
	// grep's pattern, as the suite gives it (its '.' matches any byte).
	if !regexp.MustCompile(`runtimes.test-handler`).Match(rendered) {
		t.Errorf("the rendered config.toml lacks the suite's runtimes.test-handler:\n%s", rendered)
	}
	if !regexp.MustCompile(`(?m)^\[plugins\.'io\.containerd\.cri\.v1\.runtime'\.containerd\.runtimes\.test-handler\]\nruntime_type = 'io\.containerd\.runc\.v2'$`).Match(rendered) {
		t.Errorf("test-handler is not a runc runtime of containerd 2's CRI:\n%s", rendered)
	}
	// berth's own default runtime stands beside it.
	if !regexp.MustCompile(`(?m)^default_runtime_name = 'runc'$`).Match(rendered) {
		t.Errorf("the default runtime changed:\n%s", rendered)
	}

	dir := t.TempDir()
	args, err := e2eNodeArgs(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "e2e-node.yaml")
	want := []string{"-node-config", "node-a=" + path, "-node-config", "node-b=" + path, "-node-config", "node-c=" + path}
	if !slices.Equal(args, want) {
		t.Errorf("the cluster's flags: %q, want %q", args, want)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != string(e2eNodeConfig) {
		t.Errorf("the part written: %q, %v", b, err)
	}
}
