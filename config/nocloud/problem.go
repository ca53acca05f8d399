package nocloud

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/berth-node/berth/internal/redact"
)

// MaxProblems caps the problems kept for one file. A generated file can
// hold thousands of mistakes; the first MaxProblems are kept and the rest
// counted on a last line.
const MaxProblems = 50

// Bounds on one problem's text: messages quote the input.
const (
	maxMessage = 512
	maxPath    = 256
)

// Problem is one thing wrong with, or ignored in, a seed file.
type Problem struct {
	// File is the seed file: user-data, meta-data or network-config.
	File string `json:"file"`
	// Line is 1-based; 0 when the whole file is at fault or the line is
	// not known.
	Line int `json:"line,omitempty"`
	// Path is the key path as written, for example
	// network.ethernets.eth0.routes[1].via; empty for the whole file.
	Path    string `json:"path,omitempty"`
	Message string `json:"message"`
}

// Error formats the problem as FILE: line N: PATH: MESSAGE, leaving out
// what is not known.
func (p Problem) Error() string {
	var b strings.Builder
	b.WriteString(p.File)
	b.WriteString(": ")
	if p.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", p.Line)
	}
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// Problems is a file's errors, as one error.
type Problems []Problem

func (ps Problems) Error() string {
	if len(ps) == 1 {
		return ps[0].Error()
	}
	msgs := make([]string, len(ps))
	for i, p := range ps {
		msgs[i] = p.Error()
	}
	return fmt.Sprintf("%d problems:\n  %s", len(ps), strings.Join(msgs, "\n  "))
}

// problemList keeps the first MaxProblems problems and counts the rest.
type problemList struct {
	file    string
	list    []Problem
	omitted int
}

func (l *problemList) add(line int, path, format string, args ...any) {
	if len(l.list) >= MaxProblems {
		l.omitted++
		return
	}
	l.list = append(l.list, Problem{File: l.file, Line: line, Path: cut(path, maxPath),
		Message: cut(redact.Text(fmt.Sprintf(format, args...)), maxMessage)})
}

// problems returns what was kept, then a line counting what was not.
func (l *problemList) problems() []Problem {
	if l.omitted == 0 {
		return l.list
	}
	return append(l.list[:len(l.list):len(l.list)], Problem{File: l.file,
		Message: fmt.Sprintf("... and %d more problems not listed; fix the ones above and check again", l.omitted)})
}

// err returns the problems as an error, or nil.
func (l *problemList) err() error {
	if len(l.list) == 0 {
		return nil
	}
	return Problems(l.problems())
}

// cut shortens s to at most n bytes, on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n -= 24
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + fmt.Sprintf("... (%d bytes)", len(s))
}
