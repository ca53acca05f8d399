package klog

import (
	"strings"
	"testing"
)

// FuzzParse: kubelet's output is outside input. Parse must not panic, and
// what it returns must be consistent with the line it read.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`E1124 01:47:28.699219     173 kubelet_node_status.go:392] "Error getting the current node from lister" err="node \"n\" not found"`,
		`I1123 23:36:56.874953    4025 flags.go:64] FLAG: --rotate-server-certificates="false"`,
		`I1123 23:28:23.356969    4153 state_mem.go:102] "Updated CPUSet assignments" logger="a b" assignments={}`,
		`I1124 01:50:57.620616    9250 server.go:1] "Config" config=<`,
		`W1124 01:50:57.857209    9250 logging.go:55] [core] grpc: {Addr: "x"}`,
		`F0101 00:00:00.000000 1 x.go:9]`,
		`E1122 11:21:37.393991 141 a.go:1] "m" err="unterminated`,
		"panic: boom",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := Parse(s)
		if err != nil {
			return
		}
		if s[0] != byte(l.Severity) || !strings.ContainsRune("IWEF", rune(l.Severity)) {
			t.Errorf("severity %q from %q", l.Severity, s)
		}
		if l.Month < 1 || l.Month > 12 || l.Day < 1 || l.Day > 31 || len(l.Time) != len("15:04:05.000000") {
			t.Errorf("date %d/%d time %q from %q", l.Month, l.Day, l.Time, s)
		}
		if l.File == "" || l.PID < 0 || l.FileLine < 0 {
			t.Errorf("header %+v from %q", l, s)
		}
		if !l.Structured && !strings.HasSuffix(s, l.Msg) {
			t.Errorf("free-text message %q is not the end of %q", l.Msg, s)
		}
		if !l.Structured && len(l.Fields) > 0 {
			t.Errorf("fields %v on a free-text line %q", l.Fields, s)
		}
		for _, fl := range l.Fields {
			if fl.Key == "" || strings.ContainsAny(fl.Key, " \"=") {
				t.Errorf("key %q from %q", fl.Key, s)
			}
		}
	})
}
