package cmdline

import (
	"log/slog"
	"net"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/internal/syntax"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want []Param
	}{
		{"", nil},
		{"   \n", nil},
		{"quiet", []Param{{Key: "quiet"}}},
		{"console=ttyS0,115200 quiet", []Param{{Key: "console", Value: "ttyS0,115200", HasValue: true}, {Key: "quiet"}}},
		{`berth.exec="/bin/echo a b c" ro`, []Param{{Key: "berth.exec", Value: "/bin/echo a b c", HasValue: true}, {Key: "ro"}}},
		// the whole word quoted: the kernel drops both quotes
		{`"berth.exec=/bin/echo a b"`, []Param{{Key: "berth.exec", Value: "/bin/echo a b", HasValue: true}}},
		// quotes in the middle toggle quoting but stay in the value
		{`k=a"b c"d x`, []Param{{Key: "k", Value: `a"b c"d`, HasValue: true}, {Key: "x"}}},
		// empty value
		{`k= k2=""`, []Param{{Key: "k", Value: "", HasValue: true}, {Key: "k2", Value: "", HasValue: true}}},
		// only the first '=' splits
		{`root=PARTUUID=abc`, []Param{{Key: "root", Value: "PARTUUID=abc", HasValue: true}}},
		// unterminated quote runs to the end
		{`k="a b`, []Param{{Key: "k", Value: "a b", HasValue: true}}},
		// tabs and newlines separate words, as /proc/cmdline ends in one
		{"a=1\tb=2\n", []Param{{Key: "a", Value: "1", HasValue: true}, {Key: "b", Value: "2", HasValue: true}}},
		// a word starting with '=' has no key, like the kernel's equals==0
		{"=x", []Param{{Key: "=x"}}},
		{"-- init arg", []Param{{Key: "--"}, {Key: "init"}, {Key: "arg"}}},
	}
	for _, tt := range tests {
		got := Parse(tt.in).Params
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Parse(%q) = %#v, want %#v", tt.in, got, tt.want)
		}
	}
}

func TestGetAllHas(t *testing.T) {
	c := Parse(`berth.exec=a berth.root=/x berth.exec="b c" berth.root=/y flag`)
	if v, ok := c.Get("berth.root"); !ok || v != "/y" {
		t.Errorf("Get(berth.root) = %q,%v; want the last one, /y", v, ok)
	}
	if got := c.All("berth.exec"); !reflect.DeepEqual(got, []string{"a", "b c"}) {
		t.Errorf("All(berth.exec) = %q", got)
	}
	if !c.Has("flag") || c.Has("nope") {
		t.Errorf("Has: flag=%v nope=%v", c.Has("flag"), c.Has("nope"))
	}
	if _, ok := c.Get("nope"); ok {
		t.Error("Get(nope) found something")
	}
}

func TestParseOnFail(t *testing.T) {
	tests := []struct {
		in      string
		want    OnFail
		wantErr bool
	}{
		{"reboot", OnFail{Reboot, 30 * time.Second}, false},
		{"reboot:0", OnFail{Reboot, 0}, false},
		{"reboot:5", OnFail{Reboot, 5 * time.Second}, false},
		{"halt", OnFail{Action: Halt}, false},
		{"poweroff", OnFail{Action: PowerOff}, false},
		{"stay", OnFail{Action: Stay}, false},
		{"reboot:-1", OnFail{}, true},
		{"reboot:x", OnFail{}, true},
		{"reboot:", OnFail{}, true},
		{"reboot:100000", OnFail{}, true},
		{"halt:3", OnFail{}, true},
		{"explode", OnFail{}, true},
		{"", OnFail{}, true},
	}
	for _, tt := range tests {
		got, err := ParseOnFail(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseOnFail(%q) = %+v, %v; want %+v, err=%v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), "berth.onfail") {
			t.Errorf("ParseOnFail(%q) error %q does not name the key", tt.in, err)
		}
	}
	if s := (OnFail{Reboot, 30 * time.Second}).String(); s != "reboot:30" {
		t.Errorf("String() = %q", s)
	}
}

func TestDecodeDefaults(t *testing.T) {
	cfg, warns := Decode(Parse("console=ttyS0 quiet"))
	want := Config{OnFail: OnFail{Reboot, 30 * time.Second}, Root: "/root.erofs", LogLevel: slog.LevelInfo}
	if !reflect.DeepEqual(cfg, want) || len(warns) != 0 {
		t.Errorf("Decode = %+v, %q; want %+v and no warnings", cfg, warns, want)
	}
}

