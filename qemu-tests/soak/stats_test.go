package main

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func TestParseSample(t *testing.T) {
	out := `"live":{"atMs":61234,"rssKiB":15000,"rssAnonKiB":9000,"heapLiveKiB":3000,"goroutines":40,"fds":21}
VmRSS:	   15010 kB
Threads:	7`
	got, err := parseSample(out)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"atMs": 61234, "rssKiB": 15000, "rssAnonKiB": 9000, "heapLiveKiB": 3000, "goroutines": 40, "fds": 21, "procRSSKiB": 15010, "threads": 7}
	if len(got) != len(want) {
		t.Errorf("parseSample = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d", k, got[k], v)
		}
	}
	for _, bad := range []string{"VmRSS: 1 kB", `"live":{"rssKiB":"x"}`, "\"live\":{}\nVmRSS: many kB"} {
		if _, err := parseSample(bad); err == nil {
			t.Errorf("parseSample(%q): no error", bad)
		}
	}
}

func TestSummarize(t *testing.T) {
	var samples []sample
	// RSS grows 2 KiB a minute; goroutines stay at 40 but for one spike.
	for i := range 10 {
		g := int64(40)
		if i == 4 {
			g = 90
		}
		samples = append(samples, sample{Minute: float64(i), Figures: map[string]int64{"rssKiB": 1000 + 2*int64(i), "goroutines": g}})
	}
	samples[9].Figures["fds"] = 5
	sum := summarize(samples)
	r := sum["rssKiB"]
	if r.N != 10 || r.Start != 1000 || r.End != 1018 || r.Min != 1000 || r.Max != 1018 || r.Median != 1008 || math.Abs(r.PerHour-120) > 1e-9 {
		t.Errorf("rssKiB %+v: want start 1000, end 1018, median 1008, 120/h", r)
	}
	g := sum["goroutines"]
	if g.Median != 40 || g.Max != 90 || g.Start != 40 || g.End != 40 {
		t.Errorf("goroutines %+v", g)
	}
	if f := sum["fds"]; f.N != 1 || f.PerHour != 0 {
		t.Errorf("one sample: %+v, want n 1, slope 0", f)
	}
	var buf bytes.Buffer
	writeTable(&buf, sum, 9)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	// Heading, column names, then rssKiB before goroutines before fds.
	if len(lines) != 5 || !strings.HasPrefix(lines[2], "rssKiB") || !strings.HasPrefix(lines[3], "goroutines") || !strings.HasPrefix(lines[4], "fds") {
		t.Errorf("table:\n%s", buf.String())
	}
}
