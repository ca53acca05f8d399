package logind

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestParseInhibitDelayGolden: each file under testdata/conf against the
// value listed for it in want.txt.
func TestParseInhibitDelayGolden(t *testing.T) {
	want, err := os.ReadFile("testdata/conf/want.txt")
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("testdata/conf/*.conf")
	var got []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d, ok, err := parseInhibitDelay(data)
		v := d.String()
		switch {
		case err != nil:
			v = "error"
		case !ok:
			v = "unset"
		case d == Infinity:
			v = "infinity"
		}
		got = append(got, filepath.Base(f)+" "+v)
	}
	if g, w := strings.Join(got, "\n")+"\n", string(want); g != w {
		t.Errorf("got\n%s\nwant (testdata/conf/want.txt)\n%s", g, w)
	}
}

func TestParseTimespan(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"150": 150 * time.Second, "2.5": 2500 * time.Millisecond, "2min 30s": 150 * time.Second,
		"2min30s": 150 * time.Second, "1h": time.Hour, "500ms": 500 * time.Millisecond, "0": 0,
	} {
		if got, err := parseTimespan(in); err != nil || got != want {
			t.Errorf("parseTimespan(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"", "soon", "5 parsecs", "s", "1e9", "99999999999999d"} {
		if got, err := parseTimespan(in); err == nil {
			t.Errorf("parseTimespan(%q) = %s, want an error", in, got)
		}
	}
}

// TestLoadInhibitDelay: the drop-ins win over the file in lexical order,
// and a bad drop-in leaves the others' value with an error naming it.
func TestLoadInhibitDelay(t *testing.T) {
	dir := t.TempDir()
	file, drop := filepath.Join(dir, "logind.conf"), filepath.Join(dir, "logind.conf.d")
	if d, err := LoadInhibitDelay(file, drop); err != nil || d != DefaultInhibitDelayMax {
		t.Errorf("no files: %s, %v; want the default", d, err)
	}
	os.MkdirAll(drop, 0o755)
	os.WriteFile(file, []byte("[Login]\nInhibitDelayMaxSec=7\n"), 0o644)
	os.WriteFile(filepath.Join(drop, "10-a.conf"), []byte("[Login]\nInhibitDelayMaxSec=30\n"), 0o644)
	os.WriteFile(filepath.Join(drop, "99-kubelet.conf"), []byte("[Login]\nInhibitDelayMaxSec=20\n"), 0o644)
	os.WriteFile(filepath.Join(drop, "50-bad.conf"), []byte("[Login]\nInhibitDelayMaxSec=x\n"), 0o644)
	os.WriteFile(filepath.Join(drop, "README"), []byte("InhibitDelayMaxSec=1\n"), 0o644)
	d, err := LoadInhibitDelay(file, drop)
	if d != 20*time.Second {
		t.Errorf("effective = %s, want 99-kubelet.conf's 20s", d)
	}
	if err == nil || !strings.Contains(err.Error(), "50-bad.conf") {
		t.Errorf("err = %v, want one naming 50-bad.conf", err)
	}
}

func TestWaitBoundPure(t *testing.T) {
	for _, c := range []struct{ delay, margin, want time.Duration }{
		{5 * time.Second, ReleaseMargin, 15 * time.Second},
		{150 * time.Second, ReleaseMargin, 160 * time.Second},
		{Infinity, ReleaseMargin, MaxWait},
		{MaxWait - time.Second, ReleaseMargin, MaxWait},
		{0, time.Second, time.Second},
	} {
		if got := waitBound(c.delay, c.margin); got != c.want {
			t.Errorf("waitBound(%s, %s) = %s, want %s", c.delay, c.margin, got, c.want)
		}
	}
}

// TestAuth plays handshakes line by line.
func TestAuth(t *testing.T) {
	cases := []struct {
		name    string
		peer    uint32
		lines   []string
		replies []string
		done    bool
		fail    bool
		fds     bool
	}{
		{"godbus", 0, []string{"AUTH", "AUTH EXTERNAL 30", "NEGOTIATE_UNIX_FD", "BEGIN"},
			[]string{"REJECTED EXTERNAL", "OK g", "AGREE_UNIX_FD", ""}, true, false, true},
		{"identity from the socket", 0, []string{"AUTH EXTERNAL", "DATA", "BEGIN"},
			[]string{"DATA", "OK g", ""}, true, false, false},
		{"claims another uid", 0, []string{"AUTH EXTERNAL 31303030"}, []string{"REJECTED EXTERNAL"}, false, false, false},
		{"not root", 1000, []string{"AUTH EXTERNAL 31303030"}, []string{"REJECTED EXTERNAL"}, false, false, false},
		{"other mechanism", 0, []string{"AUTH DBUS_COOKIE_SHA1 30"}, []string{"REJECTED EXTERNAL"}, false, false, false},
		{"BEGIN before auth", 0, []string{"BEGIN"}, []string{""}, false, true, false},
		{"bad hex", 0, []string{"AUTH EXTERNAL zz"}, []string{"REJECTED EXTERNAL"}, false, false, false},
		{"cancel after OK", 0, []string{"AUTH EXTERNAL 30", "CANCEL", "BEGIN"}, []string{"OK g", "REJECTED EXTERNAL", ""}, false, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := &authenticator{peerUID: c.peer, guid: "g"}
			var replies []string
			var done, fail bool
			for _, l := range c.lines {
				var r string
				r, done, fail = a.step(l)
				replies = append(replies, r)
				if done || fail {
					break
				}
			}
			if !slices.Equal(replies, c.replies) || done != c.done || fail != c.fail || a.unixFDs != c.fds {
				t.Errorf("replies %q done %v fail %v fds %v; want %q %v %v %v", replies, done, fail, a.unixFDs, c.replies, c.done, c.fail, c.fds)
			}
		})
	}
	a := &authenticator{guid: "g"}
	for i := 0; i < maxAuthLines; i++ {
		if _, _, fail := a.step("AUTH"); fail {
			t.Fatalf("failed after %d lines", i)
		}
	}
	if _, _, fail := a.step("AUTH"); !fail {
		t.Error("a handshake that never ends is not cut off")
	}
}