func TestDecode(t *testing.T) {
	cfg, warns := Decode(Parse(`berth.onfail=halt berth.root=none berth.loglevel=debug ` +
		`berth.exec="/bin/helper reap 'two words'" berth.exec=/bin/true berth.debugshell=ttyS1`))
	want := Config{
		OnFail:     OnFail{Action: Halt},
		Root:       "",
		RootSet:    true,
		LogLevel:   slog.LevelDebug,
		Exec:       [][]string{{"/bin/helper", "reap", "two words"}, {"/bin/true"}},
		DebugShell: "ttyS1",
	}
	if !reflect.DeepEqual(cfg, want) || len(warns) != 0 {
		t.Errorf("Decode = %+v, %q; want %+v and no warnings", cfg, warns, want)
	}
}

func TestDecodeWarnings(t *testing.T) {
	cfg, warns := Decode(Parse(`berth.onfial=halt berth.onfail=sometimes berth.root=relative ` +
		`berth.loglevel=loud berth.exec="" berth.exec="'open" berth.debugshell=../sda berth.xyz`))
	// RootSet stays false: a malformed berth.root must not stop the
	// manifest's root disk from being used.
	want := Config{OnFail: OnFail{Reboot, 30 * time.Second}, Root: "/root.erofs", LogLevel: slog.LevelInfo}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("bad values changed the config: %+v, want defaults %+v", cfg, want)
	}
	mustMention := []string{`"berth.onfial"`, `"berth.xyz"`, `berth.onfail="sometimes"`, `berth.root="relative"`,
		`berth.loglevel="loud"`, `berth.exec=""`, `berth.exec="'open"`, `berth.debugshell="../sda"`}
	if len(warns) != len(mustMention) {
		t.Errorf("got %d warnings, want %d: %q", len(warns), len(mustMention), warns)
	}
	all := strings.Join(warns, "\n")
	for _, m := range mustMention {
		if !strings.Contains(all, m) {
			t.Errorf("no warning names %s; warnings:\n%s", m, all)
		}
	}
}

// TestDecodeControlCharacters: a quoted value may hold a control
// character (the kernel splits words only outside quotes); such a value is
// warned about and the default kept, never used.
func TestDecodeControlCharacters(t *testing.T) {
	cfg, warns := Decode(Parse("berth.root=\"/root.erofs\x1b[2J\" berth.exec=\"/bin/echo a\x07\" berth.exec=/bin/true " +
		"berth.debugshell=\"ttyS1\nx\""))
	want := Config{OnFail: OnFail{Reboot, 30 * time.Second}, Root: "/root.erofs", LogLevel: slog.LevelInfo, Exec: [][]string{{"/bin/true"}}}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("Decode = %+v, want %+v", cfg, want)
	}
	all := strings.Join(warns, "\n")
	for _, m := range []string{`berth.root="/root.erofs\x1b[2J"`, `berth.exec="/bin/echo a\a": word 1 has a control character`, `berth.debugshell="ttyS1\nx"`} {
		if !strings.Contains(all, m) {
			t.Errorf("no warning says %s; warnings:\n%s", m, all)
		}
	}
}

