package main

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-node/berth/internal/fsutil"
)

// shard is one part of a run split in parts so that each fits the time
// there is (the two-node [Conformance] run takes longer than a working
// session here): part K of N. The zero shard is a whole run.
type shard struct{ K, N int }

func parseShard(s string) (shard, error) {
	k, n, ok := strings.Cut(s, "/")
	sh := shard{}
	var errK, errN error
	sh.K, errK = strconv.Atoi(k)
	sh.N, errN = strconv.Atoi(n)
	if !ok || errK != nil || errN != nil || sh.N < 2 || sh.K < 1 || sh.K > sh.N {
		return shard{}, fmt.Errorf("-shard %q: want K/N, 1 <= K <= N, N >= 2 (2/3: the second of three parts)", s)
	}
	return sh, nil
}

func (s shard) String() string { return fmt.Sprintf("%d/%d", s.K, s.N) }

// dir is where shard s's output goes, under the runs' -out.
func (s shard) dir(base string) string {
	return filepath.Join(base, fmt.Sprintf("shard-%d-of-%d", s.K, s.N))
}

// names are shard s's specs: of e2e.test's listed names, those focus
// selects, every Nth from the Kth. Dealt in turn rather than cut in
// runs, so each part gets its share of every area, of the [Serial]
// specs (which run one at a time at the end) and of the slow ones. The
// listing's order is the suite's, fixed for one e2e.test: a part names
// the same specs whenever it runs.
func (s shard) names(listed []string, focus *regexp.Regexp) []string {
	var names []string
	i := 0
	for _, n := range listed {
		if !focus.MatchString(n) {
			continue
		}
		if i%s.N == s.K-1 {
			names = append(names, n)
		}
		i++
	}
	return names
}

// runRecord is what a run leaves beside its JUnit report (OUT/run.json)
// so that the parts of a sharded run can be put together later, in
// another session, into one result: the run's facts, the focus it was
// a part of, and which part.
type runRecord struct {
	runInfo
	Shard string `json:"shard,omitempty"`
}

const runRecordFile = "run.json"

func writeRunRecord(dir string, r runRecord) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the run's record: %w", err)
	}
	return fsutil.WriteFileAtomic(filepath.Join(dir, runRecordFile), append(b, '\n'), 0o644)
}

