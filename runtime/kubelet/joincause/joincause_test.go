package joincause

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/runtime/kubelet/klog"
)

// The testdata files are real kubelet output, unedited:
//
//   - from berth's QEMU console logs (build/qemu-logs): the console shows
//     kubelet's E lines (and, in "service log tail", its last lines of any
//     severity); the "services: " prefix and the " level=... service=kubelet"
//     suffix berth adds are cut off. eks-credentials, containerd-down:
//     TestFaultServices (eks-token failing, containerd killed);
//     ephemeral-storage: a disk too small for kubelet's reservation;
//     healthy-join: TestJoin up to "node registered"; stats-race: kubelet
//     pid 190's E lines in a TestFaultServices-shaped node (no API server)
//     whose kubelet was restarted with a tmpfs bind mount of /var in the
//     mount table, lazily unmounted and removed right after cAdvisor
//     logged its partitions: what containerd's unpack mounts did to the
//     first start at boot (docs/design.md), made on purpose.
//   - from kubelet v1.35.4 run by hand on a build host, --v=2, in an
//     unprivileged user+net namespace: bootstrap-refused (bootstrap
//     kubeconfig, nothing listening), bootstrap-wrong-ca (a TLS server whose
//     certificate the CA does not sign), no-runtime (no containerd socket),
//     missing-client-ca. These hold every FLAG line.
//   - info-lines-once-shown: the info lines the console once printed as a
//     join cause (make demo, TestFaultServices).
//
// Lines arrive at their klog timestamp (year 2025, UTC).

func readLines(t *testing.T, name string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading %s: %v", name, err)
	}
	return out
}

// klogTime is when a testdata line was written.
func klogTime(t *testing.T, line string) time.Time {
	t.Helper()
	l, err := klog.Parse(line)
	if err != nil {
		t.Fatalf("not a klog line: %q", line)
	}
	at, err := time.Parse("2006 0102 15:04:05.000000", "2025 "+line[1:5]+" "+l.Time)
	if err != nil {
		t.Fatalf("time of %q: %v", line, err)
	}
	return at
}

// replay feeds the lines written up to until ("hh:mm:ss.uuuuuu" or a
// prefix of it, "" for all) and
// returns the cause at the last line's time plus after.
func replay(t *testing.T, lines []string, until string, after time.Duration) string {
	t.Helper()
	var tr Tracker
	var last time.Time
	for _, l := range lines {
		at := klogTime(t, l)
		if until != "" && at.Format("15:04:05.000000") > until {
			break
		}
		tr.Observe(l, at)
		last = at
	}
	return tr.Cause(last.Add(after))
}