func TestSplitWords(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{"", nil, false},
		{"a", []string{"a"}, false},
		{"  a  b ", []string{"a", "b"}, false},
		{"sh -c 'echo hi; exit 3'", []string{"sh", "-c", "echo hi; exit 3"}, false},
		{"a'b c'd", []string{"ab cd"}, false},
		{"''", []string{""}, false},
		{"'open", nil, true},
	}
	for _, tt := range tests {
		got, err := SplitWords(tt.in)
		if (err != nil) != tt.wantErr || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("SplitWords(%q) = %q, %v; want %q, err=%v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

// FuzzParse checks that any command line parses without panic, that every
// word is accounted for, and that decoding never panics either.
func FuzzParse(f *testing.F) {
	f.Add(`console=ttyS0 berth.exec="/bin/a b" "x=y z" berth.onfail=reboot:3`)
	f.Add(`"`)
	f.Add(`=`)
	f.Fuzz(func(t *testing.T, s string) {
		c := Parse(s)
		if strings.TrimSpace(s) != "" && len(c.Params) == 0 {
			t.Fatalf("Parse(%q) found no words", s)
		}
		for _, p := range c.Params {
			if !p.HasValue && p.Value != "" {
				t.Fatalf("Parse(%q): value %q without '='", s, p.Value)
			}
		}
		cfg, warns := Decode(c)
		for _, w := range append([]string{cfg.Root, cfg.DebugShell}, slices.Concat(cfg.Exec...)...) {
			if syntax.NoControl(w) != nil {
				t.Fatalf("Decode(%q) kept %q", s, w)
			}
		}
		for _, w := range warns {
			if strings.ContainsAny(w, "\n\r") {
				t.Fatalf("warning %q spans lines", w)
			}
		}
	})
}

func TestParseNTP(t *testing.T) {
	good := map[string][]string{
		"10.0.2.2:1123":                      {"10.0.2.2:1123"},
		"169.254.169.123":                    {"169.254.169.123:123"},
		"fd00:ec2::123":                      {"[fd00:ec2::123]:123"},
		"[fd00:ec2::123]:4123,time.aws.com":  {"[fd00:ec2::123]:4123", "time.aws.com:123"},
		"time.example.internal:123,10.0.0.1": {"time.example.internal:123", "10.0.0.1:123"},
	}
	for in, want := range good {
		got, err := ParseNTP(in)
		if err != nil || got.Off || !slices.Equal(got.Servers, want) {
			t.Errorf("ParseNTP(%q) = %+v, %v; want %q", in, got, err, want)
		}
	}
	if got, err := ParseNTP("off"); err != nil || !got.Off {
		t.Errorf("ParseNTP(off) = %+v, %v", got, err)
	}
	bad := map[string]string{
		"":                        "want HOST",
		"10.0.2.2:0":              `entry 1 "10.0.2.2:0": port "0"`,
		"10.0.0.1,10.0.2.2:99999": `entry 2 "10.0.2.2:99999": port`,
		"a,,b":                    `entry 2 "": empty`,
		"1.2.3.4:":                `entry 1 "1.2.3.4:": port ""`,
		"[fd00::1":                `entry 1 "[fd00::1"`,
		"a:b:c":                   `entry 1 "a:b:c"`,
		"bad_name!":               `entry 1 "bad_name!": want an IP address or a DNS name`,
		"0.0.0.0":                 "unicast",
		"fe80::1%eth0":            "zone",
		"a,b,c,d,e,f,g,h,i":       "at most 8",
	}
	for in, want := range bad {
		_, err := ParseNTP(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseNTP(%q) error %v, want it to contain %q", in, err, want)
		}
	}
	cfg, warns := Decode(Parse("berth.ntp=10.0.2.2:1123"))
	if len(warns) != 0 || !slices.Equal(cfg.NTP.Servers, []string{"10.0.2.2:1123"}) {
		t.Errorf("Decode berth.ntp: %+v %q", cfg.NTP, warns)
	}
	cfg, warns = Decode(Parse("berth.ntp=10.0.2.2:x"))
	if len(warns) != 1 || !strings.Contains(warns[0], `"10.0.2.2:x"`) || cfg.NTP.Servers != nil {
		t.Errorf("Decode bad berth.ntp: %+v %q, want one warning naming the entry", cfg.NTP, warns)
	}
}

func FuzzParseNTP(f *testing.F) {
	for _, s := range []string{"10.0.2.2:1123", "fd00:ec2::123", "[::1]:5,a.b", "off", "a,,b", "[", "1.2.3.4:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseNTP(s)
		if err != nil {
			return
		}
		for _, a := range n.Servers {
			// What comes out must be what the NTP library can dial.
			if _, _, err := net.SplitHostPort(a); err != nil {
				t.Errorf("ParseNTP(%q) gave %q, not host:port: %v", s, a, err)
			}
			if syntax.NoControl(a) != nil {
				t.Errorf("ParseNTP(%q) gave %q with a control character", s, a)
			}
		}
	})
}

// TestDecodeRootSet: only a valid berth.root= overrides the manifest's root
// disk; a path or none sets it, a malformed value does not.
func TestDecodeRootSet(t *testing.T) {
	for line, want := range map[string]bool{
		"quiet":                        false,
		"berth.root=none":              true,
		"berth.root=/root.erofs":       true,
		"berth.root=relative":          false,
		"berth.root=\"/x\x07\"":        false,
		"berth.root=/a berth.root=rel": false,
	} {
		cfg, _ := Decode(Parse(line))
		if cfg.RootSet != want {
			t.Errorf("%q: RootSet %v, want %v", line, cfg.RootSet, want)
		}
	}
}

// TestKnownKeysAreDocumented: every key some package owns is known here
// (no warning for it) and in this package's doc, and an unowned berth.*
// key still draws the warning.
func TestKnownKeysAreDocumented(t *testing.T) {
	src, err := os.ReadFile("cmdline.go")
	if err != nil {
		t.Fatal(err)
	}
	doc, _, _ := strings.Cut(string(src), "package cmdline")
	for _, k := range knownKeys() {
		if !strings.Contains(doc, "//\t"+k+"=") && !strings.Contains(doc, " "+k+"=") && !strings.Contains(doc, "//\t"+k+"=") {
			t.Errorf("key %s is read by berth but not in the package doc's list", k)
		}
		if _, warns := Decode(Parse(k + "=x")); slices.ContainsFunc(warns, func(w string) bool { return strings.Contains(w, "unknown kernel command line key") }) {
			t.Errorf("key %s draws the unknown-key warning: %v", k, warns)
		}
	}
	if _, warns := Decode(Parse("berth.imdss=x")); !slices.ContainsFunc(warns, func(w string) bool { return strings.Contains(w, `"berth.imdss"`) }) {
		t.Errorf("a misspelt key draws no warning: %v", warns)
	}
}
