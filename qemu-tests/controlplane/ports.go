package controlplane

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Port allocation. etcd and the kube-* programs cannot be handed a listening
// socket: they take a port number and bind it themselves a moment after
// starting, and another process can take the port in between. Three things
// keep that from failing a start:
//
//   - a component's ports are chosen just before it starts, not all up
//     front, so the window is one process start rather than the whole
//     control plane's;
//   - they are drawn from just below the kernel's ephemeral range
//     (ip_local_port_range), where outgoing connections — the usual thief on
//     a busy test host — never land;
//   - a component that still finds a port taken (it exits saying "address
//     already in use", or another process answers on its port) is restarted
//     on fresh ports, up to bindAttempts tries in all (component.go).
//
// Ports given in Options are never changed: a conflict on one fails the start.

// bindAttempts bounds how often one component is started on fresh ports.
const bindAttempts = 5

// portPicker returns n distinct free loopback ports, none of them in avoid.
type portPicker func(n int, avoid map[int]bool) ([]int, error)

// quietSpan is how many ports below the ephemeral range pickFreePorts draws
// from.
const quietSpan = 10000

// pickFreePorts is the default portPicker. Every candidate is bound on
// 127.0.0.1 and held until all n are found, so the n are distinct and each
// was free a moment ago.
func pickFreePorts(n int, avoid map[int]bool) ([]int, error) {
	lo, hi := quietRange("/proc/sys/net/ipv4/ip_local_port_range")
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries >= 1000 {
			return nil, fmt.Errorf("finding %d free ports on 127.0.0.1: only %d found in %d tries", n, len(ports), tries)
		}
		addr := "127.0.0.1:0"
		if hi > lo && tries < 900 {
			addr = "127.0.0.1:" + strconv.Itoa(lo+rand.IntN(hi-lo))
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			if addr == "127.0.0.1:0" {
				return nil, fmt.Errorf("finding a free port: %w", err)
			}
			continue // in use: draw again
		}
		held = append(held, ln)
		if p := ln.Addr().(*net.TCPAddr).Port; !avoid[p] {
			ports = append(ports, p)
		}
	}
	return ports, nil
}

// quietRange is [lo, hi): the quietSpan ports below the ephemeral range
// named in path ("32768\t60999"), or 0, 0 (let the kernel choose) when the
// file is unreadable or there is not enough room above 1024.
func quietRange(path string) (lo, hi int) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0
	}
	eph, err := strconv.Atoi(f[0])
	if err != nil {
		return 0, 0
	}
	lo = max(eph-quietSpan, 1024)
	if eph-lo < 1000 {
		return 0, 0
	}
	return lo, eph
}

// inUseRE finds the port in Go's bind error as etcd and the kube-* programs
// log it: "listen tcp 127.0.0.1:45559: bind: address already in use".
var inUseRE = regexp.MustCompile(`:(\d{1,5}): bind: address already in use`)

// bindConflict reports whether a component's output says a port it wanted
// was taken, and the port when the message names one (0 when it does not).
func bindConflict(output string) (port int, ok bool) {
	if !strings.Contains(output, "address already in use") {
		return 0, false
	}
	if m := inUseRE.FindAllStringSubmatch(output, -1); len(m) > 0 {
		p, _ := strconv.Atoi(m[len(m)-1][1])
		return p, true
	}
	return 0, true
}

// retryOnFreshPorts decides whether a component that exited with output
// should be started again on fresh ports: its output must say a port was
// taken, and that port must be one Start chose (auto), or, when the output
// does not name it, the component must have a port Start chose.
func retryOnFreshPorts(output string, auto []int) (port int, retry bool) {
	port, ok := bindConflict(output)
	if !ok || len(auto) == 0 {
		return port, false
	}
	if port == 0 {
		return 0, true
	}
	for _, a := range auto {
		if a == port {
			return port, true
		}
	}
	return port, false
}

// portHolder says who listens on a TCP port.
type portHolder int

const (
	portUnbound portHolder = iota // nobody listens yet
	portOurs                      // the process asked about does
	portTheirs                    // only other processes do
)

func (h portHolder) String() string {
	return [...]string{"unbound", "ours", "theirs"}[h]
}

// listenerHolder reports who listens on TCP port on an address that
// overlaps 127.0.0.1 (where the components bind): the process pid, only
// others, or nobody. It reads /proc/net/tcp{,6} for the listening sockets'
// inodes and /proc/PID/fd for the process's.
func listenerHolder(pid, port int) (portHolder, error) {
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if err := listeningInodes(f, port, inodes); err != nil && !(os.IsNotExist(err) && strings.HasSuffix(f, "6")) {
			return portUnbound, err
		}
	}
	if len(inodes) == 0 {
		return portUnbound, nil
	}
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		// The process has exited (or is a zombie not yet reaped): it holds
		// nothing, whatever answers on the port.
		return portUnbound, nil
	}
	if err != nil {
		return portUnbound, err
	}
	for _, e := range ents {
		link, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		if ino, ok := strings.CutPrefix(link, "socket:["); ok && inodes[strings.TrimSuffix(ino, "]")] {
			return portOurs, nil
		}
	}
	return portTheirs, nil
}

// loopbackOverlap are the local addresses, as /proc/net/tcp{,6} print them
// (32-bit words in host order, little- or big-endian), whose listeners keep
// 127.0.0.1 from being bound: itself and the wildcards, IPv4 and IPv6
// (which may be dual-stack), and IPv4-mapped 127.0.0.1.
var loopbackOverlap = map[string]bool{
	"0100007F": true, "7F000001": true, "00000000": true,
	"00000000000000000000000000000000": true,
	"0000000000000000FFFF00000100007F": true, "00000000000000000000FFFF7F000001": true,
	"0000000000000000FFFF000000000000": true, "00000000000000000000FFFF00000000": true,
}

// listeningInodes adds to inodes the inode of every socket in LISTEN state
// on port, on an address overlapping 127.0.0.1, in a /proc/net/tcp-format
// file.
func listeningInodes(path string, port int, inodes map[string]bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	want := fmt.Sprintf(":%04X", port)
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		fs := strings.Fields(sc.Text())
		if len(fs) < 10 || fs[3] != "0A" || !strings.HasSuffix(fs[1], want) || !loopbackOverlap[strings.TrimSuffix(fs[1], want)] {
			continue
		}
		inodes[fs[9]] = true
	}
	return sc.Err()
}
