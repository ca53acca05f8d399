package nodeconfig

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/berth-node/berth/internal/redact"
)

// Severity says whether a problem stops the node from being configured.
type Severity string

const (
	// SeverityError stops boot (and makes `berth check` fail).
	SeverityError Severity = "error"
	// SeverityWarning is logged; `berth check --strict` treats unknown
	// fields, which are warnings, as errors.
	SeverityWarning Severity = "warning"
)

// MergedSource is the Source of problems found only in the merged result,
// such as a required field that no document sets.
const MergedSource = "merged config"

// MaxProblems caps the problems kept by Parse, ValidateDocument,
// ValidateMerged, Validate, Load and Check. A generated document can hold
// millions of mistakes (2.7 KB of gzip once expanded to a list of a
// million numbers where strings belong, and `berth check` printed 69 MB),
// and every problem kept costs memory and a line of output. The first MaxProblems are kept; the rest
// are only counted, on one more problem whose Omitted is set and whose
// message reads "... and N more problems". The cap applies while problems
// are collected, so memory stays bounded, not just the printout.
const MaxProblems = 50

// Bounds on the text of one problem: messages and paths quote the input,
// whose strings and keys may be hundreds of kilobytes long.
const (
	maxMessage = 1024
	maxPath    = 256
	maxSource  = 256
)

// SeveralSources is the Source of the omitted-problems line when the
// omitted problems came from more than one source.
const SeveralSources = "several sources"

// Problem is one thing wrong with a NodeConfig, located by source and path.
type Problem struct {
	Severity Severity `json:"severity"`
	// Source is the file path or user-data part the value came from, or
	// MergedSource.
	Source string `json:"source"`
	// Line is the 1-based line in Source the problem is at, when the
	// source is a file read line by line (a NoCloud seed's meta-data or
	// network-config); 0 when not known, as for NodeConfig fields, which
	// Path locates.
	Line int `json:"line,omitempty"`
	// Path is the field path, for example spec.cluster.apiServerEndpoint
	// or spec.kubelet.flags[2]; empty when the whole document is at fault.
	Path string `json:"path,omitempty"`
	// Message says what is wrong and, where it helps, what to do.
	Message string `json:"message"`
	// Unknown marks unknown-field warnings, which --strict promotes.
	Unknown bool `json:"unknown,omitempty"`
	// Omitted is set only on the line that ends a capped list (see
	// MaxProblems): it counts the problems left out. The line's Severity
	// is error when any of them is, and Unknown is set when, besides
	// warnings, only unknown-field warnings were left out, so that
	// --strict and HasErrors treat it as they would the problems.
	Omitted Omitted `json:"omitted,omitzero"`
}

// Omitted counts the problems a capped list left out, by kind.
type Omitted struct {
	Errors   int `json:"errors,omitempty"`
	Warnings int `json:"warnings,omitempty"`
	// Unknown counts the Warnings that are unknown-field warnings.
	Unknown int `json:"unknown,omitempty"`
}

// Total is the number of problems left out.
func (o Omitted) Total() int { return o.Errors + o.Warnings }

func (o *Omitted) add(x Omitted) {
	o.Errors += x.Errors
	o.Warnings += x.Warnings
	o.Unknown += x.Unknown
}

// omittedOf counts p as left out.
func omittedOf(p Problem) Omitted {
	switch {
	case p.Omitted.Total() > 0:
		return p.Omitted
	case p.Severity == SeverityError:
		return Omitted{Errors: 1}
	case p.Unknown:
		return Omitted{Warnings: 1, Unknown: 1}
	}
	return Omitted{Warnings: 1}
}

// promoteUnknown makes p's unknown-field warnings errors, as --strict
// does, including those counted on an omitted-problems line.
func promoteUnknown(p *Problem) {
	if o := &p.Omitted; o.Unknown > 0 {
		o.Errors += o.Unknown
		o.Warnings -= o.Unknown
		o.Unknown = 0
		p.Severity, p.Unknown = SeverityError, false
		return
	}
	if p.Unknown {
		p.Severity = SeverityError
	}
}

// Error formats the problem as SOURCE: line N: PATH: MESSAGE, leaving out
// the line and the path when they are not known.
func (p Problem) Error() string {
	s := p.Source + ": "
	if p.Line > 0 {
		s += "line " + strconv.Itoa(p.Line) + ": "
	}
	if p.Path == "" {
		return s + p.Message
	}
	return s + p.Path + ": " + p.Message
}

// String is Error prefixed with the severity, for printing lists.
func (p Problem) String() string {
	return string(p.Severity) + ": " + p.Error()
}

