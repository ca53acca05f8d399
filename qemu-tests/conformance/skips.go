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
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = regexp.QuoteMeta(e.Name)
	}
	if len(parts) == 0 {
		return ""
	}
	// Ginkgo matches --skip against the spec's full text with its labels
	// appended, so each name is anchored at the start only.
	return "^(?:" + strings.Join(parts, "|") + ")"
}

// reason is the list's reason for the spec named name.
func (l skipList) reason(name string) (string, bool) {
	for _, e := range l {
		if e.Name == name || strings.HasPrefix(name, e.Name+" [") {
			return e.Reason, true
		}
	}
	return "", false
}
