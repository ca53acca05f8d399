package main

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/runtime/supervise"
)

// TestJoinWatcher: the wiring. Which line is a cause is joincause's
// decision and tested there; here, the demo's FLAG line is not shown, the
// registration failure is, and the registration line ends the wait.
func TestJoinWatcher(t *testing.T) {
	w := &joinWatcher{registered: make(chan struct{})}
	w.line(`I1123 23:36:56.874953    4025 flags.go:64] FLAG: --rotate-server-certificates="false"`)
	if got := w.kubeletCause(time.Now()); got != "" {
		t.Errorf("after a FLAG line the cause is %q, want none from kubelet", got)
	}
	w.line(`E1122 11:21:37.393991     141 kubelet_node_status.go:106] "Unable to register node with API server" err="Post \"https://10.0.2.2:6443/api/v1/nodes\": dial tcp 10.0.2.2:6443: connect: connection refused" node="ip-10-0-2-15"`)
	w.line(`E1122 11:21:38.575048     141 manager.go:525] "Failed to read data from checkpoint" err="checkpoint is not found" checkpoint="kubelet_internal_checkpoint"`)
	want := `Unable to register node with API server: Post "https://10.0.2.2:6443/api/v1/nodes": dial tcp 10.0.2.2:6443: connect: connection refused`
	if got := w.kubeletCause(time.Now()); got != want {
		t.Errorf("cause\n got %q\nwant %q (the registration failure, not the checkpoint noise)", got, want)
	}
	w.line(`I1122 11:21:40.000000     141 kubelet_node_status.go:78] "Successfully registered node" node="ip-10-0-2-15"`)
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
	// Running again after a failed run, its new run's error-level noise
	// is no cause: what the last run died of is.
	const noise = `time="2026-11-30T00:03:08Z" level=error msg="failed to load cni during init"`
	again := []supervise.Status{
		{Name: "containerd", State: supervise.StateRunning, Restarts: 4, LastErrorLine: noise, ExitErrorLine: why},
		{Name: "kubelet", State: supervise.StateWaiting},
	}
	if got := waitingCause(again); !strings.Contains(got, "containerd (running, 4 restarts)") || !strings.HasSuffix(got, why) {
		t.Errorf("cause %q, want what containerd's last run died of, not its new run's noise", got)
	}
	noWords := []supervise.Status{{Name: "containerd", State: supervise.StateRunning}, {Name: "kubelet", State: supervise.StateWaiting}}
	if got := waitingCause(noWords); !strings.Contains(got, "containerd (running, 0 restarts): it has not said why yet") {
		t.Errorf("cause %q", got)
	}
}