// TestMatchRules: kubelet's rule (as godbus formats it) selects the
// signal; rules for something else, or with keys this bus cannot meet,
// do not.
func TestMatchRules(t *testing.T) {
	for rule, want := range map[string]bool{
		"type='signal',interface='org.freedesktop.login1.Manager',member='PrepareForShutdown',path='/org/freedesktop/login1'": true,
		"type='signal'":                            true,
		"":                                         true,
		"path_namespace='/org/freedesktop'":        true,
		"path_namespace='/org/free'":               false,
		"type='signal',member='PrepareForSleep'":   false,
		"type='method_call'":                       false,
		"type='signal',arg0='true'":                false,
		"interface=org.freedesktop.login1.Manager": true,
		"sender='org.freedesktop.login1',member=PrepareForShutdown": true,
	} {
		r, err := parseMatchRule(rule)
		if err != nil {
			t.Errorf("parseMatchRule(%q): %v", rule, err)
			continue
		}
		if got := r.matches(prepareForShutdown); got != want {
			t.Errorf("%q matches = %v, want %v", rule, got, want)
		}
	}
	r, err := parseMatchRule(`member='it'\''s'`)
	if err != nil || r.keys["member"] != "it's" {
		t.Errorf("escaped quote: %v %v", r.keys, err)
	}
	for _, bad := range []string{"type='signal", "type", "=x", "a=1,a=2", strings.Repeat("a", maxRuleLen+1)} {
		if _, err := parseMatchRule(bad); err == nil {
			t.Errorf("parseMatchRule(%q) accepted", bad)
		}
	}
}

func TestCheckInhibit(t *testing.T) {
	for _, c := range []struct {
		what, mode string
		sd, err    bool
	}{
		{"shutdown", "delay", true, false},
		{"sleep:shutdown", "delay", true, false},
		{"sleep", "delay", false, false},
		{"shutdown", "block", false, true},
		{"", "delay", false, true},
		{"shutdown:nap", "delay", false, true},
	} {
		sd, err := checkInhibit(c.what, c.mode)
		if sd != c.sd || (err != nil) != c.err {
			t.Errorf("checkInhibit(%q, %q) = %v, %v", c.what, c.mode, sd, err)
		}
	}
}

func FuzzParseInhibitDelay(f *testing.F) {
	files, _ := filepath.Glob("testdata/conf/*.conf")
	for _, p := range files {
		b, _ := os.ReadFile(p)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, ok, err := parseInhibitDelay(data)
		if err == nil && ok && (d < 0 || (d > maxTimespan && d != Infinity)) {
			t.Errorf("out of range: %s", d)
		}
	})
}

func FuzzParseMatchRule(f *testing.F) {
	f.Add("type='signal',interface='org.freedesktop.login1.Manager',member='PrepareForShutdown',path='/org/freedesktop/login1'")
	f.Add(`a='\'',b=\'`)
	f.Fuzz(func(t *testing.T, s string) {
		r, err := parseMatchRule(s)
		if err == nil {
			_ = r.matches(prepareForShutdown)
		}
	})
}

func FuzzAuth(f *testing.F) {
	f.Add("AUTH\nAUTH EXTERNAL 30\nNEGOTIATE_UNIX_FD\nBEGIN", uint32(0))
	f.Add("AUTH EXTERNAL\nDATA\nBEGIN", uint32(5))
	f.Fuzz(func(t *testing.T, script string, peer uint32) {
		a := &authenticator{peerUID: peer, guid: "g"}
		for i, l := range strings.Split(script, "\n") {
			_, done, fail := a.step(l)
			if done && peer != 0 {
				t.Fatalf("uid %d let in", peer)
			}
			if done || fail {
				return
			}
			if i > maxAuthLines {
				t.Fatal(fmt.Sprintf("not cut off after %d lines", i))
			}
		}
	})
}
