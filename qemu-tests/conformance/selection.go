package main

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

// selection is a named choice of the suite's specs wider than one tag
// (qemu-tests/conformance/wider.yaml): a focus, and the rules that take
// specs out of it, each with the reason it cannot judge berth here. A
// ginkgo focus cannot say "but not" (Go's regular expressions have no
// lookahead), so the selection is resolved against e2e.test's listing
// into the names it keeps, and run as a focus of those names whole.
type selection struct {
	Title   string          `json:"title"`
	Focus   string          `json:"focus"`
	Exclude []selectionRule `json:"exclude"`
}

// selectionRule takes the specs its pattern matches out of a selection.
type selectionRule struct {
	Pattern string `json:"pattern"`
	Reason  string `json:"reason"`
}

// selectionInfo is what a run of a selection records of it, and the doc
// shows: the file, its title and focus, each rule with how many of the
// focus's specs it took out, and how many specs were kept.
type selectionInfo struct {
	File    string
	Title   string
	Focus   string
	Rules   []ruleCount
	Kept    int
	Matched int // the specs the focus matched, before the rules
}

type ruleCount struct {
	selectionRule
	Specs int
}

func loadSelection(path string) (selection, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return selection{}, fmt.Errorf("reading the selection: %w", err)
	}
	return parseSelection(b, path)
}

// parseSelection checks the selection has a one-line title, a focus and
// rules that are each a pattern with a one-line reason, all of them
// regular expressions, none repeated.
func parseSelection(b []byte, path string) (selection, error) {
	var s selection
	if len(bytes.TrimSpace(b)) == 0 {
		return s, fmt.Errorf("%s: the selection is empty", path)
	}
	if err := yaml.UnmarshalStrict(b, &s); err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	switch {
	case strings.TrimSpace(s.Title) == "" || strings.Contains(s.Title, "\n"):
		return s, fmt.Errorf("%s: title: want one line naming what the selection is", path)
	case strings.TrimSpace(s.Focus) == "":
		return s, fmt.Errorf("%s: focus: empty (it would select the whole suite)", path)
	}
	if _, err := regexp.Compile(s.Focus); err != nil {
		return s, fmt.Errorf("%s: focus %q: %w", path, s.Focus, err)
	}
	seen := map[string]int{}
	for i, r := range s.Exclude {
		where := fmt.Sprintf("%s: exclude[%d]", path, i)
		switch {
		case strings.TrimSpace(r.Pattern) == "":
			return s, fmt.Errorf("%s: no pattern", where)
		case strings.TrimSpace(r.Reason) == "" || strings.Contains(r.Reason, "\n"):
			return s, fmt.Errorf("%s (%s): want a one-line reason", where, r.Pattern)
		}
		if _, err := regexp.Compile(r.Pattern); err != nil {
			return s, fmt.Errorf("%s: pattern %q: %w", where, r.Pattern, err)
		}
		if j, ok := seen[r.Pattern]; ok {
			return s, fmt.Errorf("%s: the same pattern as exclude[%d]: %q", where, j, r.Pattern)
		}
		seen[r.Pattern] = i
	}
	return s, nil
}

// resolve is the selection's specs among listed (e2e.test's names, in
// its order, which the names keep): those its focus matches and no rule
// excludes. A rule that takes out none of the focus's specs is an error:
// the suite changed under it, and its reason no longer says anything.
func (s selection) resolve(listed []string, file string) ([]string, selectionInfo, error) {
	focus := regexp.MustCompile(s.Focus) // checked by parseSelection
	rules := make([]*regexp.Regexp, len(s.Exclude))
	info := selectionInfo{File: file, Title: s.Title, Focus: s.Focus, Rules: make([]ruleCount, len(s.Exclude))}
	for i, r := range s.Exclude {
		rules[i] = regexp.MustCompile(r.Pattern)
		info.Rules[i].selectionRule = r
	}
	var names []string
	for _, n := range listed {
		if !focus.MatchString(n) {
			continue
		}
		info.Matched++
		out := false
		for i, re := range rules {
			// Counted by the first rule that takes it out, so the counts
			// add up to what was taken out.
			if re.MatchString(n) {
				info.Rules[i].Specs++
				out = true
				break
			}
		}
		if !out {
			names = append(names, n)
		}
	}
	for _, r := range info.Rules {
		if r.Specs == 0 {
			return nil, info, fmt.Errorf("%s: the rule %q takes out none of the specs focus %q selects that an earlier rule left (renamed in this e2e.test?)", file, r.Pattern, s.Focus)
		}
	}
	if len(names) == 0 {
		return nil, info, fmt.Errorf("%s: its rules leave none of the %d specs focus %q selects", file, info.Matched, s.Focus)
	}
	info.Kept = len(names)
	return names, info, nil
}
