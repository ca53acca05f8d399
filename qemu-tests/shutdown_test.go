package qemutests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-node/berth/qemu-tests/qemu"
)

// Graces shorter than a node's 2m30s keep TestJoin's power-off quick: the
// normal pods get 90s - 10s, the critical ones 10s (startEKSNode's user
// data). kubelet releases its inhibitor as soon as its pods are done, so
// the grace costs time only when kubelet needs it: unloaded, with only
// the two pods of gracefulNodeShutdown, the whole shutdown took 22 s; on
// TestJoin's node, with its demo and HostLimits pods in the normal group
// too, 73 s on a busy 2-core host (the normal pods' status at 50 s, the
// inhibitor released at 62 s). kubelet 1.35 waits, within each priority
// group's period, for the group's projected volumes to unmount ("Failed
// while waiting for all the volumes belonging to Pods in this group to
// unmount" when the period runs out first). With 20s - 8s the normal
// group's 12 s ran out on that wait in a cold run; with 40s - 10s, under
// make test-qemu-busy's hog, the normal pod was marked at 29.7 s once and
// not at all in the next loaded run (kubelet used the whole 40 s); the
// critical one is not marked under the hog (see below).
const (
	gracefulPeriod  = 90 * time.Second
	gracefulCrit    = 10 * time.Second
	nodeShutdownMsg = "Pod was terminated in response to imminent node shutdown."
)

// powerOff is when TestJoin's node got its one power button and when QEMU
// exited; zero until each happens. Whoever presses the button (the
// GracefulShutdown subtest, else TestJoin) sets pressed at once, so that a
// subtest that fails halfway is not followed by a second press.
type powerOff struct{ pressed, exited time.Time }