func TestCauseFromRealLogs(t *testing.T) {
	const (
		registerCreds = `Unable to register node with API server: Post "https://10.0.2.2:6443/api/v1/nodes": getting credentials: exec: executable /sbin/berth failed with exit code 1`
		containerd    = `rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial unix /run/containerd/containerd.sock: connect: connection refused"`
	)
	for _, tc := range []struct {
		name, file, until string
		after             time.Duration
		want              string
		wantPrefix        bool
	}{
		// The demo's bug: only FLAG and start-up info lines so far.
		{name: "FLAG lines are no cause", file: "no-runtime.log", until: "01:50:57.8", want: ""},
		// kubelet's TLS bootstrap says why only at info level, with err=.
		{name: "bootstrap, API server refuses", file: "bootstrap-refused.log",
			want: `Failed to connect to apiserver: Get "https://127.0.0.1:1/healthz?timeout=1s": dial tcp 127.0.0.1:1: connect: connection refused`},
		{name: "bootstrap, wrong CA", file: "bootstrap-wrong-ca.log",
			want: `Failed to connect to apiserver: Get "https://127.0.0.1:6443/healthz?timeout=1s": tls: failed to verify certificate: x509: certificate signed by unknown authority`},
		// An error outranks the warning before it.
		{name: "no container runtime: the error, not grpc's warning", file: "no-runtime.log",
			want: `command failed: failed to run Kubelet: validate service connection: validate CRI v1 runtime API for endpoint "unix:///tmp/jc-kl/containerd.sock": rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial unix /tmp/jc-kl/containerd.sock: connect: no such file or directory"`},
		{name: "missing client CA", file: "missing-client-ca.log",
			want: `command failed: failed to construct kubelet dependencies: unable to load client CA file /tmp/jc-kl/ca.crt: open /tmp/jc-kl/ca.crt: no such file or directory`},
		// Before kubelet reaches the API server, its start-up errors and
		// "node not found" are all there is: no cause, not noise.
		{name: "EKS credentials, start-up noise only", file: "eks-credentials.log", until: "00:07:08", want: ""},
		{name: "EKS credentials: registration fails", file: "eks-credentials.log", until: "00:07:10.4", want: registerCreds},
		// The latest error wins: all the same root cause, the credentials.
		{name: "EKS credentials: the latest error", file: "eks-credentials.log", want: registerCreds},
		{name: "containerd killed under kubelet", file: "containerd-down.log", want: containerd, wantPrefix: true},
		{name: "ephemeral storage too small", file: "ephemeral-storage.log",
			want: `Failed to start ContainerManager: invalid Node Allocatable configuration. Resource "ephemeral-storage" has a reservation of`, wantPrefix: true},
		{name: "ephemeral storage too small says what to change", file: "ephemeral-storage.log",
			want: storageShortHint, wantPrefix: true},
		// cAdvisor read capacity 0 from a mount gone by then: a note, not
		// a cause; what else kubelet says (here: no API server to reach)
		// is the cause.
		{name: "ephemeral-storage capacity 0 is outranked", file: "stats-race.log",
			want: `Failed to watch: failed to list *v1.Service: Get "https://10.0.2.2:6443/api/v1/services`, wantPrefix: true},
		{name: "a healthy join's errors are no cause", file: "healthy-join.log", want: ""},
		// Long after the last line the cause is still the last one known.
		{name: "stale but still the best known", file: "eks-credentials.log", after: 10 * time.Minute, want: registerCreds},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := replay(t, readLines(t, tc.file), tc.until, tc.after)
			if tc.wantPrefix {
				if !strings.HasPrefix(got, tc.want) && !strings.HasSuffix(got, tc.want) {
					t.Errorf("cause\n got %q\nwant one starting or ending %q", got, tc.want)
				}
				return
			}
			if got != tc.want {
				t.Errorf("cause\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestInfoLinesAreNeverCauses: the info lines the console once printed as
// a cause, and every info line without err= in the excerpts.
func TestInfoLinesAreNeverCauses(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.log")
	n := 0
	for _, f := range files {
		for _, line := range readLines(t, filepath.Base(f)) {
			l, err := klog.Parse(line)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if _, hasErr := l.Value("err"); l.Severity != klog.Info || hasErr {
				continue
			}
			n++
			if r := Classify(l); r != NotCause {
				t.Errorf("%s: info line ranked %d: %q", f, r, line)
			}
			var tr Tracker
			tr.Observe(line, time.Unix(0, 0))
			if c := tr.Cause(time.Unix(0, 0)); c != "" {
				t.Errorf("%s: info line became the cause %q", f, c)
			}
		}
	}
	if n < 300 {
		t.Errorf("only %d info lines checked; the excerpts are missing", n)
	}
}

// TestNoise: each start-up error a healthy join logs is classified as no
// cause, with a line from the excerpts as the proof it is real.
func TestNoise(t *testing.T) {
	healthy := readLines(t, "healthy-join.log")
	healthy = append(healthy, readLines(t, "eks-credentials.log")...)
	seen := map[string]bool{}
	for _, line := range healthy {
		l, _ := klog.Parse(line)
		if l.Severity != klog.Error {
			continue
		}
		if Classify(l) == NotCause {
			seen[l.Msg] = true
		}
	}
	for _, msg := range []string{
		"Error getting the current node from lister",
		"Eviction manager: failed to get summary stats",
		"Failed to get node when trying to set owner ref to the node lease",
		"Skipping pod synchronization",
		"Image garbage collection failed once. Stats initialization may not have completed yet",
		"Failed to read data from checkpoint",
		"eviction manager: failed to check if we have separate container filesystem. Ignoring.",
	} {
		if !seen[msg] {
			t.Errorf("%q: not in the excerpts as noise", msg)
		}
	}
	// The CSINode line is free text, the node's name inside it.
	csi := `E1124 01:47:40.380404     173 csi_plugin.go:399] Failed to initialize CSINode: error updating CSINode annotation: timed out waiting for the condition; caused by: nodes "ip-10-0-2-15.us-west-2.compute.internal" not found`
	if l, err := klog.Parse(csi); err != nil || Classify(l) != NotCause {
		t.Errorf("CSINode's node-not-found: %v, rank %d", err, Classify(l))
	}
}

// TestFeatureGateNoticeIsNoCause: the W line kubelet logs for a GA gate in
// its config (nodeadm's DynamicResourceAllocation toggle) must not hide
// the bootstrap failure that kubelet reports at info level with err=.
func TestFeatureGateNoticeIsNoCause(t *testing.T) {
	var tr Tracker
	now := time.Now()
	for _, line := range []string{
		`W1124 02:40:12.123456     170 feature_gate.go:352] Setting GA feature gate DynamicResourceAllocation=true. It will be removed in a future release.`,
		`I1124 02:40:13.123456     170 bootstrap.go:297] "Failed to connect to apiserver" err="Get \"https://10.0.2.2:6443/healthz?timeout=1s\": tls: failed to verify certificate: x509: certificate signed by unknown authority"`,
		`W1124 02:40:14.123456     170 feature_gate.go:352] Setting deprecated feature gate KubeletPodResources=true. It will be removed in a future release.`,
	} {
		tr.Observe(line, now)
	}
	if c := tr.Cause(now); !strings.Contains(c, "x509: certificate signed by unknown authority") {
		t.Errorf("cause %q, want the bootstrap error", c)
	}
}

func TestRanking(t *testing.T) {
	const (
		errLine  = `E1124 00:07:13.141001    2081 kubelet_node_status.go:106] "Unable to register node with API server" err="Post \"https://10.0.2.2:6443/api/v1/nodes\": dial tcp 10.0.2.2:6443: connect: connection refused" node="n"`
		warnLine = `W1124 01:50:57.857209    9250 logging.go:55] [core] [Channel #1 SubChannel #2]grpc: addrConn.createTransport failed to connect`
		infoErr  = `I1124 01:49:45.334140    8164 bootstrap.go:297] "Failed to connect to apiserver" err="Get \"https://127.0.0.1:1/healthz?timeout=1s\": dial tcp 127.0.0.1:1: connect: connection refused"`
	)
	t0 := time.Date(2025, 11, 24, 0, 0, 0, 0, time.UTC)
	var tr Tracker
	if got := tr.Cause(t0); got != "" {
		t.Errorf("empty tracker: %q", got)
	}
	tr.Observe(infoErr, t0)
	if got := tr.Cause(t0); !strings.HasPrefix(got, "Failed to connect to apiserver: ") {
		t.Errorf("info with err= alone: %q", got)
	}
	tr.Observe(warnLine, t0.Add(time.Second))
	tr.Observe(infoErr, t0.Add(2*time.Second))
	if got := tr.Cause(t0.Add(2 * time.Second)); !strings.HasPrefix(got, "[core]") {
		t.Errorf("a warning outranks a later info with err=: %q", got)
	}
	tr.Observe(errLine, t0.Add(3*time.Second))
	tr.Observe(warnLine, t0.Add(4*time.Second))
	want := `Unable to register node with API server: Post "https://10.0.2.2:6443/api/v1/nodes": dial tcp 10.0.2.2:6443: connect: connection refused`
	if got := tr.Cause(t0.Add(4 * time.Second)); got != want {
		t.Errorf("an error outranks a later warning:\n got %q\nwant %q", got, want)
	}
	// Once the error has not repeated for a Window, the warning that still
	// does is the news.
	tr.Observe(warnLine, t0.Add(3*time.Second+Window+time.Second))
	if got := tr.Cause(t0.Add(3*time.Second + Window + time.Second)); !strings.HasPrefix(got, "[core]") {
		t.Errorf("a stale error still outranks a current warning: %q", got)
	}
	// A repeat refreshes its entry: the error is current again.
	tr.Observe(errLine, t0.Add(2*Window))
	if got := tr.Cause(t0.Add(2 * Window)); got != want {
		t.Errorf("repeated error: %q", got)
	}
}

func TestRepeatsAreOneEntry(t *testing.T) {
	var tr Tracker
	t0 := time.Date(2025, 11, 24, 0, 0, 0, 0, time.UTC)
	for i, iv := range []string{"200ms", "400ms", "800ms", "1.6s", "3.2s", "6.4s", "7s"} {
		tr.Observe(`E1124 00:07:10.562030    2081 controller.go:201] "Failed to ensure lease exists, will retry" err="Get \"https://10.0.2.2:6443/x\": getting credentials: exec: executable /sbin/berth failed with exit code 1" interval="`+iv+`"`,
			t0.Add(time.Duration(i)*time.Second))
	}
	if len(tr.entries) != 1 {
		t.Errorf("%d entries for one retried error, want 1", len(tr.entries))
	}
	for i := range 2 * maxEntries {
		tr.Observe(`E1124 00:07:10.562030    2081 a.go:1] "distinct" err="e`+strings.Repeat("x", i)+`"`, t0.Add(time.Hour+time.Duration(i)*time.Second))
	}
	if len(tr.entries) > maxEntries {
		t.Errorf("%d entries kept, bound is %d", len(tr.entries), maxEntries)
	}
	if got, want := tr.Cause(t0.Add(2*time.Hour)), "distinct: e"+strings.Repeat("x", 2*maxEntries-1); got != want {
		t.Errorf("after eviction the cause is %q, want the newest %q", got, want)
	}
}

// TestStatsRace: kubelet's refusal of its ephemeral-storage reservation
// against a capacity of 0 is named as the race, a note that any other
// error outranks (TestCauseFromRealLogs has the whole log); a real
// capacity below the reservation stays a cause.
func TestStatsRace(t *testing.T) {
	var tr Tracker
	var last time.Time
	for _, l := range readLines(t, "stats-race.log") {
		if strings.Contains(l, "Failed to watch") {
			continue // the rig's missing API server, the cause when present
		}
		last = klogTime(t, l)
		tr.Observe(l, last)
	}
	if got := tr.Cause(last); got != StatsRace {
		t.Errorf("the race alone: cause %q, want %q", got, StatsRace)
	}
	for _, l := range readLines(t, "ephemeral-storage.log") {
		pl, err := klog.Parse(l)
		if err != nil || !strings.Contains(l, "Failed to start ContainerManager") {
			continue
		}
		if Classify(pl) != Err || Text(pl) == StatsRace || !strings.HasSuffix(Text(pl), storageShortHint) {
			t.Errorf("a 12 MiB capacity is read as the race: rank %v, text %q", Classify(pl), Text(pl))
		}
	}
}
