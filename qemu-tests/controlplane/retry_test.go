package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func itoa(i int) string { return strconv.Itoa(i) }

// logBuffer is a concurrency-safe slog destination the tests read.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// restarts counts the logged restarts on fresh ports, of one component or
// (name "") all.
func (b *logBuffer) restarts(name string) int {
	n := 0
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.Contains(l, "restarting it on fresh ports") && (name == "" || strings.Contains(l, "component="+name+" ")) {
			n++
		}
	}
	return n
}

func bufferLogger() (*slog.Logger, *logBuffer) {
	b := &logBuffer{}
	return slog.New(slog.NewTextHandler(b, nil)), b
}

// thief holds ports on 127.0.0.1 until the test ends, as another process
// taking them between pick and bind would.
type thief struct {
	t     testing.TB
	mu    sync.Mutex
	lns   []net.Listener
	ports map[int]bool
}

func newThief(t testing.TB) *thief {
	th := &thief{t: t, ports: map[int]bool{}}
	t.Cleanup(func() {
		th.mu.Lock()
		defer th.mu.Unlock()
		for _, l := range th.lns {
			l.Close()
		}
	})
	return th
}

// steal takes a fresh port and returns it.
func (th *thief) steal() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		th.t.Fatal(err)
	}
	th.mu.Lock()
	defer th.mu.Unlock()
	th.lns = append(th.lns, ln)
	p := ln.Addr().(*net.TCPAddr).Port
	th.ports[p] = true
	return p
}

// take binds port (free a moment ago) so the component cannot.
func (th *thief) take(port int) {
	ln, err := net.Listen("tcp", "127.0.0.1:"+itoa(port))
	if err != nil {
		th.t.Fatalf("stealing port %d: %v", port, err)
	}
	th.mu.Lock()
	defer th.mu.Unlock()
	th.lns = append(th.lns, ln)
	th.ports[port] = true
}

func (th *thief) stole(port int) bool {
	th.mu.Lock()
	defer th.mu.Unlock()
	return th.ports[port]
}

// retryRig is a Cluster with only what launch and await use, running the
// fake "listener" component (which binds --port and fails like the kube-*
// programs when it cannot) through a fake starter that does what a test
// case says on each try.
type retryRig struct {
	c     *Cluster
	logs  *logBuffer
	comp  *component
	port  int // the component's port field
	thief *thief
	dir   string
	log   string // the component's log, shared by its tries
}

// tryAction is what the fake starter does on one try, given the port
// chosen for it.
type tryAction func(r *retryRig, port int) (*proc, error)

func newRetryRig(t *testing.T, fixedPort int, actions ...tryAction) *retryRig {
	t.Helper()
	log, logs := bufferLogger()
	r := &retryRig{logs: logs, thief: newThief(t), dir: fakeComponentDir(t), port: fixedPort, log: filepath.Join(t.TempDir(), "listener.log")}
	r.c = &Cluster{opts: Options{StopTimeout: 5 * time.Second}, log: log, pick: pickFreePorts, avoid: map[int]bool{}}
	r.c.startFn = func(name string, args []string) (*proc, error) {
		try := r.comp.tries
		act := actions[min(try, len(actions))-1]
		if act == nil {
			return startProc(log, name, filepath.Join(r.dir, "listener"), r.log, args)
		}
		return act(r, r.port)
	}
	r.comp = r.c.newComponent("listener", func() []string { return []string{"--port=" + itoa(r.port)} }, &r.port)
	t.Cleanup(func() { r.c.Stop() })
	return r
}

// run launches the component and waits until it listens.
func (r *retryRig) run(ctx context.Context) error {
	if err := r.c.launch(r.comp); err != nil {
		return err
	}
	return r.c.await(ctx, r.comp, "dial", func(ctx context.Context) error {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", "127.0.0.1:"+itoa(r.port))
		if err != nil {
			return err
		}
		return conn.Close()
	})
}

