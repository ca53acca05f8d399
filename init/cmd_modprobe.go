package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/berth-node/berth/init/bootlog"
	"github.com/berth-node/berth/init/kmod"
	"github.com/berth-node/berth/init/plan"
	"golang.org/x/sys/unix"
)

// modprobePath is where the kernel runs modprobe from (its built-in
// default, /proc/sys/kernel/modprobe); the root image links it to berth.
const modprobePath = "/sbin/modprobe"

// cmdModprobe is what the kernel runs when it needs a module nobody loaded
// (request_module: `modprobe -q -- rtnl-link-veth` when CNI makes a veth
// pair, `crypto-crc32c`, `fs-xfs`, netfilter targets...). berth ships no
// kmod tools, so it answers from the same index the boot uses, resolving
// aliases and dependencies. Its lines go to the kernel log, the only place
// an operator sees a usermode helper's output.
//
// Like modprobe -q, which is how the kernel calls it, -q makes a name that
// no module answers to fail silently: the kernel asks for many modules
// that may or may not exist (crypto and filesystem aliases, netfilter
// families), and one kernel log line each would drown the real problems.
// Other failures still reach the kernel log, in one line per request of
// bounded length.
func cmdModprobe(e env, args []string) int {
	quiet := false
	var names []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--":
			names = append(names, args[i+1:]...)
			i = len(args)
		case a == "-q" || a == "--quiet":
			quiet = true
		case a == "-b" || a == "--use-blacklist" || a == "-s" || a == "--syslog":
			// Accepted for the kernel's and tools' sake; berth has no
			// blacklist, and its lines go to the kernel log anyway.
		case len(a) > 1 && a[0] == '-':
			fmt.Fprintf(e.stderr, "berth modprobe: unsupported option %s (berth implements: modprobe [-q] [--] NAME...)\n", a)
			return 2
		default:
			names = append(names, a)
		}
	}
	if len(names) == 0 {
		fmt.Fprintln(e.stderr, "usage: modprobe [-q] [--] NAME...")
		return 2
	}
	log := e.log
	if kmsg, err := os.OpenFile("/dev/kmsg", os.O_WRONLY, 0); err == nil {
		defer kmsg.Close()
		out := bootlog.NewOutput()
		out.Attach(nil, kmsg)
		log = slog.New(bootlog.New(out, bootlog.Options{})).With("phase", "modprobe")
	}
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		fmt.Fprintf(e.stderr, "berth modprobe: uname: %v\n", err)
		return 1
	}
	dir := filepath.Join("/lib/modules", unix.ByteSliceToString(uts.Release[:]))
	ix, err := kmod.LoadIndex(dir)
	if err != nil {
		log.Error("cannot load module index", "dir", dir, "err", boundText(err.Error()))
		return 1
	}
	blocked, err := readBlockedModules(plan.BlockedModulesPath)
	if err != nil {
		// Loading what user data blocked would be worse than failing a
		// request the kernel may retry.
		log.Error("cannot read the modules user data blocks; refusing the request", "for", names, "err", boundText(err.Error()))
		return 1
	}
	return modprobeRequest{names: names, quiet: quiet, ix: ix, blocked: blocked, log: log, stderr: e.stderr, load: kmod.Load}.run(e.ctx)
}

// maxBlockedFile bounds the blocked-modules file read: the plan writes at
// most nodeconfig.MaxKernelModules names of at most 56 bytes.
const maxBlockedFile = 16 << 10

// readBlockedModules reads the plan's blocked-modules file (one module
// name a line); none when it does not exist (user data blocks none, or
// the apply phase has not run yet).
func readBlockedModules(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxBlockedFile+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(data) > maxBlockedFile {
		return nil, fmt.Errorf("%s: more than %d bytes", path, maxBlockedFile)
	}
	blocked := map[string]bool{}
	for _, l := range strings.Fields(string(data)) {
		blocked[kmod.Name(l)] = true
	}
	return blocked, nil
}

// modprobeRequest is one modprobe run once its arguments are parsed and
// the module index is read.
type modprobeRequest struct {
	names []string
	quiet bool
	ix    *kmod.Index
	// blocked are the modules user data blocks (readBlockedModules):
	// a request that needs one is refused.
	blocked map[string]bool
	// log is the kernel log; stderr the caller's (the kernel discards a
	// usermode helper's).
	log    *slog.Logger
	stderr io.Writer
	// load is kmod.Load; tests pass a fake.
	load func(ctx context.Context, log *slog.Logger, ix *kmod.Index, names ...string) ([]string, error)
}

// run loads what was asked for and returns the exit code. The kernel log
// gets at most one line per outcome: what loaded, and why the request
// failed (bounded by maxLogErr), not kmod's line per module besides.
func (r modprobeRequest) run(ctx context.Context) int {
	names, unknown := r.names, []string(nil)
	if r.quiet {
		names = nil
		for _, n := range r.names {
			if r.ix.Known(n) {
				names = append(names, n)
			} else {
				unknown = append(unknown, n)
			}
		}
	}
	if len(names) > 0 && len(r.blocked) > 0 {
		// What the request would load, dependencies included: blocking a
		// module blocks what needs it, as modprobe.d's install lines do.
		order, _ := r.ix.Resolve(names...)
		var hit []string
		for _, m := range order {
			if r.blocked[kmod.Name(m)] {
				hit = append(hit, m)
			}
		}
		if len(hit) > 0 {
			r.log.Warn("kernel's module request refused: user data blocks it (berth.dev/blocked-kernel-modules)", "for", names, "blocked", hit)
			if !r.quiet {
				fmt.Fprintf(r.stderr, "berth modprobe: %s blocked by user data (berth.dev/blocked-kernel-modules)\n", strings.Join(hit, ", "))
			}
			return 1
		}
	}
	var loaded []string
	var err error
	if len(names) > 0 {
		loaded, err = r.load(ctx, slog.New(minLevel{r.log.Handler(), slog.LevelError}), r.ix, names...)
	}
	if len(loaded) > 0 {
		r.log.Info("loaded on the kernel's request", "modules", loaded, "for", names)
	}
	if err != nil {
		if !r.quiet {
			fmt.Fprintf(r.stderr, "berth modprobe: %v\n", err)
		}
		r.log.Warn("kernel's module request failed", "for", names, "err", boundText(err.Error()))
		return 1
	}
	if len(unknown) > 0 {
		return 1 // modprobe -q: not found, silently
	}
	return 0
}

// maxLogErr bounds the error text of one kernel log line: a request whose
// module has a long chain of dependents that fail with it would otherwise
// write a kernel log record's worth (bootlog cuts at bootlog.KmsgMax) of
// repetition.
const maxLogErr = 480

// boundText puts s on one line (errors.Join separates with newlines) and
// cuts it at maxLogErr bytes, on a rune boundary, saying how much was cut.
func boundText(s string) string {
	s = strings.ReplaceAll(s, "\n", "; ")
	if len(s) <= maxLogErr {
		return s
	}
	cut := maxLogErr
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d more bytes)", s[:cut], len(s)-cut)
}

// minLevel drops records below min: kmod's per-module warnings, which the
// request's one line repeats. Errors (a recovered panic) still pass.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.Handler.Enabled(ctx, l)
}

func (m minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{m.Handler.WithAttrs(as), m.min}
}

func (m minLevel) WithGroup(name string) slog.Handler {
	return minLevel{m.Handler.WithGroup(name), m.min}
}
