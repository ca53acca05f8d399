// Command stalled decides whether a failed QEMU suite is run once more:
// it reads the suite's `go test -v` log and, when every test that failed
// did so on a guest whose kernel hung (the harness's ErrGuestStalled in the
// test's output), prints a -run pattern naming just those tests. Any other
// failure, a panic, a suite timeout or a build failure, or more than -max
// hung tests (a hang that common is no accident) prints nothing on stdout
// and says why on stderr: that run's failure stands. Either is a decision
// and exits 0 (go run would add a line of its own for any other status);
// a log it cannot read exits 2. Nor is a hung test run again that -never
// names (a test that resets its hung guests itself and is too long to run
// twice: TestRollout), or whose first run took longer than -fit, the
// rerun's timeout: it could not end in time.
//
//	stalled [-max N] [-fit D] [-never REGEXP] LOG
//
// A kernel hang under TCG is the emulator's or the guest kernel's, and
// rare (once in thousands of boots on CI), but it fails whichever test's
// guest it hits; running that test again tells a hang that follows the
// test from one that does not.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/berth-node/berth/qemu-tests/qemu"
)

func main() {
	limit := flag.Int("max", 2, "most hung tests to run again")
	fit := flag.Duration("fit", 20*time.Minute, "longest first run of a test to run again (the rerun's timeout)")
	never := flag.String("never", "", "top-level tests never run again (a regular expression)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: stalled [-max N] [-fit D] [-never REGEXP] LOG")
		os.Exit(2)
	}
	var neverRE *regexp.Regexp
	if *never != "" {
		var err error
		if neverRE, err = regexp.Compile(*never); err != nil {
			fmt.Fprintf(os.Stderr, "stalled: -never %q: %v\n", *never, err)
			os.Exit(2)
		}
	}
	f, err := os.Open(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "stalled:", err)
		os.Exit(2)
	}
	defer f.Close()
	names, err := hungOnly(f, *limit, *fit, neverRE)
	if err != nil {
		fmt.Fprintf(os.Stderr, "stalled: %s: not run again: %v\n", flag.Arg(0), err)
		return
	}
	fmt.Println(pattern(names))
}

var (
	headerRE = regexp.MustCompile(`^=== (RUN|CONT|NAME|PAUSE)\s+(\S+)`)
	failRE   = regexp.MustCompile(`^--- FAIL: (\S+)(?: \(([0-9.]+)s\))?`)
)

// hungOnly returns the top-level tests that failed, in order, when each of
// them failed with the harness's ErrGuestStalled in its output, there are
// at most limit, none took longer than fit and never (nil: none) matches
// none; otherwise an error saying why the failure stands.
func hungOnly(log io.Reader, limit int, fit time.Duration, never *regexp.Regexp) ([]string, error) {
	marker := qemu.ErrGuestStalled.Error()
	hung := map[string]bool{}
	took := map[string]time.Duration{}
	var failed []string
	cur := ""
	sc := bufio.NewScanner(log)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20) // a BERTH-REPORT line is kilobytes
	for sc.Scan() {
		line := sc.Text()
		if m := headerRE.FindStringSubmatch(line); m != nil {
			cur, _, _ = strings.Cut(m[2], "/")
			continue
		}
		if m := failRE.FindStringSubmatch(line); m != nil {
			failed = append(failed, m[1])
			if s, err := strconv.ParseFloat(m[2], 64); err == nil {
				took[m[1]] = time.Duration(s * float64(time.Second))
			}
			continue
		}
		switch {
		case strings.HasPrefix(line, "panic: "):
			return nil, fmt.Errorf("the suite panicked (%s)", strings.TrimSpace(line))
		case strings.Contains(line, "[build failed]"), strings.Contains(line, "[setup failed]"):
			return nil, fmt.Errorf("the suite did not build: %s", strings.TrimSpace(line))
		}
		if cur != "" && strings.Contains(line, marker) {
			hung[cur] = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the log: %w", err)
	}
	if len(failed) == 0 {
		return nil, errors.New("no test is reported failed (the failure is the suite's, not a test's)")
	}
	var plain []string
	for _, n := range failed {
		if !hung[n] {
			plain = append(plain, n)
		}
	}
	switch {
	case len(plain) > 0:
		return nil, fmt.Errorf("%s failed with no hung guest kernel", strings.Join(plain, ", "))
	case len(failed) > limit:
		return nil, fmt.Errorf("%d tests hit a hung guest kernel (%s), more than the %d run again", len(failed), strings.Join(failed, ", "), limit)
	}
	for _, n := range failed {
		if never != nil && never.MatchString(n) {
			return nil, fmt.Errorf("%s hit a hung guest kernel, but is never run again (-never %s): it resets a hung guest itself, and is too long to run twice", n, never)
		}
		if took[n] > fit {
			return nil, fmt.Errorf("%s hit a hung guest kernel, but its run took %s, and run again it would not end within the %s a rerun gets", n, took[n].Round(time.Second), fit)
		}
	}
	return failed, nil
}

// pattern is go test's -run for exactly the named top-level tests.
func pattern(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = regexp.QuoteMeta(n)
	}
	return "^(" + strings.Join(q, "|") + ")$"
}
