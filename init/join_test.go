package main

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/runtime/supervise"
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

// TestWaitingCause: with kubelet held back by a crash-looping containerd,
// the join watcher's cause is containerd's own last words.
func TestWaitingCause(t *testing.T) {
	const why = "containerd: failed to load TOML from /etc/containerd/config.toml: expected containerd config version equal to or less than `3`, got `99`"
	waiting := []supervise.Status{
		{Name: "containerd", State: supervise.StateBackoff, Restarts: 4, LastErrorLine: why},
		{Name: "kubelet", State: supervise.StateWaiting},
	}
	got := waitingCause(waiting)
	if !strings.Contains(got, "kubelet is waiting for containerd (backoff, 4 restarts)") || !strings.HasSuffix(got, why) {
		t.Errorf("cause %q, want containerd named with its own error line", got)
	}
	started := []supervise.Status{
		{Name: "containerd", State: supervise.StateReady},
		{Name: "kubelet", State: supervise.StateRunning, StartedAt: time.Now()},
	}
	if got := waitingCause(started); got != "" {
		t.Errorf("kubelet started: cause %q, want none (kubelet's own lines say why)", got)
	}
	noWords := []supervise.Status{{Name: "containerd", State: supervise.StateRunning}, {Name: "kubelet", State: supervise.StateWaiting}}
	if got := waitingCause(noWords); !strings.Contains(got, "containerd (running, 0 restarts): it has not said why yet") {
		t.Errorf("cause %q", got)
	}
}
