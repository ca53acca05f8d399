package rlimit

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The test binary doubles as berth: run as `TEST rlimit-exec ...` it is the
// helper under test, as berth is on a node.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == Command {
		limits, argv, err := ParseArgs(os.Args[2:])
		if err == nil {
			err = Exec(limits, argv, os.Environ())
		}
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func TestParseString(t *testing.T) {
	for _, l := range []Limit{
		{"nofile", 65536, 1048576},
		{"core", Infinity, Infinity},
		{"nproc", 0, Infinity},
	} {
		got, err := Parse(l.String())
		if err != nil || got != l {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", l.String(), got, err, l)
		}
	}
	if s := (Limit{"nofile", 1024, Infinity}).String(); s != "nofile=1024:infinity" {
		t.Errorf("String = %q", s)
	}
	for _, bad := range []string{"", "nofile", "nofile=1", "nofile=2:1", "stack=1:2", "nofile=-1:2", "nofile=1:x", "nofile=infinity:1"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestArgs(t *testing.T) {
	limits := []Limit{{"nofile", 1, 2}, {"core", 0, Infinity}}
	argv := []string{"/bin/x", "--", "nofile=3:4"}
	a := Args("/sbin/berth", limits, argv)
	want := []string{"/sbin/berth", Command, "nofile=1:2", "core=0:infinity", "--", "/bin/x", "--", "nofile=3:4"}
	if !slices.Equal(a, want) {
		t.Fatalf("Args = %q", a)
	}
	gl, ga, err := ParseArgs(a[2:])
	if err != nil || !slices.Equal(gl, limits) || !slices.Equal(ga, argv) {
		t.Errorf("ParseArgs = %v %q %v", gl, ga, err)
	}
	for _, bad := range [][]string{nil, {"nofile=1:2"}, {"nofile=1:2", "--"}, {"bogus", "--", "/bin/x"}} {
		if _, _, err := ParseArgs(bad); err == nil {
			t.Errorf("ParseArgs(%q) accepted", bad)
		}
	}
}

// A real child through the helper: /proc/self/limits shows exactly the
// limits asked for, the soft NOFILE included (the Go runtime raises its
// own soft NOFILE at start and syscall.Exec would restore the original:
// neither may leak into the service).
func TestExecChild(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Within the test's own hard limits: raising one needs
	// CAP_SYS_RESOURCE, which PID 1 has and a test in a container may not.
	// The soft NOFILE is neither the hard one (what the Go runtime raised
	// it to) nor the original.
	var nofile, core unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &nofile); err != nil {
		t.Fatal(err)
	}
	if err := unix.Getrlimit(unix.RLIMIT_CORE, &core); err != nil {
		t.Fatal(err)
	}
	limits := []Limit{{"nofile", nofile.Max/2 + 1, nofile.Max}, {"core", 0, core.Max}}
	out, err := exec.Command(self, Args("", limits, []string{"/bin/cat", "/proc/self/limits"})[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, l := range limits {
		line := limitLine(t, string(out), l.Resource)
		f := strings.Fields(line)
		if len(f) < 2 || f[len(f)-3] != value2(l.Soft) || f[len(f)-2] != value2(l.Hard) {
			t.Errorf("%s: got %q, want %s", l.Resource, line, l)
		}
	}
	if line := limitLine(t, string(out), "stack"); line == "" {
		t.Error("no stack line")
	}

	// A limit the kernel refuses: the program does not run.
	out, err = exec.Command(self, Command, "nofile=10:"+"1099511627776", "--", "/bin/true").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "setting rlimit nofile=10:1099511627776 for /bin/true") {
		t.Errorf("refused limit: err %v, output %q", err, out)
	}
	out, err = exec.Command(self, Command, "--", "true").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not an absolute path") {
		t.Errorf("relative path: err %v, output %q", err, out)
	}
}

// limitLine is /proc/self/limits's line for a resource.
func limitLine(t *testing.T, limits, resource string) string {
	t.Helper()
	name := map[string]string{"nofile": "Max open files", "core": "Max core file size", "nproc": "Max processes", "stack": "Max stack size"}[resource]
	for _, line := range strings.Split(limits, "\n") {
		if strings.HasPrefix(line, name) {
			return line
		}
	}
	t.Fatalf("no %q line in:\n%s", name, limits)
	return ""
}

// value2 is how /proc/self/limits writes a value.
func value2(v uint64) string {
	if v == Infinity {
		return "unlimited"
	}
	return value(v)
}

func FuzzParseArgs(f *testing.F) {
	f.Add("nofile=65536:1048576\x00core=infinity:infinity\x00--\x00/bin/x")
	f.Add("--\x00/bin/x")
	f.Add("nproc=1:\x00--")
	f.Fuzz(func(t *testing.T, s string) {
		limits, argv, err := ParseArgs(strings.Split(s, "\x00"))
		if err != nil {
			return
		}
		if len(argv) == 0 {
			t.Fatal("accepted without a program")
		}
		for _, l := range limits {
			if l.Check() != nil {
				t.Fatalf("accepted %+v", l)
			}
			if back, err := Parse(l.String()); err != nil || back != l {
				t.Fatalf("%+v does not round-trip: %+v %v", l, back, err)
			}
		}
	})
}