// The fake starter's actions.
var (
	// listens: start the listener (nil means the same).
	listens tryAction = nil
	// stolen: another process takes the port first; the listener fails
	// with the kernel's own "bind: address already in use" unless await
	// sees the other listener first.
	stolen tryAction = func(r *retryRig, port int) (*proc, error) {
		r.thief.take(port)
		return startProc(r.c.log, "listener", filepath.Join(r.dir, "listener"), r.log, []string{"--port=" + itoa(port)})
	}
	// says: the program prints the kube-* bind error naming its port, and
	// exits, without binding anything.
	says tryAction = func(r *retryRig, port int) (*proc, error) {
		msg := strings.ReplaceAll(kubeInUse, "45559", itoa(port))
		return r.script(fmt.Sprintf("echo '%s' >&2; exit 1", msg))
	}
	// answeredByAnother: the program runs but another process holds the
	// port and answers there (another control plane's component, say).
	answeredByAnother tryAction = func(r *retryRig, port int) (*proc, error) {
		r.thief.take(port)
		return r.script("exec sleep 60")
	}
	// failsOtherwise: the program exits for a reason other than a port.
	failsOtherwise tryAction = func(r *retryRig, port int) (*proc, error) {
		return r.script("echo 'Error: unknown flag: --bogus' >&2; exit 1")
	}
)

func (r *retryRig) script(body string) (*proc, error) {
	p := filepath.Join(r.dir, fmt.Sprintf("script-%d", r.comp.tries))
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		return nil, err
	}
	return startProc(r.c.log, "listener", p, r.log, nil)
}

