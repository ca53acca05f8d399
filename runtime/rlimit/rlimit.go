// Package rlimit gives a service its resource limits (RLIMIT_NOFILE and
// the like) before its first instruction, as systemd's LimitNOFILE= does.
//
// PID 1 cannot set them around the fork: rlimits are per process, so
// raising its own would race the other services' starts and leak into
// every helper it runs, and Go's os/exec gives no hook between fork and
// exec. prlimit(2) on the started pid races the service, which may open
// files or fork before the call lands. So the service is started through
// berth itself: `berth rlimit-exec nofile=65536:1048576 -- /usr/bin/x ...`
// sets the limits on its own process and execve(2)s the service, which
// keeps the pid, cgroup, process group and OOM score the supervisor gave.
//
// Format and Parse are pure; Exec is the one function that acts.
package rlimit

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Command is berth's subcommand that sets limits and execs (see the
// package doc).
const Command = "rlimit-exec"

// Infinity is RLIM_INFINITY: no limit (systemd's "infinity").
const Infinity = unix.RLIM_INFINITY

// resource is the RLIMIT_ number of a limit berth sets, by the name
// systemd's Limit*= settings use (lower case); false for another.
func resource(name string) (int, bool) {
	switch name {
	case "core":
		return unix.RLIMIT_CORE, true
	case "nofile":
		return unix.RLIMIT_NOFILE, true
	case "nproc":
		return unix.RLIMIT_NPROC, true
	}
	return 0, false
}

// Limit is one resource limit.
type Limit struct {
	// Resource is "core", "nofile" or "nproc".
	Resource string
	Soft     uint64
	Hard     uint64
}

// String is the limit as Parse reads it: nofile=65536:1048576, with
// "infinity" for Infinity.
func (l Limit) String() string {
	return l.Resource + "=" + value(l.Soft) + ":" + value(l.Hard)
}

func value(v uint64) string {
	if v == Infinity {
		return "infinity"
	}
	return strconv.FormatUint(v, 10)
}

// Check says what is wrong with l, if anything.
func (l Limit) Check() error {
	if _, ok := resource(l.Resource); !ok {
		return fmt.Errorf("rlimit %q: unknown resource (known: core, nofile, nproc)", l.Resource)
	}
	if l.Soft > l.Hard {
		return fmt.Errorf("rlimit %s: soft limit above the hard one", l)
	}
	return nil
}

// Parse reads one limit as String writes it.
func Parse(s string) (Limit, error) {
	name, vals, ok := strings.Cut(s, "=")
	if !ok {
		return Limit{}, fmt.Errorf("rlimit %q: want RESOURCE=SOFT:HARD", s)
	}
	soft, hard, ok := strings.Cut(vals, ":")
	if !ok {
		return Limit{}, fmt.Errorf("rlimit %q: want RESOURCE=SOFT:HARD", s)
	}
	l := Limit{Resource: name}
	var err error
	if l.Soft, err = parseValue(soft); err != nil {
		return Limit{}, fmt.Errorf("rlimit %q: soft limit: %w", s, err)
	}
	if l.Hard, err = parseValue(hard); err != nil {
		return Limit{}, fmt.Errorf("rlimit %q: hard limit: %w", s, err)
	}
	if err := l.Check(); err != nil {
		return Limit{}, err
	}
	return l, nil
}

func parseValue(s string) (uint64, error) {
	if s == "infinity" {
		return Infinity, nil
	}
	return strconv.ParseUint(s, 10, 64)
}

// Args is the argv that starts argv through self (berth's path) with
// limits set.
func Args(self string, limits []Limit, argv []string) []string {
	out := []string{self, Command}
	for _, l := range limits {
		out = append(out, l.String())
	}
	out = append(out, "--")
	return append(out, argv...)
}

// ParseArgs reads what follows Command in Args's argv: the limits, and the
// program's argv after "--".
func ParseArgs(args []string) ([]Limit, []string, error) {
	i := slices.Index(args, "--")
	if i < 0 {
		return nil, nil, errors.New("no -- before the program's argv")
	}
	if i == len(args)-1 {
		return nil, nil, errors.New("no program after --")
	}
	var limits []Limit
	for _, a := range args[:i] {
		l, err := Parse(a)
		if err != nil {
			return nil, nil, err
		}
		limits = append(limits, l)
	}
	return limits, args[i+1:], nil
}

// Exec sets limits on this process and replaces it with argv (argv[0] an
// absolute path) in environment env. It returns only on failure: a limit the
// kernel refuses (a hard NOFILE above fs.nr_open) or a program that cannot
// be run. The service is not started without its limits: it fails, and the
// supervisor's log and backoff show why.
func Exec(limits []Limit, argv, env []string) error {
	for _, l := range limits {
		if err := l.Check(); err != nil {
			return err
		}
		res, _ := resource(l.Resource)
		// syscall's, not unix's: it also stops syscall.Exec from
		// restoring the soft NOFILE the Go runtime found at start.
		if err := syscall.Setrlimit(res, &syscall.Rlimit{Cur: l.Soft, Max: l.Hard}); err != nil {
			return fmt.Errorf("setting rlimit %s for %s: %w", l, argv[0], err)
		}
	}
	if !filepath.IsAbs(argv[0]) {
		// As the supervisor requires: PID 1 has no PATH worth trusting.
		return fmt.Errorf("executing %q: not an absolute path", argv[0])
	}
	if err := syscall.Exec(argv[0], argv, env); err != nil {
		return fmt.Errorf("executing %s: %w", argv[0], err)
	}
	return nil
}
