package controlplane

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The bind failures as each component logs them (Go's net error inside each
// program's own log format).
var (
	etcdInUse = `{"level":"fatal","ts":"2025-05-20T10:00:00.000Z","caller":"etcdmain/etcd.go:204","msg":"discovery failed","error":"listen tcp 127.0.0.1:45559: bind: address already in use","stacktrace":"go.etcd.io/etcd/server/v3/etcdmain.startEtcdOrProxyV2\n\tgo.etcd.io/etcd/server/v3/etcdmain/etcd.go:204"}`
	kubeInUse = `E0520 10:00:00.000000   12345 run.go:74] "command failed" err="failed to create listener: failed to listen on 127.0.0.1:45559: listen tcp 127.0.0.1:45559: bind: address already in use"`
)

func TestBindConflict(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		port      int
		ok        bool
	}{
		{"etcd", "some startup noise\n" + etcdInUse + "\n", 45559, true},
		{"kube-apiserver", "I0520 10:00:00.000000   12345 options.go:221] external host was not specified\n" + kubeInUse + "\n", 45559, true},
		{"ipv6", "listen tcp [::1]:6443: bind: address already in use", 6443, true},
		{"last named port wins", "listen tcp 127.0.0.1:1111: bind: address already in use\nlisten tcp 127.0.0.1:2222: bind: address already in use", 2222, true},
		{"port not named", "Error: address already in use", 0, true},
		{"connection refused is no conflict", `W0520 10:00:00 logging.go:59] dial tcp 127.0.0.1:2379: connect: connection refused`, 0, false},
		{"other failure", "Error: unknown flag: --bogus", 0, false},
		{"empty", "", 0, false},
	} {
		port, ok := bindConflict(tc.out)
		if port != tc.port || ok != tc.ok {
			t.Errorf("%s: bindConflict = %d, %t; want %d, %t", tc.name, port, ok, tc.port, tc.ok)
		}
	}
}

func TestRetryOnFreshPortsDecision(t *testing.T) {
	for _, tc := range []struct {
		name  string
		out   string
		auto  []int
		port  int
		retry bool
	}{
		{"chosen port taken", kubeInUse, []int{45559}, 45559, true},
		{"one of two chosen ports taken", etcdInUse, []int{45558, 45559}, 45559, true},
		{"given port taken: no retry", kubeInUse, nil, 45559, false},
		{"another port taken: no retry", kubeInUse, []int{45560}, 45559, false},
		{"unnamed port, some chosen", "bind: address already in use", []int{45560}, 0, true},
		{"unnamed port, none chosen", "bind: address already in use", nil, 0, false},
		{"not a bind failure", "panic: boom", []int{45559}, 0, false},
	} {
		port, retry := retryOnFreshPorts(tc.out, tc.auto)
		if port != tc.port || retry != tc.retry {
			t.Errorf("%s: retryOnFreshPorts = %d, %t; want %d, %t", tc.name, port, retry, tc.port, tc.retry)
		}
	}
}

func TestQuietRange(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		content string
		lo, hi  int
	}{
		{"32768\t60999\n", 22768, 32768},
		{"40000 60999", 30000, 40000},
		{"12000 60999", 2000, 12000},
		{"1024 65535", 0, 0}, // no room below: let the kernel choose
		{"2000 65535", 0, 0},
		{"garbage", 0, 0},
	} {
		p := filepath.Join(dir, "range")
		if err := os.WriteFile(p, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		if lo, hi := quietRange(p); lo != tc.lo || hi != tc.hi {
			t.Errorf("quietRange(%q) = [%d, %d), want [%d, %d)", tc.content, lo, hi, tc.lo, tc.hi)
		}
	}
	if lo, hi := quietRange(filepath.Join(dir, "missing")); lo != 0 || hi != 0 {
		t.Errorf("quietRange of a missing file = [%d, %d)", lo, hi)
	}
}

func TestPickFreePortsDistinctBindableAndAvoiding(t *testing.T) {
	lo, hi := quietRange("/proc/sys/net/ipv4/ip_local_port_range")
	first, err := pickFreePorts(20, nil)
	if err != nil {
		t.Fatal(err)
	}
	avoid := map[int]bool{}
	for _, p := range first {
		if avoid[p] {
			t.Errorf("port %d picked twice in %v", p, first)
		}
		avoid[p] = true
		if hi > lo && (p < lo || p >= hi) {
			t.Errorf("port %d outside [%d, %d), below the ephemeral range", p, lo, hi)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+itoa(p))
		if err != nil {
			t.Errorf("picked port %d is not bindable: %v", p, err)
			continue
		}
		ln.Close()
	}
	second, err := pickFreePorts(20, avoid)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range second {
		if avoid[p] {
			t.Errorf("port %d picked though it was to be avoided", p)
		}
	}
}

func TestListenerHolder(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if h, err := listenerHolder(os.Getpid(), port); h != portOurs || err != nil {
		t.Errorf("holder of our own listener: %v, %v", h, err)
	}
	other := exec.Command("sleep", "30")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { other.Process.Kill(); other.Wait() }()
	if h, err := listenerHolder(other.Process.Pid, port); h != portTheirs || err != nil {
		t.Errorf("holder, asked for another process: %v, %v", h, err)
	}
	ln.Close()
	if h, err := listenerHolder(os.Getpid(), port); h != portUnbound || err != nil {
		t.Errorf("holder after close: %v, %v", h, err)
	}
}

func TestListenerHolderOfExitedProcess(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	// A reaped process: /proc/PID is gone. It must not be taken to hold
	// the port someone else listens on (nor trusted for want of /proc).
	if h, err := listenerHolder(gone.Process.Pid, ln.Addr().(*net.TCPAddr).Port); h != portUnbound || err != nil {
		t.Errorf("holder, asked for an exited process: %v, %v", h, err)
	}
}