// Count returns how many errors and warnings ps holds, counting those an
// omitted-problems line stands for.
func Count(ps []Problem) (errors, warnings int) {
	for _, p := range ps {
		switch {
		case p.Omitted.Total() > 0:
			errors += p.Omitted.Errors
			warnings += p.Omitted.Warnings
		case p.Severity == SeverityError:
			errors++
		default:
			warnings++
		}
	}
	return errors, warnings
}

// HasErrors reports whether any problem is an error.
func HasErrors(ps []Problem) bool {
	for _, p := range ps {
		if p.Severity == SeverityError {
			return true
		}
	}
	return false
}

// Errors returns ps's errors as one error listing all of them, or nil.
// ps is expected capped (as every list this package returns is), so the
// error stays short; the count includes omitted errors.
func Errors(ps []Problem) error {
	var msgs []string
	for _, p := range ps {
		if p.Severity == SeverityError {
			msgs = append(msgs, p.Error())
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	n, _ := Count(ps)
	return fmt.Errorf("invalid NodeConfig (%d errors):\n  %s", n, strings.Join(msgs, "\n  "))
}

// problemList keeps the first MaxProblems problems added to it and counts
// the rest.
type problemList struct {
	list    []Problem
	omitted Omitted
	// omittedFrom is the source of the omitted problems, or
	// SeveralSources.
	omittedFrom string
}

// full reports whether further problems will only be counted, so callers
// can skip formatting them.
func (l *problemList) full() bool { return len(l.list) >= MaxProblems }

// add keeps or counts each problem; an omitted-problems line from another
// list is merged into this one's count.
func (l *problemList) add(ps ...Problem) {
	for _, p := range ps {
		if p.Omitted.Total() == 0 && !l.full() {
			l.list = append(l.list, bounded(p))
			continue
		}
		l.omit(p.Source, omittedOf(p))
	}
}

func (l *problemList) omit(source string, o Omitted) {
	l.omitted.add(o)
	switch l.omittedFrom {
	case "":
		l.omittedFrom = source
	case source:
	default:
		l.omittedFrom = SeveralSources
	}
}

// problems returns what was kept, then the omitted-problems line if any
// were left out.
func (l *problemList) problems() []Problem {
	o := l.omitted
	if o.Total() == 0 {
		return l.list
	}
	sum := Problem{Severity: SeverityWarning, Source: l.omittedFrom, Omitted: o,
		Message: fmt.Sprintf("... and %d more problems (%d errors, %d warnings) not listed; fix the ones above and check again", o.Total(), o.Errors, o.Warnings)}
	switch {
	case o.Errors > 0:
		sum.Severity = SeverityError
	case o.Unknown > 0:
		sum.Unknown = true
	}
	return append(l.list[:len(l.list):len(l.list)], sum)
}

// bounded cuts a problem's text to the bounds above.
func bounded(p Problem) Problem {
	p.Source = cut(p.Source, maxSource)
	p.Path = cut(p.Path, maxPath)
	// A message quotes values, and a value may hold a secret (a URL's
	// password, a token); problems go to the console, the boot report,
	// check's and render's output, so the secret shapes are hidden here,
	// once, before the cut can leave half of one.
	p.Message = cut(redact.Text(p.Message), maxMessage)
	return p
}

// cut shortens s to at most n bytes, on a rune boundary, ending in an
// ellipsis and the original length. What it returns it leaves alone, so
// problems passed from list to list are cut once.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n -= 32 // room for the suffix
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + fmt.Sprintf("... (%d bytes)", len(s))
}

// problems collects problems for one source.
type problems struct {
	source string
	problemList
}

func (ps *problems) errorf(path, format string, args ...any) {
	ps.report(SeverityError, false, path, format, args...)
}

func (ps *problems) warnf(path, format string, args ...any) {
	ps.report(SeverityWarning, false, path, format, args...)
}

// unknownf reports an unknown field or feature gate: a warning that
// --strict makes an error.
func (ps *problems) unknownf(path, format string, args ...any) {
	ps.report(SeverityWarning, true, path, format, args...)
}

func (ps *problems) report(sev Severity, unknown bool, path, format string, args ...any) {
	p := Problem{Severity: sev, Source: ps.source, Path: path, Unknown: unknown}
	if ps.full() {
		// Counted only: formatting a million messages nobody reads is
		// most of the cost.
		ps.omit(ps.source, omittedOf(p))
		return
	}
	p.Message = fmt.Sprintf(format, args...)
	ps.add(p)
}
