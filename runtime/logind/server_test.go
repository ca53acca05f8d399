package logind

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-node/berth/internal/safe"
	"github.com/godbus/dbus/v5"
)

// startServer serves a bus in a temporary directory, as root would be let
// in on a node (the test's own uid stands for root).
func startServer(t *testing.T, margin time.Duration) (*Server, string, string) {
	t.Helper()
	return startServerWith(t, Options{Margin: margin})
}

// startServerWith is startServer with more options; the paths and uid
// are the test's.
func startServerWith(t *testing.T, opt Options) (*Server, string, string) {
	t.Helper()
	dir := t.TempDir()
	sock := filepath.Join(dir, "system_bus_socket")
	confDir := filepath.Join(dir, "logind.conf.d")
	opt.Socket, opt.ConfFile, opt.ConfDir, opt.AllowUID = sock, filepath.Join(dir, "logind.conf"), confDir, uint32(os.Getuid())
	s, err := Listen(opt)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, sock, confDir
}

// dial connects as godbus's SystemBus() does: handshake, then Hello.
func dial(t *testing.T, sock string) *dbus.Conn {
	t.Helper()
	conn, err := dbus.Connect("unix:path=" + sock)
	if err != nil {
		t.Fatalf("connecting to the bus: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestKubeletCalls plays kubelet's node-shutdown manager's calls, in its
// order (pkg/kubelet/nodeshutdown/nodeshutdown_manager_linux.go start() and
// systemd/inhibit_linux.go), with the same client library.
func TestKubeletCalls(t *testing.T) {
	s, sock, confDir := startServer(t, time.Second)
	conn := dial(t, sock)
	if !conn.SupportsUnixFDs() {
		t.Fatal("the handshake did not agree fd passing")
	}
	obj := conn.Object("org.freedesktop.login1", "/org/freedesktop/login1")

	// CurrentInhibitDelay: logind's default until the override.
	v, err := obj.GetProperty("org.freedesktop.login1.Manager.InhibitDelayMaxUSec")
	if err != nil {
		t.Fatalf("reading InhibitDelayMaxUSec: %v", err)
	}
	if got, ok := v.Value().(uint64); !ok || time.Duration(got)*time.Microsecond != DefaultInhibitDelayMax {
		t.Fatalf("InhibitDelayMaxUSec = %v (%T), want %d", v.Value(), v.Value(), DefaultInhibitDelayMax/time.Microsecond)
	}

	// OverrideInhibitDelay writes this file, byte for byte, for a 20s
	// shutdownGracePeriod; ReloadLogindConf then asks for SIGHUP.
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(confDir, "99-kubelet.conf"), []byte("# Kubelet logind override\n[Login]\nInhibitDelayMaxSec=20\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var sighup int32 = 1
	if call := conn.Object("org.freedesktop.systemd1", "/org/freedesktop/systemd1").Call("org.freedesktop.systemd1.Manager.KillUnit", 0, "systemd-logind.service", "all", sighup); call.Err != nil {
		t.Fatalf("KillUnit: %v", call.Err)
	}
	v, err = obj.GetProperty("org.freedesktop.login1.Manager.InhibitDelayMaxUSec")
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Duration(v.Value().(uint64)) * time.Microsecond; got != 20*time.Second {
		t.Fatalf("InhibitDelayMaxUSec after the reload = %s, want 20s", got)
	}
	if got := s.WaitBound(); got != 21*time.Second {
		t.Errorf("WaitBound = %s, want 20s + the 1s margin", got)
	}

	// InhibitShutdown.
	call := obj.Call("org.freedesktop.login1.Manager.Inhibit", 0, "shutdown", "kubelet", "Kubelet needs time to handle node shutdown", "delay")
	if call.Err != nil {
		t.Fatalf("Inhibit: %v", call.Err)
	}
	var fd uint32
	if err := call.Store(&fd); err != nil {
		t.Fatalf("storing the inhibitor fd: %v", err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(fd), &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
		t.Fatalf("inhibitor fd %d is not a pipe: %v mode %o", fd, err, st.Mode)
	}

	// MonitorShutdown.
	if err := conn.AddMatchSignal(dbus.WithMatchInterface("org.freedesktop.login1.Manager"), dbus.WithMatchMember("PrepareForShutdown"), dbus.WithMatchObjectPath("/org/freedesktop/login1")); err != nil {
		t.Fatalf("AddMatchSignal: %v", err)
	}
	sigs := make(chan *dbus.Signal, 1)
	conn.Signal(sigs)

	// The shutdown: berth signals and waits; kubelet sees the signal,
	// "drains" for 300ms and closes the fd (ReleaseInhibitLock).
	type out struct {
		res  Result
		took time.Duration
	}
	got := make(chan out, 1)
	start := time.Now()
	go func() { r := s.PrepareForShutdown(context.Background()); got <- out{r, time.Since(start)} }()
	select {
	case sig := <-sigs:
		if sig.Name != "org.freedesktop.login1.Manager.PrepareForShutdown" || sig.Path != "/org/freedesktop/login1" || len(sig.Body) != 1 || sig.Body[0] != true {
			t.Fatalf("signal = %+v, want PrepareForShutdown(true) on /org/freedesktop/login1", sig)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no PrepareForShutdown within 5s")
	}
	if v, _ := obj.GetProperty("org.freedesktop.login1.Manager.PreparingForShutdown"); v.Value() != true {
		t.Errorf("PreparingForShutdown = %v during the shutdown", v.Value())
	}
	select {
	case o := <-got:
		t.Fatalf("PrepareForShutdown returned before the fd was closed: %+v", o.res)
	case <-time.After(300 * time.Millisecond):
	}
	if err := syscall.Close(int(fd)); err != nil {
		t.Fatal(err)
	}
	o := <-got
	if o.res.TimedOut || len(o.res.Inhibitors) != 1 || o.res.Inhibitors[0].Who != "kubelet" || o.res.Inhibitors[0].ReleasedAfterMs < 300 || o.res.Clients != 1 {
		t.Errorf("result = %+v", o.res)
	}
	if o.took > 3*time.Second {
		t.Errorf("PrepareForShutdown took %s after the close", o.took)
	}
}

// TestWaitBound: an inhibitor never released holds the shutdown for
// InhibitDelayMaxSec plus the margin, not longer.
func TestWaitBound(t *testing.T) {
	s, sock, confDir := startServer(t, 200*time.Millisecond)
	os.MkdirAll(confDir, 0o755)
	os.WriteFile(filepath.Join(confDir, "99-kubelet.conf"), []byte("[Login]\nInhibitDelayMaxSec=0.3\n"), 0o644)
	conn := dial(t, sock)
	if call := conn.Object(systemd1Name, systemd1Path).Call(systemd1Manager+".KillUnit", 0, logindUnit, "all", int32(1)); call.Err != nil {
		t.Fatal(call.Err)
	}
	var fd uint32
	if err := conn.Object(login1Name, login1Path).Call(login1Manager+".Inhibit", 0, "shutdown", "kubelet", "test", "delay").Store(&fd); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(int(fd))
	start := time.Now()
	res := s.PrepareForShutdown(context.Background())
	took := time.Since(start)
	if !res.TimedOut || res.WaitBoundMs != 500 || len(res.Inhibitors) != 1 || res.Inhibitors[0].ReleasedAfterMs != -1 {
		t.Errorf("result = %+v", res)
	}
	if took < 500*time.Millisecond || took > 2*time.Second {
		t.Errorf("waited %s, want the 500ms bound", took)
	}
}

// TestNoInhibitor: without kubelet's lock the shutdown does not wait.
func TestNoInhibitor(t *testing.T) {
	s, _, _ := startServer(t, time.Minute)
	start := time.Now()
	res := s.PrepareForShutdown(context.Background())
	if took := time.Since(start); took > 100*time.Millisecond || res.TimedOut || len(res.Inhibitors) != 0 {
		t.Errorf("PrepareForShutdown with no inhibitor: %+v after %s", res, took)
	}
}

// TestRefusals: the calls berth does not serve fail with D-Bus errors a
// client can read, and the connection stays usable.
func TestRefusals(t *testing.T) {
	_, sock, _ := startServer(t, time.Second)
	conn := dial(t, sock)
	cases := []struct {
		dest, path, method string
		args               []any
		want               string
	}{
		{login1Name, string(login1Path), login1Manager + ".Inhibit", []any{"shutdown", "x", "y", "block"}, errNotSupported},
		{login1Name, string(login1Path), login1Manager + ".Inhibit", []any{"nap", "x", "y", "delay"}, errNotSupported},
		{login1Name, string(login1Path), login1Manager + ".PowerOff", []any{false}, errUnknownMethod},
		{systemd1Name, string(systemd1Path), systemd1Manager + ".KillUnit", []any{"kubelet.service", "all", int32(1)}, "org.freedesktop.systemd1.NoSuchUnit"},
		{systemd1Name, string(systemd1Path), systemd1Manager + ".KillUnit", []any{logindUnit, "all", int32(9)}, errNotSupported},
		{"org.example.Nobody", "/", "org.example.Nobody.Hi", nil, "org.freedesktop.DBus.Error.ServiceUnknown"},
		{busName, string(busPath), busName + ".RequestName", []any{"org.example.Me", uint32(0)}, "org.freedesktop.DBus.Error.AccessDenied"},
		{busName, string(busPath), busName + ".AddMatch", []any{"type='signal"}, "org.freedesktop.DBus.Error.MatchRuleInvalid"},
	}
	for _, c := range cases {
		err := conn.Object(c.dest, dbus.ObjectPath(c.path)).Call(c.method, 0, c.args...).Err
		var de dbus.Error
		if e, ok := err.(dbus.Error); ok {
			de = e
		}
		if de.Name != c.want {
			t.Errorf("%s%v: err = %v, want %s", c.method, c.args, err, c.want)
		}
	}
	if err := conn.BusObject().Call("org.freedesktop.DBus.Peer.Ping", 0).Err; err != nil {
		t.Errorf("the connection broke after the refusals: %v", err)
	}
}

// TestAuthRefusesOtherUIDs: a uid other than the allowed one is refused
// at the handshake.
func TestAuthRefusesOtherUIDs(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "bus")
	s, err := Listen(Options{Socket: sock, ConfFile: filepath.Join(dir, "x"), ConfDir: filepath.Join(dir, "y"), AllowUID: uint32(os.Getuid()) + 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	go s.Serve(context.Background())
	if c, err := dbus.Connect("unix:path=" + sock); err == nil {
		c.Close()
		t.Fatal("connected with a uid the bus does not allow")
	} else if !strings.Contains(err.Error(), "auth") {
		t.Logf("refused: %v", err)
	}
}

// addMatch is the first half of kubelet's MonitorShutdown; listen is the
// second, which kubelet runs a few statements later. A signal that comes
// between the two is dropped by the client library.
func addMatch(t *testing.T, conn *dbus.Conn) {
	t.Helper()
	if err := conn.AddMatchSignal(dbus.WithMatchInterface(login1Manager), dbus.WithMatchMember("PrepareForShutdown"), dbus.WithMatchObjectPath(login1Path)); err != nil {
		t.Fatalf("AddMatchSignal: %v", err)
	}
}

func listen(conn *dbus.Conn) chan *dbus.Signal {
	sigs := make(chan *dbus.Signal, 1)
	conn.Signal(sigs)
	return sigs
}

// wantSignal waits for PrepareForShutdown(true) on sigs; missing says
// what its absence means.
func wantSignal(t *testing.T, sigs chan *dbus.Signal, missing string) {
	t.Helper()
	select {
	case sig := <-sigs:
		if len(sig.Body) != 1 || sig.Body[0] != true {
			t.Fatalf("signal %+v, want PrepareForShutdown(true)", sig)
		}
	case <-time.After(5 * time.Second):
		t.Fatal(missing)
	}
}

// prepareAsync runs PrepareForShutdown beside the test, started as berth
// starts its goroutines.
func prepareAsync(s *Server) <-chan Result {
	got := make(chan Result, 1)
	safe.Go(slog.New(slog.DiscardHandler), "test PrepareForShutdown", func() { got <- s.PrepareForShutdown(context.Background()) }, nil)
	return got
}

func inhibitFD(t *testing.T, conn *dbus.Conn) int {
	t.Helper()
	var fd uint32
	if err := conn.Object(login1Name, login1Path).Call(login1Manager+".Inhibit", 0, "shutdown", "kubelet", "test", "delay").Store(&fd); err != nil {
		t.Fatalf("Inhibit: %v", err)
	}
	return int(fd)
}

// TestSignalWaitsForFreshSubscription: the power button pressed while
// kubelet is between its AddMatch and handing godbus its channel (CI saw
// it 2 ms after kubelet's Inhibit). The signal waits until the
// subscription is Settle old, so kubelet gets it and releases its lock,
// rather than the shutdown waiting out the whole bound.
func TestSignalWaitsForFreshSubscription(t *testing.T) {
	s, sock, _ := startServerWith(t, Options{Margin: time.Minute, Settle: 600 * time.Millisecond})
	conn := dial(t, sock)
	fd := inhibitFD(t, conn)
	addMatch(t, conn)
	start := time.Now()
	got := prepareAsync(s)
	time.Sleep(300 * time.Millisecond) // kubelet's gap, made long
	wantSignal(t, listen(conn), "the client never got PrepareForShutdown: it went out before the client had its channel")
	syscall.Close(fd)
	res := <-got
	if res.TimedOut || res.Clients != 1 || res.SettleMs <= 0 || res.SettleMs > 600 {
		t.Errorf("result = %+v, want the signal held back for the fresh subscription, then released", res)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("shutdown wait took %s", took)
	}
}

// TestLateSubscriberGetsSignal: a client that subscribes once the
// shutdown is under way still gets PrepareForShutdown(true), once; one
// subscribed before gets it once too.
func TestLateSubscriberGetsSignal(t *testing.T) {
	s, sock, _ := startServerWith(t, Options{Margin: time.Minute, Settle: 200 * time.Millisecond})
	early := dial(t, sock)
	addMatch(t, early)
	earlySigs := listen(early)
	time.Sleep(300 * time.Millisecond) // settled
	late := dial(t, sock)
	fd := inhibitFD(t, late)
	got := prepareAsync(s)
	wantSignal(t, earlySigs, "the settled client got no signal")
	addMatch(t, late)
	time.Sleep(50 * time.Millisecond)
	lateSigs := listen(late)
	wantSignal(t, lateSigs, "the client that subscribed during the shutdown got no signal")
	// A second subscription of the same client is not signalled again.
	if err := late.AddMatchSignal(dbus.WithMatchMember("PrepareForShutdown")); err != nil {
		t.Fatal(err)
	}
	select {
	case sig := <-lateSigs:
		t.Errorf("signalled twice: %+v", sig)
	case <-time.After(500 * time.Millisecond):
	}
	syscall.Close(fd)
	if res := <-got; res.TimedOut || res.Clients != 1 {
		t.Errorf("result = %+v", res)
	}
}