// gracefulNodeShutdown (TestJoin's GracefulShutdown, the last thing before
// the power-off, which it does): kubelet's graceful node shutdown through
// berth's logind. On system_powerdown berth sends PrepareForShutdown,
// kubelet runs the normal pod's preStop hook (an HTTP call to the test,
// through QEMU's user network) and terminates it (5 s to exit) with the
// node's other normal-priority pods (TestJoin's demo pod among them), then
// the system-node-critical one, reports them and the node NotReady,
// releases its inhibitor, and only then does berth stop kubelet and power
// off. The kubelet config's grace periods are the user data's
// (gracefulPeriod, gracefulCrit).
func gracefulNodeShutdown(t *testing.T, vm *qemu.VM, a api, node string, off *powerOff) {
	// The premise: berth planned, and kubelet told logind, the user data's
	// periods rather than the node's defaults.
	plan, err := vm.Shell("grep '^shutdown:' /run/berth/plan.txt", shellTimeout)
	if err != nil {
		t.Fatalf("reading the plan: %v %s", err, plan)
	}
	if want := fmt.Sprintf("shutdown: kubelet's graceful node shutdown %s (critical pods %s)", gracefulPeriod, gracefulCrit); !strings.Contains(plan, want) {
		t.Fatalf("plan.txt says %q, want %q from the user data's kubelet config", plan, want)
	}
	reloaded := ""
	for _, l := range vm.Lines() {
		if strings.Contains(l.Text, "logind: logind configuration reloaded") {
			reloaded = l.Text
		}
	}
	if !strings.Contains(reloaded, "inhibit_delay_max="+gracefulPeriod.String()+" ") {
		t.Fatalf("kubelet did not set logind's InhibitDelayMaxSec to its shutdownGracePeriod %s; last reload line: %q", gracefulPeriod, reloaded)
	}
	waitNodeReady(t, vm, a, node)

	hooks := newHookServer(t)
	normal := demoPod("default", "normal", node)
	normalC := normal["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	normalC["env"] = []any{map[string]any{"name": "DEMO_STOP_DELAY", "value": "5s"}}
	// kubelet makes the call from the node: QEMU's user network takes
	// 10.0.2.2 to the host's loopback, where hooks listens.
	normalC["lifecycle"] = map[string]any{"preStop": map[string]any{"httpGet": map[string]any{
		"host": "10.0.2.2", "port": hooks.addr.Port(), "path": "/prestop/normal"}}}
	critical := demoPod("kube-system", "critical", node)
	critical["spec"].(map[string]any)["priorityClassName"] = "system-node-critical"
	// system-node-critical pods are admitted in kube-system only.
	pods := []podRef{{"default", "normal"}, {"kube-system", "critical"}}
	if err := a.do("POST", "/api/v1/namespaces/default/pods", normal, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.do("POST", "/api/v1/namespaces/kube-system/pods", critical, nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		waitFor(t, vm, p.ns+"/"+p.name+" Running", podTimeout, func() (bool, string) {
			var st struct {
				Status struct{ Phase string } `json:"status"`
			}
			if err := a.do("GET", "/api/v1/namespaces/"+p.ns+"/pods/"+p.name, nil, &st); err != nil {
				return false, err.Error()
			}
			return st.Status.Phase == "Running", st.Status.Phase
		})
	}

	// Watch the API server while the node goes down: when each pod first
	// shows kubelet's node-shutdown status, and when Ready goes False.
	var mu sync.Mutex
	seen := map[string]time.Duration{}
	var readyMsg string
	stop := make(chan struct{})
	watched := make(chan struct{})
	if err := vm.PowerDown(); err != nil {
		t.Fatal(err)
	}
	pressed := time.Now()
	off.pressed = pressed
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
			for _, p := range pods {
				var st struct {
					Status struct {
						Reason, Message string
						Conditions      []struct{ Type, Status, Message string }
					} `json:"status"`
				}
				// kubelet's node-shutdown mark: status.reason Terminated
				// on a pod it failed, and on every pod it stopped
				// (Succeeded ones too) the DisruptionTarget condition
				// with its node-shutdown message.
				shut := false
				if a.do("GET", "/api/v1/namespaces/"+p.ns+"/pods/"+p.name, nil, &st) == nil {
					shut = st.Status.Reason == "Terminated" && st.Status.Message == nodeShutdownMsg
					for _, c := range st.Status.Conditions {
						shut = shut || (c.Type == "DisruptionTarget" && c.Status == "True" && c.Message == nodeShutdownMsg)
					}
				}
				if shut {
					mu.Lock()
					if _, ok := seen[p.name]; !ok {
						seen[p.name] = time.Since(pressed)
					}
					mu.Unlock()
				}
			}
			var n struct {
				Status struct {
					Conditions []struct{ Type, Status, Message string } `json:"conditions"`
				} `json:"status"`
			}
			if a.do("GET", "/api/v1/nodes/"+node, nil, &n) == nil {
				for _, c := range n.Status.Conditions {
					if c.Type == "Ready" && c.Status == "False" {
						mu.Lock()
						if readyMsg == "" {
							readyMsg = c.Message
							seen["NotReady"] = time.Since(pressed)
						}
						mu.Unlock()
					}
				}
			}
		}
	}()
	// Stopped once QEMU is gone, or when a check below gives up first.
	stopWatching := sync.OnceFunc(func() { close(stop); <-watched })
	defer stopWatching()

	prep, err := vm.ExpectLine(regexp.MustCompile(`logind: PrepareForShutdown sent clients=1 inhibitors=kubelet`), time.Minute)
	if err != nil {
		t.Fatalf("no PrepareForShutdown to kubelet: %v\n%s", err, vm.ConsoleTail(40))
	}
	toPrepare := time.Since(pressed)
	rel, err := vm.ExpectLine(regexp.MustCompile(`logind: shutdown inhibitors released`), gracefulPeriod+30*time.Second)
	if err != nil {
		t.Fatalf("kubelet did not release its inhibitor: %v\n%s", err, vm.ConsoleTail(40))
	}
	toRelease := time.Since(pressed)
	if err := vm.WaitExit(gracefulPeriod + 30*time.Second); err != nil {
		t.Fatalf("QEMU did not exit within shutdownGracePeriod + 30 s: %v\n%s", err, vm.ConsoleTail(40))
	}
	off.exited = time.Now()
	toExit := off.exited.Sub(pressed)
	stopWatching()
	figure(t, "system_powerdown to PrepareForShutdown %.1f s, to inhibitor released %.1f s (guest: %.1f s after the signal), to QEMU exit %.1f s (wall)",
		toPrepare.Seconds(), toRelease.Seconds(), (rel.At - prep.At).Seconds(), toExit.Seconds())
	calls := hooks.calls()
	if len(calls) != 1 || calls[0].path != "/prestop/normal" {
		t.Errorf("preStop hook calls %+v: want one to /prestop/normal", calls)
	} else if at := calls[0].at.Sub(pressed); at < 0 || at > toExit {
		t.Errorf("preStop hook at %s after the power button, QEMU gone at %s: want it in between", at, toExit)
	} else {
		figure(t, "graceful node shutdown: the normal pod's preStop hook ran %.1f s after the power button", at.Seconds())
	}

	// What kubelet left in the API server: its Shutdown event, the normal
	// pods marked (this one and TestJoin's demo pod, in the same priority
	// group; the critical pod's status may not arrive: see below), Ready
	// False with its message.
	checkShutdownAftermath(t, a, node, []podRef{pods[0], {"default", "demo"}})

	n, nok := seen["normal"]
	c, cok := seen["critical"]
	// The critical pod's status reaches the API server only if kubelet's
	// status manager sends it before kubelet is stopped, which follows the
	// release at once, as under systemd. On a loaded host it did not, twice
	// (session 9's loaded run; a cold make test with the arm64 cross-build
	// beside): kubelet had released its inhibitor 30 s into the 40 s grace,
	// and the pod's Ready was still True in the API. What berth controls,
	// the inhibitor held until kubelet lets go and kubelet stopped only
	// after, is checked below either way; the normal pod's status must
	// arrive, and the order is checked when both do.
	if nok && !cok {
		t.Logf("the critical pod's terminated status did not reach the API before kubelet stopped (kubelet released its inhibitor %.1f s after the signal)", (rel.At - prep.At).Seconds())
		c, cok = n, true
	}
	if !nok || !cok {
		var now []string
		for _, p := range pods {
			var st struct {
				Status json.RawMessage `json:"status"`
			}
			err := a.do("GET", "/api/v1/namespaces/"+p.ns+"/pods/"+p.name, nil, &st)
			now = append(now, fmt.Sprintf("%s/%s: %s %v", p.ns, p.name, trimTo(string(st.Status), 600), err))
		}
		t.Fatalf("pods not reported terminated by node shutdown: %v; their status now:\n%s", seen, strings.Join(now, "\n"))
	}
	if n > c {
		t.Errorf("the critical pod (%s) was terminated before the normal one (%s)", c, n)
	}
	if !strings.Contains(readyMsg, "node is shutting down") {
		t.Errorf("node Ready condition went False with %q, want kubelet's shutdown message", readyMsg)
	}
	figure(t, "system_powerdown to pods reported terminated: normal %.1f s, critical %.1f s; node NotReady %.1f s (wall)", n.Seconds(), c.Seconds(), seen["NotReady"].Seconds())
	// And berth stopped kubelet only after the release.
	lines := vm.Lines()
	relIdx, stopIdx := -1, -1
	for i, l := range lines {
		if relIdx < 0 && strings.Contains(l.Text, "logind: shutdown inhibitors released") {
			relIdx = i
		}
		if stopIdx < 0 && strings.Contains(l.Text, "shutdown: service stopped service=kubelet") {
			stopIdx = i
		}
	}
	if relIdx < 0 || stopIdx < relIdx {
		t.Errorf("kubelet stopped (line %d) before the inhibitor was released (line %d)", stopIdx, relIdx)
	}
}

