// Command failwhy prints, in a few lines, why the tests of a `go test -v`
// log failed: each failed test's t.Error and t.Fatal messages, told from
// its t.Log lines by the source line the message names, and the last
// message from a test file (a t.Fatal reached through a helper names
// the helper's caller, not a t.Fatal line). A QEMU suite's
// log runs to thousands of lines (console tails, rollout progress), and
// CI shows only the end of it; tools/qemu-suite.sh prints this last, so
// the reason is what CI shows.
//
//	failwhy [-src DIRS] [-lines N] LOG
//
// DIRS (comma-separated) are where the tests' and their harness's source
// files are; a message whose file is in none of them counts as an error,
// as it cannot be told from one. Each message keeps at most N of
// its continuation lines (a console tail, a kubectl output). It always
// exits 0 once it has read the log, since it only explains.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

func main() {
	src := flag.String("src", "qemu-tests,qemu-tests/qemu", "the directories of the tests' source files, comma-separated")
	keep := flag.Int("lines", 6, "continuation lines kept of each message")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: failwhy [-src DIR] [-lines N] LOG")
		os.Exit(2)
	}
	f, err := os.Open(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "failwhy:", err)
		os.Exit(2)
	}
	defer f.Close()
	fails, err := parse(f)
	if err != nil {
		fmt.Fprintf(os.Stderr, "failwhy: reading %s: %v\n", flag.Arg(0), err)
		os.Exit(2)
	}
	write(os.Stdout, fails, sourceLines(strings.Split(*src, ",")), *keep)
}

// message is one t.Log/t.Error line of a test and the lines that
// continue it.
type message struct {
	file string
	line int
	text []string
}

// failure is a failed test with what it wrote.
type failure struct {
	name string
	msgs []message
}

var (
	headerRE = regexp.MustCompile(`^=== (RUN|CONT|NAME|PAUSE)\s+(\S+)`)
	resultRE = regexp.MustCompile(`^(\s*)--- (PASS|FAIL|SKIP): (\S+)`)
	msgRE    = regexp.MustCompile(`^(\s+)(\S+\.go):(\d+): (.*)$`)
)

// parse reads a go test -v log and returns its failed tests, in the
// order of their --- FAIL lines, each with its messages.
func parse(r io.Reader) ([]failure, error) {
	var (
		cur    string
		byTest = map[string][]message{}
		fails  []failure
		indent = -1 // the open message's indent; -1 when none is open
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		l := sc.Text()
		if m := headerRE.FindStringSubmatch(l); m != nil {
			cur, indent = m[2], -1
			continue
		}
		if m := resultRE.FindStringSubmatch(l); m != nil {
			if m[2] == "FAIL" {
				fails = append(fails, failure{name: m[3], msgs: byTest[m[3]]})
			}
			delete(byTest, m[3])
			indent = -1
			continue
		}
		if strings.HasPrefix(l, "ok ") || strings.HasPrefix(l, "FAIL") || strings.HasPrefix(l, "PASS") {
			cur, indent = "", -1
			continue
		}
		if cur == "" {
			continue
		}
		if m := msgRE.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[3])
			byTest[cur] = append(byTest[cur], message{file: m[2], line: n, text: []string{m[4]}})
			indent = len(m[1])
			continue
		}
		// A line indented deeper than the open message continues it.
		if ms := byTest[cur]; indent >= 0 && len(ms) > 0 && len(l)-len(strings.TrimLeft(l, " \t")) > indent {
			ms[len(ms)-1].text = append(ms[len(ms)-1].text, strings.TrimSpace(l))
			continue
		}
		indent = -1
	}
	return fails, sc.Err()
}

// errorCallRE is a t.Error or t.Fatal call (t, tb, or a field: p.t);
// logCallRE a t.Log one.
var (
	errorCallRE = regexp.MustCompile(`\b(t|tb)\.(Error|Errorf|Fatal|Fatalf)\(`)
	logCallRE   = regexp.MustCompile(`\b(t|tb)\.(Log|Logf)\(`)
)

// sourceLines returns a lookup of whether file:line (or one of the two
// lines above, the start of a call written over several lines) calls
// t.Error or t.Fatal, the file found in the first of dirs that has it; a
// file none has counts as one.
func sourceLines(dirs []string) func(file string, line int) bool {
	cache := map[string][]string{}
	return func(file string, line int) bool {
		lines, ok := cache[file]
		if !ok {
			for _, d := range dirs {
				if b, err := os.ReadFile(filepath.Join(d, filepath.Base(file))); err == nil {
					lines = strings.Split(string(b), "\n")
					break
				}
			}
			cache[file] = lines
		}
		if lines == nil {
			return true
		}
		if line-1 < len(lines) && line >= 1 && logCallRE.MatchString(lines[line-1]) {
			return false
		}
		for i := line - 3; i < line; i++ {
			if i >= 0 && i < len(lines) && errorCallRE.MatchString(lines[i]) {
				return true
			}
		}
		return false
	}
}

// maxWidth cuts a printed line: a console line can hold a whole JSON
// report.
const maxWidth = 600

func write(w io.Writer, fails []failure, isError func(string, int) bool, keep int) {
	for _, f := range fails {
		// The last message from a test file, as the harness's cleanup
		// (a console tail of each VM) writes after the test's own end.
		last := -1
		for i, m := range f.msgs {
			if strings.HasSuffix(m.file, "_test.go") {
				last = i
			}
		}
		var show []message
		for i, m := range f.msgs {
			if isError(m.file, m.line) || i == last {
				show = append(show, m)
			}
		}
		if len(show) == 0 {
			// A parent that failed by its subtests says nothing itself.
			if !slices.ContainsFunc(fails, func(g failure) bool { return strings.HasPrefix(g.name, f.name+"/") }) {
				fmt.Fprintf(w, "why %s failed: it wrote no message (see the full log)\n", f.name)
			}
			continue
		}
		fmt.Fprintf(w, "why %s failed:\n", f.name)
		for i, m := range show {
			last := ""
			if i == len(show)-1 && !isError(m.file, m.line) {
				last = " (its last line)"
			}
			fmt.Fprintf(w, "  %s:%d%s: %s\n", m.file, m.line, last, cut(m.text[0]))
			rest := m.text[1:]
			if len(rest) > keep {
				fmt.Fprintf(w, "      (%d more lines, the last %d shown)\n", len(rest), keep)
				rest = rest[len(rest)-keep:]
			}
			for _, t := range rest {
				fmt.Fprintf(w, "      %s\n", cut(t))
			}
		}
	}
}

func cut(s string) string {
	if len(s) <= maxWidth {
		return s
	}
	return s[:maxWidth] + "…"
}
