package lifecycle

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-node/berth/internal/golden"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	spotBody      = `{"action": "terminate", "time": "2026-03-01T12:02:00Z"}`
	rebalanceBody = `{"noticeTime": "2026-03-01T11:59:00Z"}`
)

func TestTrackerSpotShutdownOnce(t *testing.T) {
	tr := NewTracker(DefaultPolicy(), 5*time.Second)
	if d := tr.Observe(t0, Spot, Result{NotFound: true}); d != (Decision{}) {
		t.Errorf("404: %+v", d)
	}
	d := tr.Observe(t0.Add(5*time.Second), Spot, Result{Body: []byte(spotBody)})
	if d.Notice == nil || d.Action != ActionShutdown || d.Notice.Detail != "terminate" {
		t.Fatalf("spot notice: %+v", d)
	}
	if got, want := d.Message(), "spot interruption notice: terminate at 2026-03-01T12:02:00Z: starting the graceful shutdown (power off)"; got != want {
		t.Errorf("Message() = %q, want %q", got, want)
	}
	// The same notice on the next polls: nothing new.
	for i := range 3 {
		if d := tr.Observe(t0.Add(time.Duration(10+5*i)*time.Second), Spot, Result{Body: []byte(spotBody)}); d != (Decision{}) {
			t.Errorf("repeat %d: %+v", i, d)
		}
	}
	// ASG termination after the spot notice: recorded, but no second shutdown.
	d = tr.Observe(t0.Add(30*time.Second), ASG, Result{Body: []byte("Terminated")})
	if d.Action != ActionLog || d.Why == "" {
		t.Errorf("second shutdown notice: %+v", d)
	}
	st := tr.Status()
	if st.Shutdown == nil || st.Shutdown.Signal != Spot || len(st.Notices) != 2 {
		t.Errorf("status: %+v", st)
	}
}

func TestTrackerASGStates(t *testing.T) {
	tr := NewTracker(DefaultPolicy(), 5*time.Second)
	d := tr.Observe(t0, ASG, Result{Body: []byte("InService")})
	if d.Notice == nil || d.Action != ActionLog {
		t.Errorf("InService: %+v", d)
	}
	d = tr.Observe(t0, ASG, Result{Body: []byte("Warmed:Terminated")})
	if d.Notice == nil || d.Action != ActionShutdown {
		t.Errorf("Warmed:Terminated: %+v", d)
	}
	tr = NewTracker(Policy{Spot: ActionShutdown, Rebalance: ActionLog, ASG: ActionLog}, 5*time.Second)
	if d := tr.Observe(t0, ASG, Result{Body: []byte("Terminated")}); d.Action != ActionLog || d.Why != "" {
		t.Errorf("Terminated under log: %+v", d)
	}
}

func TestTrackerErrorsRateLimited(t *testing.T) {
	tr := NewTracker(DefaultPolicy(), 5*time.Second)
	boom := errors.New("imds: no answer")
	var logged []Decision
	now := t0
	for range 200 { // 1000 s of failures at 5 s
		if d := tr.Observe(now, Spot, Result{Err: boom}); d.LogErr != nil {
			logged = append(logged, d)
		}
		now = now.Add(5 * time.Second)
	}
	// 0 s, 300 s, 600 s, 900 s.
	if len(logged) != 4 {
		t.Fatalf("%d error lines for 200 failures over 1000 s, want 4", len(logged))
	}
	if logged[0].Suppressed != 0 || logged[1].Suppressed != 59 {
		t.Errorf("suppressed counts %d, %d; want 0, 59", logged[0].Suppressed, logged[1].Suppressed)
	}
	d := tr.Observe(now, Spot, Result{NotFound: true})
	if !d.Recovered || d.Failures != 200 {
		t.Errorf("recovery: %+v", d)
	}
	if st := tr.Status(); st.Errors != 200 || st.LastError != boom.Error() {
		t.Errorf("status errors %d %q", st.Errors, st.LastError)
	}
	// A malformed answer is a failure too, never a notice.
	d = tr.Observe(now, Spot, Result{Body: []byte(`{"action":"explode"}`)})
	if d.Notice != nil || d.LogErr == nil {
		t.Errorf("malformed answer: %+v", d)
	}
}

func TestTrackerRecordsBounded(t *testing.T) {
	tr := NewTracker(DefaultPolicy(), 5*time.Second)
	for i := range MaxRecords + 5 {
		state := "InService"
		if i%2 == 1 {
			state = "Standby"
		}
		tr.Observe(t0.Add(time.Duration(i)*time.Second), ASG, Result{Body: []byte(state)})
	}
	if st := tr.Status(); len(st.Notices) != MaxRecords || st.Dropped != 5 {
		t.Errorf("%d records, %d dropped", len(st.Notices), st.Dropped)
	}
}

// A whole scenario, each poll's decision and the final report section, in
// testdata/scenario.golden.
func TestTrackerScenarioGolden(t *testing.T) {
	p, err := PolicyFromAnnotations(map[string]string{RebalanceAnnotation: "log"})
	if err != nil {
		t.Fatal(err)
	}
	tr := NewTracker(p, 5*time.Second)
	type poll struct {
		at  time.Duration
		sig Signal
		r   Result
	}
	polls := []poll{
		{0, Spot, Result{NotFound: true}},
		{0, Rebalance, Result{NotFound: true}},
		{0, ASG, Result{Body: []byte("InService")}},
		{5 * time.Second, Spot, Result{Err: errors.New("imds: GET /latest/meta-data/spot/instance-action: HTTP 500")}},
		{5 * time.Second, Rebalance, Result{Body: []byte(rebalanceBody)}},
		{5 * time.Second, ASG, Result{Body: []byte("InService")}},
		{10 * time.Second, Spot, Result{Body: []byte(spotBody)}},
		{10 * time.Second, Rebalance, Result{Body: []byte(rebalanceBody)}},
		{10 * time.Second, ASG, Result{Body: []byte("Terminated")}},
		{15 * time.Second, Rebalance, Result{NotFound: true}},
	}
	var buf bytes.Buffer
	for _, pl := range polls {
		d := tr.Observe(t0.Add(pl.at), pl.sig, pl.r)
		fmt.Fprintf(&buf, "+%s %s: ", pl.at, pl.sig)
		switch {
		case d.Notice != nil:
			fmt.Fprintf(&buf, "notice action=%s why=%q msg=%q", d.Action, d.Why, d.Message())
		case d.LogErr != nil:
			fmt.Fprintf(&buf, "error suppressed=%d err=%q", d.Suppressed, d.LogErr)
		case d.Withdrawn != nil:
			fmt.Fprintf(&buf, "withdrawn %q", d.Withdrawn)
		default:
			buf.WriteString("-")
		}
		if d.Recovered {
			fmt.Fprintf(&buf, " recovered after %d", d.Failures)
		}
		buf.WriteString("\n")
	}
	st, err := json.MarshalIndent(tr.Status(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	buf.Write(st)
	buf.WriteString("\n")
	goldenPath := filepath.Join("testdata", "scenario.golden")
	golden.Check(t, goldenPath, buf.Bytes(), *update)
}
