package main

import (
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

// junitSuites is the part of ginkgo's JUnit report (--junit-report) the
// summary reads: every spec of the suite, with its state, and a failed
// spec's message.
type junitSuites struct {
	Suites []struct {
		Name string `xml:"name,attr"`
		// Properties hold ginkgo's suite config: FocusStrings and
		// SkipStrings say which specs the run was asked for.
		Properties []struct {
			Name  string `xml:"name,attr"`
			Value string `xml:"value,attr"`
		} `xml:"properties>property"`
		Cases []junitCase `xml:"testcase"`
	} `xml:"testsuite"`
}

type junitCase struct {
	Name    string  `xml:"name,attr"`
	Status  string  `xml:"status,attr"`
	Time    float64 `xml:"time,attr"`
	Skipped *struct {
		Message string `xml:"message,attr"`
	} `xml:"skipped"`
	Failure *junitMessage `xml:"failure"`
	Error   *junitMessage `xml:"error"`
}

// junitMessage is a failure's or an error's message and text.
type junitMessage struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// outcome is one spec's result as the summary counts it.
type outcome struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
	// Why is a failure's first line, or a skip's reason.
	Why string `json:"why,omitempty"`
	// Again, for a failed, unreached or skipped spec of a part, is how
	// it went when run again alone (partRecord.Reruns), as the doc says
	// it.
	Again string `json:"-"`
}

// summary is a run's result over the specs it was asked to run (its
// focus, less the run's own -skip): the specs skipped at run time by the
// suite itself (each with its reason) apart from those berth's list skips
// by name, and both apart from those the run never reached.
type summary struct {
	Passed  []outcome `json:"passed"`
	Failed  []outcome `json:"failed"`
	Skipped []outcome `json:"skipped"`
	Listed  []outcome `json:"listed"`
	// NotReached holds asked specs the suite never started or an
	// interrupt cut short: ginkgo marks the first "skipped" with no
	// reason when its --timeout or an interrupt ends the run first, the
	// second "interrupted". A spec skipped at run time says why
	// ("skipped - Only supported for providers ...").
	NotReached []outcome `json:"notReached"`
	// Setup holds failed suite nodes ([SynchronizedBeforeSuite] ...),
	// which fail every spec without naming one.
	Setup []outcome `json:"setup"`
}

// againPassed begins outcome.Again for a spec that passed run again.
const againPassed = "passed"

// againNotRun begins outcome.Again for a spec a rerun was asked to run
// and did not (an interrupted rerun).
const againNotRun = "not run"

// againSkipped begins outcome.Again for a spec the suite skipped when
// run again: its reason still held.
const againSkipped = "skipped"

// passedAgain says whether o's spec passed when run again alone.
func (o outcome) passedAgain() bool { return strings.HasPrefix(o.Again, againPassed) }

// ranAgain says whether o's spec ran when run again alone, and so either
// passed or failed there.
func (o outcome) ranAgain() bool {
	return o.Again != "" && !strings.HasPrefix(o.Again, againNotRun) && !strings.HasPrefix(o.Again, againSkipped)
}

// all is every spec's outcome, the suite's own nodes (Setup) aside.
func (s summary) all() []outcome {
	var all []outcome
	for _, l := range [][]outcome{s.Passed, s.Failed, s.Skipped, s.Listed, s.NotReached} {
		all = append(all, l...)
	}
	return all
}

// againOf says how spec name went in s, a rerun's result of date, as
// the doc says it (outcome.Again); false when s does not hold it. A
// failure is "failed again" of a spec its part's run failed (ranBefore),
// "failed" of one it never reached.
func (s summary) againOf(name string, date time.Time, ranBefore bool) (string, bool) {
	on := date.UTC().Format("2006-01-02")
	find := func(l []outcome) (outcome, bool) {
		i := slices.IndexFunc(l, func(o outcome) bool { return o.Name == name })
		if i < 0 {
			return outcome{}, false
		}
		return l[i], true
	}
	if o, ok := find(s.Passed); ok {
		return fmt.Sprintf(againPassed+" (%s, %s)", (time.Duration(o.Seconds * float64(time.Second))).Round(time.Second), on), true
	}
	if o, ok := find(s.Failed); ok {
		failed := "failed"
		if ranBefore {
			failed = "failed again"
		}
		return fmt.Sprintf("%s (%s): %s", failed, on, o.Why), true
	}
	if o, ok := find(s.Skipped); ok {
		return fmt.Sprintf(againSkipped+" again (%s): %s", on, o.Why), true
	}
	for _, l := range [][]outcome{s.Listed, s.NotReached} {
		if _, ok := find(l); ok {
			return fmt.Sprintf(againNotRun+" (%s)", on), true
		}
	}
	return "", false
}

// reportFilters are the focus and skip ginkgo records in a report
// (FocusStrings, SkipStrings; nil when the run had none). A spec outside
// them is "skipped" with no reason in the report, just as one the run
// never reached, and only the run's own filters tell the two apart.
// ginkgo joins several --focus flags with commas, which cannot be split
// back; the runner passes one, and a value that does not compile as one
// pattern is refused.
func reportFilters(j junitSuites, name string) (focus, skip *regexp.Regexp, err error) {
	prop := func(key string) (string, bool) {
		for _, su := range j.Suites {
			for _, p := range su.Properties {
				if p.Name == key {
					return p.Value, true
				}
			}
		}
		return "", false
	}
	var res [2]*regexp.Regexp
	for i, key := range []string{"FocusStrings", "SkipStrings"} {
		v, ok := prop(key)
		if !ok {
			return nil, nil, fmt.Errorf("%s: no %s property: not a ginkgo v2 report, so which specs its run was asked for is unknown", name, key)
		}
		if v == "" {
			continue
		}
		if res[i], err = regexp.Compile(v); err != nil {
			return nil, nil, fmt.Errorf("%s: its %s %.80q is not one pattern: %w", name, key, v, err)
		}
	}
	return res[0], res[1], nil
}

