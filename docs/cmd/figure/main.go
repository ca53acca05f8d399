// Command figure runs a command and, when it succeeds, writes how long it
// took into a doc's table of figures (package figures), so the doc shows
// that command's last run:
//
//	figure -doc docs/testing.md -section timings -row KEY [-cold-if-absent PATH] -- COMMAND [ARG...]
//	figure -doc docs/testing.md -section timings -row KEY -set VALUE
//
// The figure is the wall time and the CPU time of the command and of every
// process under it ("41.2 min, CPU 63.0 min"); with -cold-if-absent it
// also says whether PATH was there when the command started (", cold" or
// ", warm": a build's outputs). A failed command writes nothing and
// figure exits with its status. Its output is the command's own.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/berth-node/berth/docs/figures"
)

func main() {
	os.Exit(cli(os.Args[1:]))
}

// cli is figure's whole run, returning its exit status.
func cli(args []string) int {
	fl := flag.NewFlagSet("figure", flag.ContinueOnError)
	doc := fl.String("doc", "", "the Markdown file to write the figure into")
	section := fl.String("section", "timings", "the section (<!-- BEGIN name -->) holding the table")
	row := fl.String("row", "", "the key (first cell) of the row whose last cell is the figure")
	set := fl.String("set", "", "write this figure and run nothing")
	cold := fl.String("cold-if-absent", "", "a path whose absence at the start makes the run a cold one")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if *doc == "" || *row == "" || (*set == "") == (fl.NArg() == 0) {
		fmt.Fprintln(os.Stderr, "usage: figure -doc FILE [-section NAME] -row KEY {-set VALUE | [-cold-if-absent PATH] -- COMMAND [ARG...]}")
		return 2
	}
	write := func(value string) int {
		if err := figures.Update(*doc, func(md string) (string, error) {
			return figures.SetLast(md, *section, *row, value)
		}); err != nil {
			fmt.Fprintf(os.Stderr, "figure: row %q: %v\n", *row, err)
			return 2
		}
		return 0
	}
	if *set != "" {
		return write(*set)
	}
	warm := true
	if *cold != "" {
		if _, err := os.Stat(*cold); errors.Is(err, os.ErrNotExist) {
			warm = false
		}
	}
	start := time.Now()
	st, err := run(fl.Args())
	if err != nil {
		fmt.Fprintf(os.Stderr, "figure: %v\n", err)
		return 2
	}
	// On the log as well, pass or fail: a CI run's log then says where its
	// time went even when it fails and no figure is written.
	fmt.Fprintf(os.Stderr, "figure: %s: %s, exit %d\n", *row, Format(time.Since(start), st.UserTime()+st.SystemTime()), st.ExitCode())
	if !st.Success() {
		if code := st.ExitCode(); code > 0 {
			return code
		}
		return 1
	}
	if dryRun(os.Getenv("MAKEFLAGS")) {
		return 0
	}
	value := Format(time.Since(start), st.UserTime()+st.SystemTime())
	if *cold != "" {
		value += map[bool]string{true: ", warm", false: ", cold"}[warm]
	}
	return write(value)
}

// dryRun says whether make runs figure under -n, -q or -t (make runs a
// recipe line naming $(MAKE) even then): the command only printed what it
// would do, and its time is no figure.
func dryRun(makeflags string) bool {
	first, _, _ := strings.Cut(makeflags, " ")
	return first != "" && !strings.HasPrefix(first, "-") && strings.ContainsAny(first, "nqt")
}

// run runs args with figure's own standard streams. An interrupt reaches
// the command from the terminal as it reaches figure; figure waits for the
// command to act on it rather than dying first. (Caught, not ignored: an
// ignored signal would stay ignored in the command too.)
func run(args []string) (*os.ProcessState, error) {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", args[0], err)
	}
	err := cmd.Wait()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return nil, fmt.Errorf("waiting for %s: %w", args[0], err)
	}
	return cmd.ProcessState, nil
}

// Format is a figure as the docs show it: minutes from a minute up,
// seconds below.
func Format(wall, cpu time.Duration) string {
	return dur(wall) + ", CPU " + dur(cpu)
}

func dur(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.0f s", d.Seconds())
	}
	return fmt.Sprintf("%.1f min", d.Minutes())
}