func readRunRecord(dir string) (runRecord, error) {
	var r runRecord
	b, err := os.ReadFile(filepath.Join(dir, runRecordFile))
	if err != nil {
		return r, fmt.Errorf("reading the run's record: %w", err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("%s: %w", filepath.Join(dir, runRecordFile), err)
	}
	return r, nil
}

// partRecord is a part's result as the repository keeps it, beside the
// doc (docs/conformance-parts/FOCUS-part-K-of-N.json): a part run in one
// session on one machine counts in a merge sessions later on another,
// where its run's folder (build/, with the JUnit report) is long gone.
// It holds the run's facts, the focus ginkgo recorded in the part's
// report (so that the part is checked, not trusted, at every merge) and
// every one of its specs' outcomes.
type partRecord struct {
	runRecord
	ReportFocus string  `json:"reportFocus"`
	Results     summary `json:"results"`
	// Reruns are the part's failed or unreached specs run again alone
	// on a fresh cluster (make conformance RERUN= with the part's
	// report), in the order they ran: how a failure under load is told
	// from a bug, shown beside it in the doc.
	Reruns []rerunRecord `json:"reruns,omitempty"`
}

// rerunRecord is one rerun of some of a part's specs: when, on what
// image, and their outcomes.
type rerunRecord struct {
	Date    time.Time     `json:"date"`
	Image   string        `json:"image"`
	Wall    time.Duration `json:"wall"`
	Results summary       `json:"results"`
}

// partFile is where part sh of focus's run is recorded in dir: one file
// per focus and part, named for both. A focus too long for a file's name
// (one naming specs whole) is cut, a hash of all of it kept.
func partFile(dir, focus string, sh shard) string {
	slug := strings.Trim(nonWord.ReplaceAllString(focus, "-"), "-")
	if slug == "" || len(slug) > 64 {
		sum := sha256.Sum256([]byte(focus))
		slug = strings.TrimLeft(fmt.Sprintf("%.48s-%x", slug, sum[:8]), "-")
	}
	return filepath.Join(dir, fmt.Sprintf("%s-part-%d-of-%d.json", slug, sh.K, sh.N))
}

var nonWord = regexp.MustCompile(`[^A-Za-z0-9]+`)

func readPartRecord(path string) (partRecord, error) {
	var p partRecord
	b, err := os.ReadFile(path)
	if err != nil {
		return p, fmt.Errorf("reading the part's record: %w", err)
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// writePartRecord writes part record p to path, atomically: a record is
// the only copy of its part's result once build/ is gone.
func writePartRecord(path string, p partRecord) error {
	b, err := json.MarshalIndent(p, "", " ")
	if err != nil {
		return fmt.Errorf("encoding part %s's record: %w", p.Shard, err)
	}
	if err := fsutil.WriteFileAtomic(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("recording part %s: %w", p.Shard, err)
	}
	return nil
}

// recordPart reads part sh's run in runDir (its run.json and JUnit
// report, checked by readShard) and records it in partsDir, unless the
// record there is of the same run or a later one. It says what it did.
func recordPart(runDir, partsDir string, sh shard, focus *regexp.Regexp, kubernetes string, listed []string, list skipList) (string, error) {
	s, rec, ranFocus, err := readShard(runDir, sh, list)
	if err != nil {
		return "", err
	}
	path := partFile(partsDir, focus.String(), sh)
	p := partRecord{runRecord: rec, ReportFocus: ranFocus.String(), Results: s}
	// Only a run that counts replaces a record: one run by hand for
	// other specs must not push out a part that did.
	if err := checkPart(p, runDir, sh, focus, kubernetes, listed); err != nil {
		return "", err
	}
	if old, err := readPartRecord(path); err == nil && !old.Date.Before(rec.Date) {
		return fmt.Sprintf("part %s: %s already records its run of %s", sh, path, old.Date.UTC().Format(time.RFC3339)), nil
	}
	if err := writePartRecord(path, p); err != nil {
		return "", err
	}
	return fmt.Sprintf("part %s: recorded its run of %s in %s", sh, rec.Date.UTC().Format(time.RFC3339), path), nil
}

// mergeShards puts the N parts of a sharded run of focus, as recorded in
// partsDir (recordPart), together: one summary over the specs of the
// parts recorded, and each such part's facts. A part counts when its
// record is for this focus and part, against the same e2e.test
// (kubernetes), the focus its report recorded selects exactly its part's
// specs (a part run by hand with a pattern of its own is checked, not
// trusted), and it holds an outcome for each of those specs. Each part
// that does not is in missing, with why and how many specs it holds, so
// that the doc can say what is not yet counted rather than wait for
// every part.
func mergeShards(partsDir string, n int, focus *regexp.Regexp, kubernetes string, listed []string) (summary, []runRecord, []missingPart) {
	var all summary
	var recs []runRecord
	var missing []missingPart
	for k := 1; k <= n; k++ {
		sh := shard{K: k, N: n}
		path := partFile(partsDir, focus.String(), sh)
		p, err := readPartRecord(path)
		if err == nil {
			err = checkPart(p, path, sh, focus, kubernetes, listed)
		}
		if err != nil {
			missing = append(missing, missingPart{Shard: sh, Record: path, Specs: len(sh.names(listed, focus)), Why: err})
			continue
		}
		recs = append(recs, p.runRecord)
		s := again(p.Results, p.Reruns)
		all.Passed = append(all.Passed, s.Passed...)
		all.Failed = append(all.Failed, s.Failed...)
		all.Skipped = append(all.Skipped, s.Skipped...)
		all.Listed = append(all.Listed, s.Listed...)
		all.NotReached = append(all.NotReached, s.NotReached...)
		all.Setup = append(all.Setup, s.Setup...)
	}
	for _, l := range []*[]outcome{&all.Passed, &all.Failed, &all.Skipped, &all.Listed, &all.NotReached, &all.Setup} {
		slices.SortFunc(*l, func(a, b outcome) int { return strings.Compare(a.Name, b.Name) })
	}
	return all, recs, missing
}

// checkPart says why part record p (read from path) does not count as
// part sh of focus's run against e2e.test kubernetes, which lists
// listed: mergeShards.
func checkPart(p partRecord, path string, sh shard, focus *regexp.Regexp, kubernetes string, listed []string) error {
	if p.Focus != focus.String() || p.Shard != sh.String() {
		return fmt.Errorf("%s: its run was part %q of focus %q", path, p.Shard, p.Focus)
	}
	if p.Kubernetes != kubernetes {
		return fmt.Errorf("%s: its run was of e2e.test %s, this one's is %s", path, p.Kubernetes, kubernetes)
	}
	ranFocus, err := regexp.Compile(p.ReportFocus)
	if err != nil || p.ReportFocus == "" {
		return fmt.Errorf("%s: its report's focus %.80q is not one pattern (%v), so it was not part %s", path, p.ReportFocus, err, sh)
	}
	want := sh.names(listed, focus)
	var got []string
	for _, n := range listed {
		if ranFocus.MatchString(n) {
			got = append(got, n)
		}
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("%s: its focus selects %d listed specs, not part %s's %d", path, len(got), sh, len(want))
	}
	// Each of the part's specs has one outcome, and nothing else does: a
	// record cut short or edited by hand does not count.
	outcomes := p.Results.all()
	for _, n := range want {
		if !slices.ContainsFunc(outcomes, func(o outcome) bool { return sameSpec(o.Name, n) }) {
			return fmt.Errorf("%s: no outcome for %q, one of part %s's specs", path, n, sh)
		}
	}
	if len(outcomes) != len(want) {
		return fmt.Errorf("%s: %d outcomes for part %s's %d specs", path, len(outcomes), sh, len(want))
	}
	for i, r := range p.Reruns {
		for _, o := range r.Results.all() {
			if !slices.ContainsFunc(want, func(n string) bool { return sameSpec(o.Name, n) }) {
				return fmt.Errorf("%s: rerun %d (%s) has an outcome for %q, not one of part %s's specs", path, i+1, r.Date.UTC().Format(time.RFC3339), o.Name, sh)
			}
		}
	}
	return nil
}

// recordRerun adds a rerun of some of part sh's specs to the part's
// record in partsDir, whose run (of runDate) the rerun's specs were
// taken from. A record of another run of the part (the part run again
// since) is left as it is: the rerun says nothing about that run.
func recordRerun(partsDir, focus string, sh shard, runDate time.Time, r rerunRecord) (string, error) {
	path := partFile(partsDir, focus, sh)
	p, err := readPartRecord(path)
	if err != nil {
		return "", err
	}
	if !p.Date.Equal(runDate) {
		return "", fmt.Errorf("%s records part %s's run of %s, not the rerun report's run of %s", path, sh, p.Date.UTC().Format(time.RFC3339), runDate.UTC().Format(time.RFC3339))
	}
	p.Reruns = append(p.Reruns, r)
	if err := writePartRecord(path, p); err != nil {
		return "", err
	}
	return fmt.Sprintf("part %s: recorded the rerun of %d spec(s) in %s", sh, len(r.Results.all()), path), nil
}

// again says, of each of s's failed, unreached and skipped specs, how
// its latest rerun went (rerunRecord), for the doc: the outcomes are
// s's own, their Again set.
func again(s summary, reruns []rerunRecord) summary {
	mark := func(l []outcome, ranBefore bool) []outcome {
		l = slices.Clone(l)
		for i := range l {
			for _, r := range reruns {
				if a, ok := r.Results.againOf(l[i].Name, r.Date, ranBefore); ok {
					l[i].Again = a
				}
			}
		}
		return l
	}
	s.Failed, s.NotReached, s.Skipped = mark(s.Failed, true), mark(s.NotReached, false), mark(s.Skipped, false)
	return s
}

// missingPart is a part of a sharded run that is not recorded (or not as
// asked): mergeShards.
type missingPart struct {
	Shard  shard
	Record string
	Specs  int
	Why    error
}

func (m missingPart) String() string {
	return fmt.Sprintf("part %s (%d specs): %v", m.Shard, m.Specs, m.Why)
}

// readShard reads part sh's run in dir for recordPart, which checks it
// (checkPart): its summary, its run.json and the focus its report recorded.
func readShard(dir string, sh shard, list skipList) (summary, runRecord, *regexp.Regexp, error) {
	rec, err := readRunRecord(dir)
	if err != nil {
		return summary{}, rec, nil, err
	}
	junit := filepath.Join(dir, "junit.xml")
	j, err := readJUnit(junit)
	if err != nil {
		return summary{}, rec, nil, err
	}
	ranFocus, _, err := reportFilters(j, junit)
	if err != nil {
		return summary{}, rec, nil, err
	}
	if ranFocus == nil {
		return summary{}, rec, nil, fmt.Errorf("%s: its run had no focus, so it was not part %s", junit, sh)
	}
	// Each part's summary counts its own specs only; berth's skip list
	// (in the report's SkipStrings) counts them as listed, as a whole
	// run's summary does. Whether the report's focus selects exactly the
	// part's specs is checkPart's to say, at every merge.
	return summarize(j, focusAsked(ranFocus), list), rec, ranFocus, nil
}

// shardsInfo is the facts of a run made of parts, as the doc shows one
// run: the first part's date, the parts' wall times added up, the
// versions and readiness of each part where they differ, and the parts
// not yet run.
func shardsInfo(recs []runRecord, n int, missing []missingPart) runInfo {
	ri := recs[0].runInfo
	ri.Wall = 0
	var dates, images, ready, procs []string
	sameProcs := true
	for _, r := range recs {
		sameProcs = sameProcs && r.Procs == ri.Procs
		procs = append(procs, fmt.Sprintf("%d (part %s)", r.Procs, r.Shard))
		ri.Wall += r.Wall
		if r.Date.Before(ri.Date) {
			ri.Date = r.Date
		}
		dates = append(dates, fmt.Sprintf("%s (part %s)", r.Date.UTC().Format("2006-01-02 15:04 UTC"), r.Shard))
		if !slices.Contains(images, r.Image) {
			images = append(images, r.Image)
		}
		ready = append(ready, fmt.Sprintf("%.0f s", r.ClusterReadySeconds))
	}
	p := &partsInfo{N: n, Dates: strings.Join(dates, ", "), Images: strings.Join(images, "; "), Ready: strings.Join(ready, ", ")}
	if !sameProcs {
		// A part may be run with more processes to fit a session; the
		// doc must not credit the first part's number to all of them.
		p.Procs = strings.Join(procs, ", ")
	}
	for _, m := range missing {
		p.NotRun = append(p.NotRun, fmt.Sprintf("%s (%d specs)", m.Shard, m.Specs))
	}
	ri.Parts = p
	return ri
}

// partsInfo is what the doc says of a run made of parts instead of one
// date, image and readiness; and which parts have not run yet, whose
// specs are in no count.
type partsInfo struct {
	N                    int
	Dates, Images, Ready string
	// Procs is each part's ginkgo processes, where they differ.
	Procs  string `json:",omitempty"`
	NotRun []string
}
