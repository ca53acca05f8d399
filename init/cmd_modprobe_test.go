package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/berth-node/berth/init/bootlog"
	"github.com/berth-node/berth/init/kmod"
)

// fakeLoad stands for kmod.Load: it records what it was asked for, logs
// as kmod does (a warning per module, an error for a panic), and returns
// loaded and err.
type fakeLoad struct {
	asked  [][]string
	loaded []string
	err    error
}

func (f *fakeLoad) load(_ context.Context, log *slog.Logger, _ *kmod.Index, names ...string) ([]string, error) {
	f.asked = append(f.asked, names)
	log.Warn("module not loaded", "module", names[0])
	log.Error("panic recovered", "goroutine", "load module "+names[0])
	return f.loaded, f.err
}

type modprobeCase struct {
	kmsg, stderr bytes.Buffer
	fake         fakeLoad
}

func (c *modprobeCase) run(t *testing.T, quiet bool, names ...string) int {
	t.Helper()
	ix, err := kmod.LoadIndex("kmod/testdata")
	if err != nil {
		t.Fatal(err)
	}
	return modprobeRequest{names: names, quiet: quiet, ix: ix, stderr: &c.stderr, load: c.fake.load,
		log: slog.New(slog.NewTextHandler(&c.kmsg, nil))}.run(context.Background())
}

func (c *modprobeCase) lines() []string {
	return strings.Split(strings.TrimSpace(c.kmsg.String()), "\n")
}

// TestModprobeQuietMissing: with -q (how the kernel calls it), a module
// that does not exist fails silently: exit 1, nothing in the kernel log,
// nothing loaded.
func TestModprobeQuietMissing(t *testing.T) {
	var c modprobeCase
	if code := c.run(t, true, "rtnl-link-nosuch"); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if c.kmsg.Len() > 0 || c.stderr.Len() > 0 || len(c.fake.asked) > 0 {
		t.Errorf("kernel log %q, stderr %q, load asked for %v; want silence", c.kmsg.String(), c.stderr.String(), c.fake.asked)
	}

	// A missing name beside a known one: the known one loads; still exit 1.
	c = modprobeCase{fake: fakeLoad{loaded: []string{"erofs"}}}
	if code := c.run(t, true, "nosuch", "fs-erofs"); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if !slices.EqualFunc(c.fake.asked, [][]string{{"fs-erofs"}}, slices.Equal) {
		t.Errorf("load asked for %v, want [[fs-erofs]]", c.fake.asked)
	}
	if strings.Contains(c.kmsg.String(), "nosuch") || strings.Contains(c.kmsg.String(), "level=WARN") {
		t.Errorf("kernel log names the missing module:\n%s", c.kmsg.String())
	}
}

// TestModprobeLoads: a known name (an alias here) loads, in one info line;
// kmod's own warnings stay out, its errors (a panic) do not.
func TestModprobeLoads(t *testing.T) {
	c := modprobeCase{fake: fakeLoad{loaded: []string{"erofs"}}}
	if code := c.run(t, true, "fs-erofs"); code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
	log := c.kmsg.String()
	if !strings.Contains(log, `msg="loaded on the kernel's request" modules=[erofs] for=[fs-erofs]`) {
		t.Errorf("kernel log lacks the loaded line:\n%s", log)
	}
	if strings.Contains(log, "module not loaded") || !strings.Contains(log, `msg="panic recovered"`) {
		t.Errorf("kernel log: want kmod's errors but not its warnings:\n%s", log)
	}
}

// TestModprobeFailureIsBounded: a module that exists but fails is still
// reported, with -q too, in one warning line of bounded length however
// long the error.
func TestModprobeFailureIsBounded(t *testing.T) {
	var errs []error
	for i := range 200 {
		errs = append(errs, fmt.Errorf("loading module dependent_%d: skipped, its dependency virtio failed", i))
	}
	for _, quiet := range []bool{true, false} {
		c := modprobeCase{fake: fakeLoad{err: errors.Join(errs...)}}
		if code := c.run(t, quiet, "virtio_net"); code != 1 {
			t.Errorf("quiet=%v: exit %d, want 1", quiet, code)
		}
		var warns []string
		for _, l := range c.lines() {
			if strings.Contains(l, "level=WARN") {
				warns = append(warns, l)
			}
		}
		if len(warns) != 1 || !strings.Contains(warns[0], `msg="kernel's module request failed" for=[virtio_net]`) ||
			!strings.Contains(warns[0], "loading module dependent_0: skipped") || !strings.Contains(warns[0], "more bytes)") {
			t.Fatalf("quiet=%v: want one bounded warning, got %d:\n%s", quiet, len(warns), c.kmsg.String())
		}
		if n := len(warns[0]); n > maxLogErr+200 {
			t.Errorf("quiet=%v: the warning is %d bytes long", quiet, n)
		}
		if got := c.stderr.String(); quiet != (got == "") {
			t.Errorf("quiet=%v: stderr %q", quiet, got)
		}
	}
}

