package nodeconfig

import (
	"fmt"
	"strings"
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

// Problem is one thing wrong with a NodeConfig, located by source and path.
type Problem struct {
	Severity Severity `json:"severity"`
	// Source is the file path or user-data part the value came from, or
	// MergedSource.
	Source string `json:"source"`
	// Path is the field path, for example spec.cluster.apiServerEndpoint
	// or spec.kubelet.flags[2]; empty when the whole document is at fault.
	Path string `json:"path,omitempty"`
	// Message says what is wrong and, where it helps, what to do.
	Message string `json:"message"`
	// Unknown marks unknown-field warnings, which --strict promotes.
	Unknown bool `json:"unknown,omitempty"`
}

// Error formats the problem as SOURCE: PATH: MESSAGE.
func (p Problem) Error() string {
	if p.Path == "" {
		return p.Source + ": " + p.Message
	}
	return p.Source + ": " + p.Path + ": " + p.Message
}

// String is Error prefixed with the severity, for printing lists.
func (p Problem) String() string {
	return string(p.Severity) + ": " + p.Error()
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
	return fmt.Errorf("invalid NodeConfig (%d errors):\n  %s", len(msgs), strings.Join(msgs, "\n  "))
}

// problems collects problems for one source.
type problems struct {
	source string
	list   []Problem
}

func (ps *problems) errorf(path, format string, args ...any) {
	ps.list = append(ps.list, Problem{Severity: SeverityError, Source: ps.source, Path: path, Message: fmt.Sprintf(format, args...)})
}

func (ps *problems) warnf(path, format string, args ...any) {
	ps.list = append(ps.list, Problem{Severity: SeverityWarning, Source: ps.source, Path: path, Message: fmt.Sprintf(format, args...)})
}