// readJUnit reads ginkgo's JUnit report at path.
func readJUnit(path string) (junitSuites, error) {
	f, err := os.Open(path)
	if err != nil {
		return junitSuites{}, fmt.Errorf("reading the suite's JUnit report: %w", err)
	}
	defer f.Close()
	return parseJUnit(f, path)
}

func parseJUnit(r io.Reader, name string) (junitSuites, error) {
	var j junitSuites
	if err := xml.NewDecoder(r).Decode(&j); err != nil {
		return junitSuites{}, fmt.Errorf("%s: not a JUnit report: %w", name, err)
	}
	if len(j.Suites) == 0 {
		return junitSuites{}, fmt.Errorf("%s: no <testsuite> in the JUnit report", name)
	}
	return j, nil
}

// summarize sorts the report's specs that were asked for (all when asked
// is nil; it is given the JUnit case's name, "[It] " and ginkgo's labels
// included) into passed, failed, skipped and not reached; a skipped spec
// whose name list names is counted as listed, with the list's reason.
func summarize(j junitSuites, asked func(caseName string) bool, list skipList) summary {
	var s summary
	for _, su := range j.Suites {
		for _, c := range su.Cases {
			o := outcome{Name: specName(c.Name), Seconds: c.Time}
			state := c.Status
			if state == "" { // JUnit writers other than ginkgo's
				switch {
				case c.Failure != nil || c.Error != nil:
					state = "failed"
				case c.Skipped != nil:
					state = "skipped"
				default:
					state = "passed"
				}
			}
			if isSuiteNode(c.Name) {
				if state != "passed" && state != "skipped" {
					o.Why = failureLine(c)
					s.Setup = append(s.Setup, o)
				}
				continue
			}
			if asked != nil && !asked(c.Name) {
				continue
			}
			switch state {
			case "passed":
				s.Passed = append(s.Passed, o)
			case "skipped", "pending":
				if reason, ok := list.reason(o.Name); ok {
					o.Why = reason
					s.Listed = append(s.Listed, o)
					continue
				}
				if c.Skipped == nil || strings.TrimSpace(c.Skipped.Message) == "skipped" {
					s.NotReached = append(s.NotReached, o)
					continue
				}
				o.Why = firstLine(c.Skipped.Message)
				s.Skipped = append(s.Skipped, o)
			case "interrupted":
				// Cut short by an interrupt (Ctrl-C, or the run's
				// end being called): the run ended before the spec
				// did, which says nothing of berth.
				o.Why = failureLine(c)
				s.NotReached = append(s.NotReached, o)
			default: // failed, panicked, aborted, timedout
				o.Why = failureLine(c)
				s.Failed = append(s.Failed, o)
			}
		}
	}
	for _, l := range []*[]outcome{&s.Passed, &s.Failed, &s.Skipped, &s.Listed, &s.NotReached, &s.Setup} {
		slices.SortFunc(*l, func(a, b outcome) int { return strings.Compare(a.Name, b.Name) })
	}
	return s
}

// focusAsked says whether a JUnit case was asked for by focus, as ginkgo
// decides it (specMatches).
func focusAsked(focus *regexp.Regexp) func(caseName string) bool {
	return func(caseName string) bool { return specMatches(focus, caseName) }
}

// specMatches says whether a --focus or --skip pattern selects a JUnit
// case as ginkgo selected it: ginkgo matches the spec's text, while the
// report's name adds "[It] " and, after a space, the spec's labels in
// brackets ("[sig-node, Conformance]"). A pattern anchored at the end of
// a spec's text (namesPattern's, or a user's "...\[Conformance\]$")
// would miss every case, so the name is tried without its last bracketed
// group too.
func specMatches(re *regexp.Regexp, caseName string) bool {
	n := specName(caseName)
	if re.MatchString(n) {
		return true
	}
	if i := strings.LastIndex(n, " ["); i >= 0 && strings.HasSuffix(n, "]") {
		return re.MatchString(n[:i])
	}
	return false
}

// specName is a JUnit case's name without ginkgo's node-type prefix
// ("[It] "), as --focus and --skip and berth's list see it.
func specName(n string) string {
	return strings.TrimPrefix(n, "[It] ")
}

// isSuiteNode says whether a case is one of the suite's own setup or
// report nodes rather than a spec.
func isSuiteNode(n string) bool {
	for _, p := range []string{"[SynchronizedBeforeSuite]", "[BeforeSuite]", "[SynchronizedAfterSuite]", "[AfterSuite]", "[ReportBeforeSuite]", "[ReportAfterSuite]", "[DeferCleanup (Suite)]"} {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}

func failureLine(c junitCase) string {
	for _, f := range []*junitMessage{c.Failure, c.Error} {
		if f == nil {
			continue
		}
		if l := firstLine(f.Message); l != "" {
			return l
		}
		if l := firstLine(f.Text); l != "" {
			return l
		}
	}
	return "(no message: " + c.Status + ")"
}

// firstLine is s's first non-empty line, trimmed and cut to 300 bytes.
func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			if len(l) > 300 {
				l = l[:300] + "..."
			}
			return l
		}
	}
	return ""
}
