// Package figures keeps the measured figures in berth's docs current. A
// figure in a doc lives in a marked section (<!-- BEGIN name ... --> ...
// <!-- END name -->) and is written there by the command that measures
// it, on each successful run, so what a reader sees is that command's
// last run and not a number someone once typed. make test writes its
// stages' times into docs/testing.md (cmd/figure), make demo its timeline
// into README.md.
package figures

import (
	"fmt"
	"os"
	"strings"

	"github.com/berth-node/berth/internal/fsutil"
)

// Section returns the body of the section name in md: the lines between
// its BEGIN marker's line and its END marker.
func Section(md, name string) (string, bool) {
	_, after, ok := strings.Cut(md, "<!-- BEGIN "+name)
	if !ok {
		return "", false
	}
	_, after, ok = strings.Cut(after, "\n")
	if !ok {
		return "", false
	}
	body, _, ok := strings.Cut(after, "<!-- END "+name+" -->")
	return body, ok
}

// ReplaceSection returns md with the section's body replaced by body,
// one blank line either side.
func ReplaceSection(md, name, body string) (string, error) {
	old, ok := Section(md, name)
	if !ok {
		return "", fmt.Errorf("no section %q (<!-- BEGIN %s ... --> ... <!-- END %s -->)", name, name, name)
	}
	start := strings.Index(md, "<!-- BEGIN "+name)
	i := start + strings.Index(md[start:], "\n") + 1
	return md[:i] + "\n" + strings.TrimSpace(body) + "\n\n" + md[i+len(old):], nil
}

// Row is one row of a Markdown table: its cells, trimmed, the first being
// the row's key.
type Row struct {
	Cells []string
}

// Key is the row's first cell.
func (r Row) Key() string {
	if len(r.Cells) == 0 {
		return ""
	}
	return r.Cells[0]
}

// Rows returns the body rows of the Markdown table in section: not its
// header, not the |---| line.
func Rows(section string) []Row {
	var rows []Row
	header := true
	for _, line := range strings.Split(section, "\n") {
		cells, ok := splitRow(line)
		if !ok {
			continue
		}
		if header {
			header = false
			continue
		}
		if isRule(cells) {
			continue
		}
		rows = append(rows, Row{Cells: cells})
	}
	return rows
}

// SetLast returns md with the last cell of the row keyed key, in the
// table of section name, set to value. The key is the row's first cell as
// written, code spans and all.
func SetLast(md, name, key, value string) (string, error) {
	if strings.ContainsAny(value, "|\n") {
		return "", fmt.Errorf("figure %q for row %q: a table cell cannot hold '|' or a newline", value, key)
	}
	body, ok := Section(md, name)
	if !ok {
		return "", fmt.Errorf("no section %q (<!-- BEGIN %s ... --> ... <!-- END %s -->)", name, name, name)
	}
	lines := strings.Split(body, "\n")
	found := false
	for i, line := range lines {
		cells, ok := splitRow(line)
		if !ok || cells[0] != key {
			continue
		}
		if found {
			return "", fmt.Errorf("section %q: two rows keyed %q", name, key)
		}
		found = true
		if len(cells) < 2 {
			return "", fmt.Errorf("section %q: row %q has no cell for the figure", name, key)
		}
		cells[len(cells)-1] = value
		lines[i] = "| " + strings.Join(cells, " | ") + " |"
	}
	if !found {
		return "", fmt.Errorf("section %q has no row keyed %q", name, key)
	}
	start := strings.Index(md, "<!-- BEGIN "+name)
	i := start + strings.Index(md[start:], "\n") + 1
	return md[:i] + strings.Join(lines, "\n") + md[i+len(body):], nil
}

// Update rewrites the file at path with edit's result, atomically: a
// reader, or a crash, sees the old doc or the new one, never half of it.
func Update(path string, edit func(md string) (string, error)) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading the doc to update: %w", err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("reading the doc to update: %w", err)
	}
	out, err := edit(string(b))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if out == string(b) {
		return nil
	}
	if err := fsutil.WriteFileAtomic(path, []byte(out), st.Mode().Perm()); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// splitRow splits a table line into its trimmed cells.
func splitRow(line string) ([]string, bool) {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "|") || !strings.HasSuffix(line, "|") || len(line) < 2 {
		return nil, false
	}
	cells := strings.Split(line[1:len(line)-1], "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells, true
}

func isRule(cells []string) bool {
	for _, c := range cells {
		if strings.Trim(c, "-: ") != "" {
			return false
		}
	}
	return true
}