// podRef names a pod by namespace and name.
type podRef struct{ ns, name string }

// checkShutdownAftermath checks, once the node is down, what kubelet's
// graceful node shutdown leaves in the API server: its Shutdown event on
// the node, each pod marked terminated by node shutdown (the
// DisruptionTarget condition, or status.reason on a pod it failed), and the
// node's Ready condition False with kubelet's shutdown message.
func checkShutdownAftermath(t *testing.T, a api, node string, pods []podRef) {
	t.Helper()
	var evs struct {
		Items []struct{ Reason, Message string } `json:"items"`
	}
	if err := a.do("GET", "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D"+node, nil, &evs); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(evs.Items, func(e struct{ Reason, Message string }) bool {
		return e.Reason == "Shutdown" && strings.Contains(e.Message, "detected shutdown event")
	}) {
		t.Errorf("no Shutdown event from kubelet on the node: %+v", evs.Items)
	}
	for _, p := range pods {
		var st struct {
			Status struct {
				Reason, Message string
				Conditions      []struct{ Type, Status, Message string }
			} `json:"status"`
		}
		if err := a.do("GET", "/api/v1/namespaces/"+p.ns+"/pods/"+p.name, nil, &st); err != nil {
			t.Errorf("pod %s/%s: %v", p.ns, p.name, err)
			continue
		}
		shut := st.Status.Reason == "Terminated" && st.Status.Message == nodeShutdownMsg
		for _, c := range st.Status.Conditions {
			shut = shut || (c.Type == "DisruptionTarget" && c.Status == "True" && c.Message == nodeShutdownMsg)
		}
		if !shut {
			t.Errorf("pod %s/%s is not marked terminated by node shutdown: %+v", p.ns, p.name, st.Status)
		}
	}
	var n struct {
		Status struct {
			Conditions []struct{ Type, Status, Message string } `json:"conditions"`
		} `json:"status"`
	}
	if err := a.do("GET", "/api/v1/nodes/"+node, nil, &n); err != nil {
		t.Fatal(err)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == "Ready" && (c.Status != "False" || !strings.Contains(c.Message, "node is shutting down")) {
			t.Errorf("node Ready is %s %q, want False with kubelet's shutdown message", c.Status, c.Message)
		}
	}
}

// hookServer answers the lifecycle hooks kubelet calls (httpGet) on the
// host's loopback, and records each call and when it came.
type hookServer struct {
	addr netip.AddrPort
	mu   sync.Mutex
	seen []hookCall
}

type hookCall struct {
	path string
	at   time.Time
}

func newHookServer(t *testing.T) *hookServer {
	t.Helper()
	h := &hookServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.seen = append(h.seen, hookCall{path: r.URL.Path, at: time.Now()})
		h.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	addr, err := netip.ParseAddrPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	h.addr = addr
	return h
}

func (h *hookServer) calls() []hookCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.seen)
}
