package qemu

import (
	"strings"
	"testing"
)

// QEMU 7.2's "info usernet" with a kubelet hostfwd bound on port 0.
const usernetOut = "Hub -1 (net0):\r\n" +
	"  Protocol[State]    FD  Source Address  Port   Dest. Address  Port RecvQ SendQ\r\n" +
	"  TCP[HOST_FORWARD]   3       127.0.0.1 37771       10.0.2.15 10250     0     0\r\n" +
	"  TCP[HOST_FORWARD]   4       127.0.0.1 40000       10.0.2.15    22     0     0\r\n" +
	"  TCP[ESTABLISHED]   25        10.0.2.15 41234       10.0.2.2  6443     0     0\r\n"

func TestHostFwdPort(t *testing.T) {
	for _, tc := range []struct {
		out   string
		guest int
		want  int
		err   string
	}{
		{usernetOut, 10250, 37771, ""},
		{usernetOut, 22, 40000, ""},
		{usernetOut, 6443, 0, "no TCP hostfwd to guest port 6443"},
		{"", 10250, 0, "no TCP hostfwd"},
		{"  TCP[HOST_FORWARD] 3 127.0.0.1 x 10.0.2.15 10250 0 0", 10250, 0, `bad host port "x"`},
		{usernetOut + "  TCP[HOST_FORWARD]   5       127.0.0.1 1234       10.0.2.15 10250     0     0\n", 10250, 0, "two hostfwd rules"},
	} {
		got, err := hostFwdPort(tc.out, tc.guest)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("hostFwdPort(guest %d) = %d, %v; want %d, %q", tc.guest, got, err, tc.want, tc.err)
		}
	}
}

func FuzzHostFwdPort(f *testing.F) {
	f.Add(usernetOut, 10250)
	f.Fuzz(func(t *testing.T, out string, guest int) {
		p, err := hostFwdPort(out, guest)
		if err == nil && (p <= 0 || p > 65535) {
			t.Errorf("port %d without an error", p)
		}
	})
}
