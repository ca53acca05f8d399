package main

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-node/berth/nodeconfig"
)

func TestJoinCause(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{`E1122 11:21:37.393991     141 kubelet_node_status.go:106] "Unable to register node with API server" err="Post \"https://10.0.2.2:6443/api/v1/nodes\": getting credentials: exec: executable aws not found" node="ip-10-0-2-15"`,
			`Post "https://10.0.2.2:6443/api/v1/nodes": getting credentials: exec: executable aws not found`},
		{`E1122 bootstrap.go:1] "x509: certificate signed by unknown authority"`,
			`E1122 bootstrap.go:1] "x509: certificate signed by unknown authority"`},
		{`err="unterminated`, `err="unterminated`},
	} {
		if got := joinCause(tc.line); got != tc.want {
			t.Errorf("joinCause(%q)\n got %q\nwant %q", tc.line, got, tc.want)
		}
	}
}

func TestJoinWatcherKeepsOnlyJoinErrors(t *testing.T) {
	w := &joinWatcher{registered: make(chan struct{})}
	w.line(`E1122 "Unable to register node with API server" err="connection refused"`)
	w.line(`E1122 "checkpoint is not found" checkpoint="kubelet_internal_checkpoint"`)
	if w.lastErr == "" || joinCause(w.lastErr) != "connection refused" {
		t.Errorf("last join error = %q, want the registration failure (not the checkpoint noise)", w.lastErr)
	}
	w.line(`I1122 kubelet_node_status.go:78] "Successfully registered node" node="n"`)
	select {
	case <-w.registered:
	default:
		t.Error("registration line not noticed")
	}
}

func TestCgroupPIDs(t *testing.T) {
	root := t.TempDir()
	for p, data := range map[string]string{
		"cgroup.procs":                "",
		"pod1/cgroup.procs":           "10\n11\n",
		"pod1/container/cgroup.procs": "12\n",
		"pod2/cgroup.procs":           "20\n",
		"pod2/cgroup.controllers":     "cpu memory\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := map[int]bool{}
	for _, pid := range cgroupPIDs(root) {
		got[pid] = true
	}
	for _, want := range []int{10, 11, 12, 20} {
		if !got[want] {
			t.Errorf("pid %d missing from %v", want, got)
		}
	}
	if len(got) != 4 {
		t.Errorf("pids %v, want 4", got)
	}
}

func TestPodGracePeriod(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	cfg := func(v string) *nodeconfig.Result {
		nc := &nodeconfig.NodeConfig{}
		if v != "" {
			nc.Spec.Kubelet.Config = nodeconfig.InlineDocument{"shutdownGracePeriod": json.RawMessage(v)}
		}
		return &nodeconfig.Result{Config: nc}
	}
	for _, tc := range []struct {
		name string
		res  *nodeconfig.Result
		want time.Duration
	}{
		{"no config", nil, podGrace},
		{"not set", cfg(""), podGrace},
		{"set", cfg(`"45s"`), 45 * time.Second},
		{"not a duration", cfg(`"soon"`), podGrace},
		{"not a string", cfg(`30`), podGrace},
		{"too long", cfg(`"1h"`), podGrace},
	} {
		if got := podGracePeriod(tc.res, log); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
