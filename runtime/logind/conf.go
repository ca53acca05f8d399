package logind

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultInhibitDelayMax is logind's own default for InhibitDelayMaxSec,
// so kubelet sees what it would see on a systemd host and writes its
// override (99-kubelet.conf) as it would there.
const DefaultInhibitDelayMax = 5 * time.Second

// Infinity is what "infinity" reads as: longer than any wait berth makes.
const Infinity = time.Duration(1<<63 - 1)

// Where logind's configuration lives. Only /etc: /run/systemd and
// /usr/lib/systemd hold nothing on a berth node (no package installs
// there), and kubelet writes to /etc.
const (
	ConfFile = "/etc/systemd/logind.conf"
	ConfDir  = "/etc/systemd/logind.conf.d"
)

// parseInhibitDelay reads InhibitDelayMaxSec from one logind.conf-style
// file: the last assignment in a [Login] section wins, as systemd's
// parser does. ok is false when the file does not set it.
func parseInhibitDelay(data []byte) (d time.Duration, ok bool, err error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	section := ""
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			if !strings.HasSuffix(line, "]") {
				return 0, false, fmt.Errorf("line %d: %q: section header without ']'", n, line)
			}
			section = line[1 : len(line)-1]
			continue
		}
		key, val, found := strings.Cut(line, "=")
		if !found {
			return 0, false, fmt.Errorf("line %d: %q: no '='", n, line)
		}
		if section != "Login" || strings.TrimSpace(key) != "InhibitDelayMaxSec" {
			continue
		}
		v, err := parseTimespan(strings.TrimSpace(val))
		if err != nil {
			return 0, false, fmt.Errorf("line %d: InhibitDelayMaxSec: %w", n, err)
		}
		d, ok = v, true
	}
	if err := sc.Err(); err != nil {
		return 0, false, err
	}
	return d, ok, nil
}

// timespanUnits are systemd's time span units (systemd.time(7)).
var timespanUnits = map[string]time.Duration{
	"us": time.Microsecond, "usec": time.Microsecond, "µs": time.Microsecond,
	"ms": time.Millisecond, "msec": time.Millisecond,
	"s": time.Second, "sec": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
}

// maxTimespan keeps sums far from overflow; logind would accept more, but
// no node waits a year to shut down.
const maxTimespan = 365 * 24 * time.Hour

// parseTimespan parses a systemd time span in seconds by default:
// "150", "2.5", "2min 30s", "infinity".
func parseTimespan(s string) (time.Duration, error) {
	if s == "infinity" {
		return Infinity, nil
	}
	if s == "" {
		return 0, errors.New("empty time span")
	}
	var total time.Duration
	rest := s
	for rest != "" {
		rest = strings.TrimLeft(rest, " \t")
		if rest == "" {
			break
		}
		i := strings.IndexFunc(rest, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
		if i == 0 {
			return 0, fmt.Errorf("time span %q: expected a number at %q", s, rest)
		}
		if i < 0 {
			i = len(rest)
		}
		num, err := strconv.ParseFloat(rest[:i], 64)
		if err != nil {
			return 0, fmt.Errorf("time span %q: %w", s, err)
		}
		rest = strings.TrimLeft(rest[i:], " \t")
		j := strings.IndexFunc(rest, func(r rune) bool { return r == ' ' || r == '\t' || (r >= '0' && r <= '9') || r == '.' })
		if j < 0 {
			j = len(rest)
		}
		unit := time.Second
		if j > 0 {
			u, ok := timespanUnits[rest[:j]]
			if !ok {
				return 0, fmt.Errorf("time span %q: unknown unit %q", s, rest[:j])
			}
			unit = u
		}
		rest = rest[j:]
		if num*float64(unit) > float64(maxTimespan) {
			return 0, fmt.Errorf("time span %q: more than %s", s, maxTimespan)
		}
		total += time.Duration(num * float64(unit))
		if total > maxTimespan {
			return 0, fmt.Errorf("time span %q: more than %s", s, maxTimespan)
		}
	}
	return total, nil
}

// LoadInhibitDelay is the effective InhibitDelayMaxSec: the default, then
// file, then dir's *.conf in lexical order, each later setting winning, as
// systemd reads logind.conf and its drop-ins. A file that does not parse
// is skipped with its error returned beside the value the others give,
// so one bad drop-in cannot take the others' value away.
func LoadInhibitDelay(file, dir string) (time.Duration, error) {
	d := DefaultInhibitDelayMax
	var errs []error
	paths := []string{file}
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fmt.Errorf("listing %s: %w", dir, err))
	}
	var drop []string
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".conf") {
			drop = append(drop, filepath.Join(dir, e.Name()))
		}
	}
	slices.Sort(drop)
	for _, p := range append(paths, drop...) {
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("reading %s: %w", p, err))
			continue
		}
		v, ok, err := parseInhibitDelay(data)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
			continue
		}
		if ok {
			d = v
		}
	}
	return d, errors.Join(errs...)
}