func TestAwaitRestartsOnFreshPorts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fixed   bool
		actions []tryAction
		// want: tries made, restarts logged, whether it ends up listening,
		// and what the error says (each entry: any of its |-separated
		// alternatives; which path notices a stolen port first is a race).
		tries, restarts int
		ok              bool
		errHas          []string
	}{
		{name: "free port", actions: []tryAction{listens}, tries: 1, ok: true},
		{name: "stolen twice, then free", actions: []tryAction{stolen, stolen, listens}, tries: 3, restarts: 2, ok: true},
		{name: "log names the port, 4 times", actions: []tryAction{says, says, says, says, listens}, tries: 5, restarts: 4, ok: true},
		{name: "another process answers on the port", actions: []tryAction{answeredByAnother, listens}, tries: 2, restarts: 1, ok: true},
		{name: "stolen every time: bounded", actions: []tryAction{stolen}, tries: bindAttempts, restarts: bindAttempts - 1,
			errHas: []string{"on each of 5 tries", "bind: address already in use|another process listens on port"}},
		{name: "given port stolen: no retry", fixed: true, actions: []tryAction{stolen}, tries: 1,
			errHas: []string{"bind: address already in use|another process listens on port"}},
		{name: "given port answered by another: no retry", fixed: true, actions: []tryAction{answeredByAnother}, tries: 1,
			errHas: []string{"another process listens on port"}},
		{name: "other failure: no retry", actions: []tryAction{failsOtherwise}, tries: 1,
			errHas: []string{"unknown flag", "exit status 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fixed := 0
			if tc.fixed {
				ports, err := pickFreePorts(1, nil)
				if err != nil {
					t.Fatal(err)
				}
				fixed = ports[0]
			}
			r := newRetryRig(t, fixed, tc.actions...)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := r.run(ctx)
			if r.comp.tries != tc.tries {
				t.Errorf("%d tries, want %d", r.comp.tries, tc.tries)
			}
			if n := r.logs.restarts("listener"); n != tc.restarts {
				t.Errorf("%d restarts logged, want %d:\n%s", n, tc.restarts, r.logs)
			}
			if tc.fixed && r.port != fixed {
				t.Errorf("given port %d changed to %d", fixed, r.port)
			}
			if !tc.ok {
				var ce *ComponentError
				if !errors.As(err, &ce) {
					t.Fatalf("error %v is not a ComponentError", err)
				}
				for _, want := range tc.errHas {
					if !containsAny(err.Error(), strings.Split(want, "|")) {
						t.Errorf("error lacks %q:\n%v", want, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("await: %v", err)
			}
			if r.thief.stole(r.port) {
				t.Errorf("ended on port %d, a stolen one", r.port)
			}
			if h, err := listenerHolder(r.comp.proc.cmd.Process.Pid, r.port); h != portOurs {
				t.Errorf("the component does not hold its port %d: %v %v", r.port, h, err)
			}
			// Every earlier try has ended; only the last runs.
			if len(r.c.procs) != 1 || r.c.procs[0] != r.comp.proc {
				t.Errorf("procs %v, want only the last try", r.c.procs)
			}
		})
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// stealingPicker picks free ports, except that on the calls listed in
// steal (1-based) it returns ports a thief holds.
func stealingPicker(th *thief, steal ...int) portPicker {
	var calls atomic.Int32
	return func(n int, avoid map[int]bool) ([]int, error) {
		call := int(calls.Add(1))
		for _, s := range steal {
			if s == call {
				var out []int
				for range n {
					out = append(out, th.steal())
				}
				return out, nil
			}
		}
		return pickFreePorts(n, avoid)
	}
}

// Start picks ports in this order: etcd (2 ports), kube-apiserver; then
// controller-manager and scheduler are launched together, the scheduler
// awaited (and restarted) first. Stealing calls 1, 3, 5 and 6 takes each
// component's first ports.
var stealEachFirstTry = []int{1, 3, 5, 6}

func startFake(t testing.TB, log *slog.Logger, pick portPicker) (*Cluster, error) {
	return Start(context.Background(), log, Options{
		BinDirs:      []string{fakeComponentDir(t)},
		StateDir:     filepath.Join(t.TempDir(), "state"),
		ReadyTimeout: 2 * time.Minute,
		StopTimeout:  10 * time.Second,
		pickPorts:    pick,
	})
}

// checkCluster checks a started cluster is whole and its own: distinct
// ports none of them stolen, each held by a live component, the admin
// client (which trusts only this cluster's CA) answered at the endpoint
// Info names, and the kubeconfigs naming that endpoint.
func checkCluster(t testing.TB, c *Cluster, th *thief) {
	t.Helper()
	ports := c.Ports()
	seen := map[int]bool{}
	for name, p := range ports.byName() {
		if p == 0 || seen[p] || th.stole(p) {
			t.Errorf("port %s=%d zero, repeated or stolen: %+v", name, p, ports)
		}
		seen[p] = true
	}
	info := c.Info()
	if want := "https://127.0.0.1:" + itoa(ports.APIServer); info.HostEndpoint != want {
		t.Errorf("host endpoint %s, want %s", info.HostEndpoint, want)
	}
	if want := "https://10.0.2.2:" + itoa(ports.APIServer); info.APIServerEndpoint != want {
		t.Errorf("apiserver endpoint %s, want %s", info.APIServerEndpoint, want)
	}
	if err := fakeGet(c.Client(), info.HostEndpoint+"/readyz", "ok"); err != nil {
		t.Errorf("admin client: %v", err)
	}
	for _, kc := range []string{info.Kubeconfig, info.BootstrapKubeconfig} {
		b, err := os.ReadFile(kc)
		if err != nil {
			t.Error(err)
			continue
		}
		if !strings.Contains(string(b), ":"+itoa(ports.APIServer)+"\n") {
			t.Errorf("%s does not name port %d:\n%s", kc, ports.APIServer, b)
		}
	}
	if len(c.procs) != len(binaries) {
		t.Errorf("%d processes tracked, want %d", len(c.procs), len(binaries))
	}
	for _, p := range c.procs {
		if dead, err := p.exited(); dead {
			t.Errorf("%s exited: %v", p.name, err)
		}
	}
}

// checkStopped checks Stop released every port and removed the state.
func checkStopped(t testing.TB, c *Cluster) {
	t.Helper()
	for name, p := range c.Ports().byName() {
		if h, err := listenerHolder(os.Getpid(), p); h != portUnbound || err != nil {
			t.Errorf("port %s=%d still has a listener after Stop (%v, %v)", name, p, h, err)
		}
	}
	if _, err := os.Stat(c.Info().StateDir); !os.IsNotExist(err) {
		t.Errorf("state directory left after Stop: %v", err)
	}
}

func TestStartWithFakeComponents(t *testing.T) {
	log, logs := bufferLogger()
	th := newThief(t)
	c, err := startFake(t, log, pickFreePorts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	checkCluster(t, c, th)
	if n := logs.restarts(""); n != 0 {
		t.Errorf("%d restarts with nothing stolen:\n%s", n, logs)
	}
	if err := c.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	checkStopped(t, c)
}

func TestStartRestartsEachComponentOnStolenPorts(t *testing.T) {
	log, logs := bufferLogger()
	th := newThief(t)
	c, err := startFake(t, log, stealingPicker(th, stealEachFirstTry...))
	if err != nil {
		t.Fatalf("Start: %v\nlog:\n%s", err, logs)
	}
	defer c.Stop()
	checkCluster(t, c, th)
	for _, b := range binaries {
		if n := logs.restarts(b); n != 1 {
			t.Errorf("%s restarted %d times, want 1", b, n)
		}
	}
	if err := c.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	checkStopped(t, c)
}

func TestStartGivesUpAfterBoundedTries(t *testing.T) {
	log, logs := bufferLogger()
	th := newThief(t)
	everyCall := make([]int, 0, 20)
	for i := 1; i <= 20; i++ {
		everyCall = append(everyCall, i)
	}
	state := ""
	_, err := Start(context.Background(), log, Options{
		BinDirs:   []string{fakeComponentDir(t)},
		StateDir:  func() string { state = filepath.Join(t.TempDir(), "state"); return state }(),
		pickPorts: stealingPicker(th, everyCall...),
	})
	var ce *ComponentError
	if !errors.As(err, &ce) || ce.Component != "etcd" {
		t.Fatalf("Start error %v, want an etcd ComponentError", err)
	}
	if !strings.Contains(err.Error(), "on each of 5 tries") || !containsAny(err.Error(), []string{"bind: address already in use", "another process listens on port"}) {
		t.Errorf("error does not say the port was taken on every try:\n%v", err)
	}
	if n := logs.restarts("etcd"); n != bindAttempts-1 {
		t.Errorf("%d restarts logged, want %d", n, bindAttempts-1)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("state directory left behind: %v", err)
	}
}

// TestStartStopParallelStress starts and stops many fake control planes at
// once, each with every component's first ports stolen, in rounds: all
// must come up on distinct ports, each reachable with its own CA, and
// release every port on Stop. BERTH_CONTROLPLANE_STRESS=N sets how many run
// at once.
func TestStartStopParallelStress(t *testing.T) {
	parallel, rounds := 12, 2
	if testing.Short() {
		parallel, rounds = 4, 1
	}
	if s := os.Getenv("BERTH_CONTROLPLANE_STRESS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		parallel = n
	}
	th := newThief(t)
	for round := range rounds {
		log, logs := bufferLogger()
		clusters := make([]*Cluster, parallel)
		errs := make([]error, parallel)
		var wg sync.WaitGroup
		for i := range parallel {
			wg.Add(1)
			go func() {
				defer wg.Done()
				clusters[i], errs[i] = startFake(t, log, stealingPicker(th, stealEachFirstTry...))
			}()
		}
		wg.Wait()
		owner := map[int]int{}
		for i, c := range clusters {
			if errs[i] != nil {
				t.Errorf("round %d cluster %d: Start: %v", round, i, errs[i])
				continue
			}
			checkCluster(t, c, th)
			for name, p := range c.Ports().byName() {
				if j, dup := owner[p]; dup {
					t.Errorf("round %d: port %d (%s) used by clusters %d and %d", round, p, name, j, i)
				}
				owner[p] = i
			}
		}
		if n, want := logs.restarts(""), parallel*len(binaries); n < want {
			t.Errorf("round %d: %d restarts logged, want at least %d", round, n, want)
		}
		for i, c := range clusters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if c != nil {
					if err := c.Stop(); err != nil {
						t.Errorf("round %d cluster %d: Stop: %v", round, i, err)
					}
				}
			}()
		}
		wg.Wait()
		for _, c := range clusters {
			if c != nil {
				checkStopped(t, c)
			}
		}
		t.Logf("round %d: %d control planes started and stopped, %d restarts on fresh ports", round, parallel, logs.restarts(""))
	}
}
