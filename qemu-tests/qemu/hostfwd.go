package qemu

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// FwdKubelet is a NIC.HostFwd rule for the guest's kubelet port on a host
// port the kernel picks when QEMU binds it (port 0): race-free, unlike a
// port chosen free beforehand. VM.HostFwdPort says which port it got.
const FwdKubelet = "tcp:127.0.0.1:0-:10250"

// HostFwdPort returns the host port of the TCP hostfwd rule to guestPort,
// as QEMU bound it (a rule given host port 0 gets one from the kernel). It
// asks the monitor's "info usernet".
func (vm *VM) HostFwdPort(guestPort int) (int, error) {
	raw, err := vm.QMP("human-monitor-command", map[string]any{"command-line": "info usernet"})
	if err != nil {
		return 0, fmt.Errorf("asking QEMU for its hostfwd ports: %w", err)
	}
	var out string
	if err := json.Unmarshal(raw, &out); err != nil {
		return 0, fmt.Errorf("decoding QEMU's info usernet: %w", err)
	}
	return hostFwdPort(out, guestPort)
}

// hostFwdPort finds, in "info usernet" output, the host port of the TCP
// hostfwd to guestPort:
//
//	Protocol[State]    FD  Source Address  Port   Dest. Address  Port RecvQ SendQ
//	TCP[HOST_FORWARD]   3       127.0.0.1 37771       10.0.2.15 10250     0     0
func hostFwdPort(usernet string, guestPort int) (int, error) {
	found := 0
	for _, line := range strings.Split(usernet, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[0] != "TCP[HOST_FORWARD]" || f[5] != strconv.Itoa(guestPort) {
			continue
		}
		p, err := strconv.Atoi(f[3])
		if err != nil || p <= 0 || p > 65535 {
			return 0, fmt.Errorf("info usernet: bad host port %q in %q", f[3], strings.TrimSpace(line))
		}
		if found != 0 && found != p {
			return 0, fmt.Errorf("info usernet: two hostfwd rules to guest port %d (host ports %d and %d)", guestPort, found, p)
		}
		found = p
	}
	if found == 0 {
		return 0, fmt.Errorf("info usernet: no TCP hostfwd to guest port %d (NIC.HostFwd lacks it?):\n%s", guestPort, usernet)
	}
	return found, nil
}
