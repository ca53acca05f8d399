package main

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

// skipEntry is one spec make conformance does not run: its full name as
// the suite prints it (e2e.test --list-tests, without "[It] "), and why
// it cannot pass for a reason outside berth.
type skipEntry struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// skipList is qemu-tests/conformance/skips.yaml, by name.
type skipList []skipEntry

// loadSkips reads the skip list at path: every entry needs a name and a
// one-line reason, and no name may repeat.
func loadSkips(path string) (skipList, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the skip list: %w", err)
	}
	return parseSkips(b, path)
}

func parseSkips(b []byte, path string) (skipList, error) {
	var l skipList
	if len(bytes.TrimSpace(b)) > 0 {
		if err := yaml.UnmarshalStrict(b, &l); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	seen := map[string]int{}
	for i, e := range l {
		switch {
		case strings.TrimSpace(e.Name) == "":
			return nil, fmt.Errorf("%s: entry %d: no name", path, i+1)
		case strings.TrimSpace(e.Reason) == "" || strings.Contains(e.Reason, "\n"):
			return nil, fmt.Errorf("%s: entry %d (%s): want a one-line reason", path, i+1, e.Name)
		}
		if j, ok := seen[e.Name]; ok {
			return nil, fmt.Errorf("%s: entries %d and %d both name %q", path, j+1, i+1, e.Name)
		}
		seen[e.Name] = i
	}
	return l, nil
}

// pattern is the --skip regular expression that skips exactly the listed
// specs: each name whole, quoted, never a broader pattern. Empty when the
// list is.
func (l skipList) pattern() string {
	names := make([]string, len(l))
	for i, e := range l {
		names[i] = e.Name
	}
	return namesPattern(names)
}

// namesPattern is a --focus or --skip regular expression that matches
// exactly the specs named (full names, as e2e.test --list-tests prints
// them), or "" for none. Ginkgo matches it against the suite's
// description, a space and the spec's text (ginkgo v2's ApplyFocusToSpecs),
// with no labels: so each name is whole between a space (or the start)
// and the end, never a prefix or a part of a longer name.
func namesPattern(names []string) string {
	if len(names) == 0 {
		return ""
	}
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = regexp.QuoteMeta(n)
	}
	return `(?:^|\s)(?:` + strings.Join(parts, "|") + `)$`
}

// sameSpec says whether a JUnit case's name (its "[It] " cut, ginkgo's
// labels maybe appended in brackets) is the spec named name.
func sameSpec(caseName, name string) bool {
	caseName = specName(caseName)
	return caseName == name || strings.HasPrefix(caseName, name+" [")
}

// reason is the list's reason for the spec named name.
func (l skipList) reason(name string) (string, bool) {
	for _, e := range l {
		if sameSpec(name, e.Name) {
			return e.Reason, true
		}
	}
	return "", false
}
