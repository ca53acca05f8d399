// Package klog parses the text lines kubelet (and any program logging with
// k8s.io/klog) writes:
//
//	E1124 01:47:28.699219     173 kubelet_node_status.go:392] "Error getting the current node from lister" err="node \"n\" not found"
//	W1124 01:50:57.857209    9250 logging.go:55] [core] grpc: addrConn.createTransport failed ...
//
// that is a severity letter, the month and day, the time, the thread id,
// file:line], then the message: a quoted string followed by key=value
// pairs (klog's structured form, InfoS/ErrorS), or free text (Infof and
// friends). It reads lines only; deciding what a line means is the caller's
// job. The input is a program's output, so Parse must take anything
// without panicking (FuzzParse).
package klog

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Severity is klog's severity letter.
type Severity byte

const (
	Info    Severity = 'I'
	Warning Severity = 'W'
	Error   Severity = 'E'
	Fatal   Severity = 'F'
)

// Field is one key=value pair of a structured line, the value unquoted.
type Field struct {
	Key, Value string
}

// Line is one parsed klog line.
type Line struct {
	Severity Severity
	// Month and Day are klog's: klog writes no year.
	Month, Day int
	// Time is "hh:mm:ss.uuuuuu" as written.
	Time string
	PID  int
	// File and FileLine are the source position, "kubelet.go" and 2525.
	File     string
	FileLine int
	// Msg is the message: unquoted when Structured, else the free text up
	// to the end of the line.
	Msg string
	// Structured is set when the message was a quoted string; Fields are
	// then the key=value pairs after it, in order.
	Structured bool
	Fields     []Field
}

// ErrNotKlog is wrapped by Parse's errors: the line is not in klog's
// header format at all (a Go panic, a plain print, a continuation line).
var ErrNotKlog = errors.New("not a klog line")

// Parse reads one klog line. A line whose header does not parse is not a
// klog line (ErrNotKlog); a header followed by a structured message whose
// key=value pairs do not parse (klog continues multi-line values on the
// next lines) still parses, with the pairs that did.
func Parse(s string) (Line, error) {
	var l Line
	if len(s) < 1 {
		return l, fmt.Errorf("empty line: %w", ErrNotKlog)
	}
	switch sev := Severity(s[0]); sev {
	case Info, Warning, Error, Fatal:
		l.Severity = sev
	default:
		return l, fmt.Errorf("severity letter %q: %w", s[0], ErrNotKlog)
	}
	rest := s[1:]
	// mmdd
	if len(rest) < 5 || !digits(rest[:4]) || rest[4] != ' ' {
		return l, fmt.Errorf("month and day after the severity: %w", ErrNotKlog)
	}
	l.Month = atoi(rest[:2])
	l.Day = atoi(rest[2:4])
	if l.Month < 1 || l.Month > 12 || l.Day < 1 || l.Day > 31 {
		return l, fmt.Errorf("month and day %q out of range: %w", rest[:4], ErrNotKlog)
	}
	rest = rest[5:]
	// hh:mm:ss.uuuuuu
	const timeLen = len("15:04:05.000000")
	if len(rest) < timeLen || !validTime(rest[:timeLen]) {
		return l, fmt.Errorf("time of day: %w", ErrNotKlog)
	}
	l.Time = rest[:timeLen]
	rest = rest[timeLen:]
	// Thread id, right-aligned in a padded column.
	trimmed := strings.TrimLeft(rest, " ")
	if len(trimmed) == len(rest) {
		return l, fmt.Errorf("no space before the thread id: %w", ErrNotKlog)
	}
	rest = trimmed
	end := strings.IndexByte(rest, ' ')
	if end <= 0 || !digits(rest[:end]) || end > 10 {
		return l, fmt.Errorf("thread id: %w", ErrNotKlog)
	}
	l.PID = atoi(rest[:end])
	rest = rest[end+1:]
	// file:line]
	end = strings.Index(rest, "] ")
	if end < 0 {
		if !strings.HasSuffix(rest, "]") {
			return l, fmt.Errorf("file:line] after the thread id: %w", ErrNotKlog)
		}
		end = len(rest) - 1
	}
	pos := rest[:end]
	colon := strings.LastIndexByte(pos, ':')
	if colon <= 0 || !digits(pos[colon+1:]) || colon+1 == len(pos) || len(pos)-colon > 10 || strings.ContainsAny(pos[:colon], " ]") {
		return l, fmt.Errorf("source position %q: %w", pos, ErrNotKlog)
	}
	l.File = pos[:colon]
	l.FileLine = atoi(pos[colon+1:])
	rest = rest[min(end+2, len(rest)):]

	if strings.HasPrefix(rest, `"`) {
		if q, err := strconv.QuotedPrefix(rest); err == nil {
			if msg, err := strconv.Unquote(q); err == nil {
				l.Msg, l.Structured = msg, true
				l.Fields = fields(rest[len(q):])
				return l, nil
			}
		}
	}
	l.Msg = rest
	return l, nil
}

// Value returns the value of the first field named key.
func (l Line) Value(key string) (string, bool) {
	for _, f := range l.Fields {
		if f.Key == key {
			return f.Value, true
		}
	}
	return "", false
}

// fields reads ` key=value key="quoted value"` pairs, stopping at the first
// thing that is not one (klog writes a multi-line value as key=<, with the
// value on the lines after).
func fields(s string) []Field {
	var out []Field
	for {
		if !strings.HasPrefix(s, " ") {
			return out
		}
		s = s[1:]
		eq := strings.IndexByte(s, '=')
		if eq <= 0 || strings.ContainsAny(s[:eq], " \"") {
			return out
		}
		key := s[:eq]
		s = s[eq+1:]
		var val string
		if strings.HasPrefix(s, `"`) {
			q, err := strconv.QuotedPrefix(s)
			if err != nil {
				return out
			}
			v, err := strconv.Unquote(q)
			if err != nil {
				return out
			}
			val, s = v, s[len(q):]
		} else {
			// Values that are not strings are printed with %+v, which may
			// hold spaces ({Name:x Namespace:y}); take up to the next
			// " key=" so such a value does not end the pairs.
			end := nextKey(s)
			val, s = s[:end], s[end:]
			if val == "<" {
				// A multi-line value follows on the next lines.
				return out
			}
		}
		out = append(out, Field{Key: key, Value: val})
	}
}

// nextKey returns where the bare value at the start of s ends: before the
// next " word=" or at the end.
func nextKey(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] != ' ' {
			continue
		}
		j := i + 1
		for j < len(s) && isKeyByte(s[j]) {
			j++
		}
		if j > i+1 && j < len(s) && s[j] == '=' {
			return i
		}
	}
	return len(s)
}

func isKeyByte(c byte) bool {
	return c == '_' || c == '-' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func validTime(t string) bool {
	return digits(t[0:2]) && t[2] == ':' && digits(t[3:5]) && t[5] == ':' && digits(t[6:8]) && t[8] == '.' && digits(t[9:]) &&
		atoi(t[0:2]) < 24 && atoi(t[3:5]) < 60 && atoi(t[6:8]) < 61
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// atoi reads a run of at most 10 digits the caller has checked.
func atoi(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		n = n*10 + int(s[i]-'0')
	}
	return n
}
