package klog

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       Line
	}{
		{"structured error with a quoted err (QEMU, TestJoin)",
			`E1124 01:47:28.699219     173 kubelet_node_status.go:392] "Error getting the current node from lister" err="node \"ip-10-0-2-15.us-west-2.compute.internal\" not found"`,
			Line{Severity: Error, Month: 11, Day: 24, Time: "01:47:28.699219", PID: 173, File: "kubelet_node_status.go", FileLine: 392,
				Msg: "Error getting the current node from lister", Structured: true,
				Fields: []Field{{"err", `node "ip-10-0-2-15.us-west-2.compute.internal" not found`}}}},
		{"FLAG dump: free text, info",
			`I1123 23:36:56.874953    4025 flags.go:64] FLAG: --rotate-server-certificates="false"`,
			Line{Severity: Info, Month: 11, Day: 23, Time: "23:36:56.874953", PID: 4025, File: "flags.go", FileLine: 64,
				Msg: `FLAG: --rotate-server-certificates="false"`}},
		{"bare values among quoted ones",
			`I1123 23:28:23.356969    4153 state_mem.go:102] "Updated CPUSet assignments" logger="CPUManager state checkpoint.CPUManager state memory" assignments={}`,
			Line{Severity: Info, Month: 11, Day: 23, Time: "23:28:23.356969", PID: 4153, File: "state_mem.go", FileLine: 102,
				Msg: "Updated CPUSet assignments", Structured: true,
				Fields: []Field{{"logger", "CPUManager state checkpoint.CPUManager state memory"}, {"assignments", "{}"}}}},
		{"grpc's warning: free text with braces and quotes",
			`W1124 01:50:57.857209    9250 logging.go:55] [core] [Channel #1 SubChannel #2]grpc: addrConn.createTransport failed to connect to {Addr: "/tmp/jc-kl/containerd.sock"}`,
			Line{Severity: Warning, Month: 11, Day: 24, Time: "01:50:57.857209", PID: 9250, File: "logging.go", FileLine: 55,
				Msg: `[core] [Channel #1 SubChannel #2]grpc: addrConn.createTransport failed to connect to {Addr: "/tmp/jc-kl/containerd.sock"}`}},
		{"a multi-line value stops the pairs",
			`I1124 01:50:57.620616    9250 server.go:1] "Config" err="x" config=<`,
			Line{Severity: Info, Month: 11, Day: 24, Time: "01:50:57.620616", PID: 9250, File: "server.go", FileLine: 1,
				Msg: "Config", Structured: true, Fields: []Field{{"err", "x"}}}},
		{"an unterminated quoted value keeps the pairs before it",
			`E1122 11:21:37.393991     141 a.go:1] "m" node="n" err="unterminated`,
			Line{Severity: Error, Month: 11, Day: 22, Time: "11:21:37.393991", PID: 141, File: "a.go", FileLine: 1,
				Msg: "m", Structured: true, Fields: []Field{{"node", "n"}}}},
		{"nothing after the header",
			`F0101 00:00:00.000000 1 x.go:9]`,
			Line{Severity: Fatal, Month: 1, Day: 1, Time: "00:00:00.000000", PID: 1, File: "x.go", FileLine: 9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.line)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Parse(%q)\n got %+v\nwant %+v", tc.line, got, tc.want)
			}
		})
	}
}

func TestParseNotKlog(t *testing.T) {
	for _, l := range []string{
		"",
		"panic: runtime error: index out of range",
		"berth eks-token: getting instance role credentials from IMDS: HTTP 404 Not Found",
		`Flag --pod-infra-container-image has been deprecated`,
		`	"a": "multi-line value continued"`,
		`E1324 01:47:28.699219 173 a.go:1] "month 13"`,
		`E1124 01:47:28 173 a.go:1] "no microseconds"`,
		`E1124 01:47:28.699219 pid a.go:1] "thread id not a number"`,
		`E1124 01:47:28.699219 173 a.go] "no line number"`,
		`E1124 01:47:28.699219 173 a.go:1 "no bracket"`,
		`time="2025-11-24T01:47:28Z" level=error msg="containerd's logrus"`,
	} {
		if got, err := Parse(l); !errors.Is(err, ErrNotKlog) {
			t.Errorf("Parse(%q) = %+v, %v; want ErrNotKlog", l, got, err)
		}
	}
}

// TestParseRealLines: every line of the real kubelet excerpts the join
// cause tests use is a klog line.
func TestParseRealLines(t *testing.T) {
	files, err := filepath.Glob("../joincause/testdata/*.log")
	if err != nil || len(files) == 0 {
		t.Fatalf("no kubelet excerpts in ../joincause/testdata: %v", err)
	}
	n := 0
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			n++
			l, err := Parse(sc.Text())
			if err != nil {
				t.Errorf("%s: %v: %q", f, err, sc.Text())
				continue
			}
			if l.Structured && strings.HasPrefix(sc.Text()[strings.Index(sc.Text(), "] ")+2:], `"`) && l.Msg == "" {
				t.Errorf("%s: empty structured message in %q", f, sc.Text())
			}
		}
		fh.Close()
	}
	t.Logf("%d real kubelet lines parsed", n)
}

func TestValue(t *testing.T) {
	l, err := Parse(`E1124 00:07:10.562030    2081 controller.go:201] "Failed to ensure lease exists, will retry" err="Get \"https://10.0.2.2:6443/x\": getting credentials: exec: executable /sbin/berth failed with exit code 1" interval="400ms"`)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := l.Value("err"); !ok || v != `Get "https://10.0.2.2:6443/x": getting credentials: exec: executable /sbin/berth failed with exit code 1` {
		t.Errorf("err = %q, %v", v, ok)
	}
	if v, _ := l.Value("interval"); v != "400ms" {
		t.Errorf("interval = %q", v)
	}
	if _, ok := l.Value("node"); ok {
		t.Error("a field that is not there was found")
	}
}
