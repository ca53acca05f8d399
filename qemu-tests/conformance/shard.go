package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

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

// mergeShards puts the N parts of a sharded run of focus under base
// together: one summary over the specs of the parts that have run, and
// each such part's facts. A part counts once it has run (its run.json and
// JUnit report there) for this focus, against the same e2e.test
// (kubernetes), and its report was asked for exactly its part's specs,
// as ginkgo recorded its focus (a part run by hand with a pattern of its
// own is checked, not trusted). Each part that does not is in missing,
// with why and how many specs it holds, so that the doc can say what is
// not yet counted rather than wait for every part.
func mergeShards(base string, n int, focus *regexp.Regexp, kubernetes string, listed []string, list skipList) (summary, []runRecord, []missingPart) {
	var all summary
	var recs []runRecord
	var missing []missingPart
	for k := 1; k <= n; k++ {
		sh := shard{K: k, N: n}
		dir := sh.dir(base)
		s, rec, err := readShard(dir, sh, focus, kubernetes, listed, list)
		if err != nil {
			missing = append(missing, missingPart{Shard: sh, Dir: dir, Specs: len(sh.names(listed, focus)), Why: err})
			continue
		}
		recs = append(recs, rec)
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

// missingPart is a part of a sharded run that has not run (or not as
// asked): mergeShards.
type missingPart struct {
	Shard shard
	Dir   string
	Specs int
	Why   error
}

func (m missingPart) String() string {
	return fmt.Sprintf("part %s (%d specs, %s): %v", m.Shard, m.Specs, m.Dir, m.Why)
}

// readShard reads and checks part sh's run in dir (mergeShards).
func readShard(dir string, sh shard, focus *regexp.Regexp, kubernetes string, listed []string, list skipList) (summary, runRecord, error) {
	rec, err := readRunRecord(dir)
	if err != nil {
		return summary{}, rec, err
	}
	if rec.Focus != focus.String() || rec.Shard != sh.String() {
		return summary{}, rec, fmt.Errorf("its run was part %q of focus %q", rec.Shard, rec.Focus)
	}
	if rec.Kubernetes != kubernetes {
		return summary{}, rec, fmt.Errorf("its run was of e2e.test %s, this one's is %s", rec.Kubernetes, kubernetes)
	}
	junit := filepath.Join(dir, "junit.xml")
	j, err := readJUnit(junit)
	if err != nil {
		return summary{}, rec, err
	}
	ranFocus, _, err := reportFilters(j, junit)
	if err != nil {
		return summary{}, rec, err
	}
	if ranFocus == nil {
		return summary{}, rec, fmt.Errorf("%s: its run had no focus, so it was not part %s", junit, sh)
	}
	want := sh.names(listed, focus)
	var got []string
	for _, n := range listed {
		if ranFocus.MatchString(n) {
			got = append(got, n)
		}
	}
	if !slices.Equal(got, want) {
		return summary{}, rec, fmt.Errorf("%s: its focus selects %d listed specs, not part %s's %d", junit, len(got), sh, len(want))
	}
	// Each part's summary counts its own specs only; berth's skip list
	// (in the report's SkipStrings) counts them as listed, as a whole
	// run's summary does.
	return summarize(j, focusAsked(ranFocus), list), rec, nil
}

// shardsInfo is the facts of a run made of parts, as the doc shows one
// run: the first part's date, the parts' wall times added up, the
// versions and readiness of each part where they differ, and the parts
// not yet run.
func shardsInfo(recs []runRecord, n int, missing []missingPart) runInfo {
	ri := recs[0].runInfo
	ri.Wall = 0
	var dates, images, ready []string
	for _, r := range recs {
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
	NotRun               []string
}