// TestModprobeNotQuietMissing: without -q a missing module is an error,
// in the kernel log and on stderr, as modprobe's would be.
func TestModprobeNotQuietMissing(t *testing.T) {
	c := modprobeCase{fake: fakeLoad{err: errors.New("modules not in /lib/modules/x/modules.dep: nosuch")}}
	if code := c.run(t, false, "nosuch"); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if !strings.Contains(c.kmsg.String(), `msg="kernel's module request failed" for=[nosuch]`) ||
		!strings.Contains(c.stderr.String(), "berth modprobe: modules not in") {
		t.Errorf("kernel log:\n%s\nstderr: %s", c.kmsg.String(), c.stderr.String())
	}
}

func TestBoundText(t *testing.T) {
	if got := boundText("a\nb"); got != "a; b" {
		t.Errorf("boundText(a\\nb) = %q", got)
	}
	long := "x" + strings.Repeat("é", maxLogErr) // 2 bytes each after the x: a cut at an even length falls inside one
	got := boundText(long)
	head, _, ok := strings.Cut(got, "... (")
	if !ok || !utf8.ValidString(head) || !strings.HasPrefix(long, head) || len(head) < maxLogErr-3 || len(head) > maxLogErr ||
		!strings.HasSuffix(got, fmt.Sprintf("... (%d more bytes)", len(long)-len(head))) {
		t.Errorf("boundText(%d bytes) = %q", len(long), got)
	}
	if bootlog.KmsgMax < maxLogErr+200 {
		t.Errorf("maxLogErr %d leaves no room for the rest of the line in a kmsg record (%d)", maxLogErr, bootlog.KmsgMax)
	}
}

func TestModprobeUsage(t *testing.T) {
	for _, args := range [][]string{{"modprobe"}, {"modprobe", "-q"}, {"modprobe", "-r", "loop"}} {
		var out, errb bytes.Buffer
		if code := runCLI(args, &out, &errb); code != 2 || errb.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a usage line", args, code, errb.String())
		}
	}
}

// TestModprobeBlocked: a request that needs a module user data blocks,
// itself or as a dependency, is refused with one kernel log line and
// loads nothing; other requests load as before.
func TestModprobeBlocked(t *testing.T) {
	ix, err := kmod.LoadIndex("kmod/testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		quiet bool
		want  int
	}{
		{"xfs", true, 1},        // xfs needs libcrc32c
		{"libcrc32c", false, 1}, // the module itself
		{"fs-erofs", true, 0},   // not blocked
	} {
		var c modprobeCase
		c.fake.loaded = []string{"erofs"}
		code := modprobeRequest{names: []string{tc.name}, quiet: tc.quiet, ix: ix, blocked: map[string]bool{"libcrc32c": true},
			stderr: &c.stderr, load: c.fake.load, log: slog.New(slog.NewTextHandler(&c.kmsg, nil))}.run(context.Background())
		if code != tc.want {
			t.Errorf("%s: exit %d, want %d", tc.name, code, tc.want)
		}
		if tc.want == 1 {
			if len(c.fake.asked) > 0 || !strings.Contains(c.kmsg.String(), "user data blocks it") || !strings.Contains(c.kmsg.String(), "libcrc32c") {
				t.Errorf("%s: load asked for %v; kernel log %q", tc.name, c.fake.asked, c.kmsg.String())
			}
			if !tc.quiet && !strings.Contains(c.stderr.String(), "libcrc32c blocked by user data") {
				t.Errorf("%s: stderr %q", tc.name, c.stderr.String())
			}
		} else if len(c.fake.asked) != 1 {
			t.Errorf("%s: load asked for %v", tc.name, c.fake.asked)
		}
	}
}

// TestReadBlockedModules: the plan's file, one name a line (dashes read
// as underscores, as module names are); none without the file; a file
// over the bound is an error, so that the request is refused.
func TestReadBlockedModules(t *testing.T) {
	dir := t.TempDir()
	if b, err := readBlockedModules(dir + "/none"); err != nil || b != nil {
		t.Errorf("no file: %v %v", b, err)
	}
	path := dir + "/blocked"
	if err := os.WriteFile(path, []byte("sctp\nnf-conntrack\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := readBlockedModules(path)
	if err != nil || !b["sctp"] || !b["nf_conntrack"] || len(b) != 2 {
		t.Errorf("got %v %v", b, err)
	}
	if err := os.WriteFile(path, bytes.Repeat([]byte("a\n"), maxBlockedFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readBlockedModules(path); err == nil {
		t.Error("an oversized file read without error")
	}
}
