package lifecycle

import (
	"strings"
	"testing"
	"time"
)

func TestParseSpotAction(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Notice
		wantErr string
	}{
		{in: `{"action": "terminate", "time": "2017-09-18T08:22:00Z"}`,
			want: Notice{Signal: Spot, Detail: "terminate", Time: time.Date(2017, 9, 18, 8, 22, 0, 0, time.UTC)}},
		{in: "{\"action\":\"stop\",\"time\":\"2017-09-18T10:22:00+02:00\"}\n",
			want: Notice{Signal: Spot, Detail: "stop", Time: time.Date(2017, 9, 18, 8, 22, 0, 0, time.UTC)}},
		{in: `{"action":"hibernate","time":"2017-09-18T08:22:00Z","extra":1}`,
			want: Notice{Signal: Spot, Detail: "hibernate", Time: time.Date(2017, 9, 18, 8, 22, 0, 0, time.UTC)}},
		{in: `{"action":"reboot","time":"2017-09-18T08:22:00Z"}`, wantErr: `"action": "reboot" is none of terminate, stop, hibernate`},
		{in: `{"time":"2017-09-18T08:22:00Z"}`, wantErr: `no "action" field`},
		{in: `{"action":"stop"}`, wantErr: `no "time" field`},
		{in: `{"action":"stop","time":"tomorrow"}`, wantErr: `"time": "tomorrow" is not an RFC 3339 time`},
		{in: `{"action":"stop","time":"2017-09-18T08:22:00Z"} x`, wantErr: "trailing data"},
		{in: `{"action":"stop","time":"2017-09-18T08:22:00Z"}}`, wantErr: "trailing data"},
		{in: `terminate`, wantErr: "not a JSON object"},
		{in: `null`, wantErr: `no "action" field`},
		{in: `{"action":7,"time":"2017-09-18T08:22:00Z"}`, wantErr: "not a JSON object"},
		{in: `{"action":"stop","time":"` + strings.Repeat("9", MaxAnswer) + `"}`, wantErr: "more than the 1024"},
	} {
		got, err := ParseSpotAction([]byte(tc.in))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseSpotAction(%q) error %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseSpotAction(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseRebalance(t *testing.T) {
	got, err := ParseRebalance([]byte(`{"noticeTime": "2020-10-27T08:22:00Z"}`))
	want := Notice{Signal: Rebalance, Time: time.Date(2020, 10, 27, 8, 22, 0, 0, time.UTC)}
	if err != nil || got != want {
		t.Errorf("ParseRebalance = %+v, %v; want %+v", got, err, want)
	}
	for in, wantErr := range map[string]string{
		`{}`:                       `no "noticeTime" field`,
		`{"noticeTime": ""}`:       "not an RFC 3339 time",
		`{"noticeTime": 1}`:        "not a JSON object",
		`["2020-10-27T08:22:00Z"]`: "not a JSON object",
		``:                         "not a JSON object",
	} {
		if _, err := ParseRebalance([]byte(in)); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("ParseRebalance(%q) error %v, want %q", in, err, wantErr)
		}
	}
}

func TestParseTargetLifecycleState(t *testing.T) {
	for _, s := range append(knownASGStates(), "Pending:Wait") {
		got, err := ParseTargetLifecycleState([]byte(s + "\n"))
		if err != nil || got != (Notice{Signal: ASG, Detail: s}) {
			t.Errorf("ParseTargetLifecycleState(%q) = %+v, %v", s, got, err)
		}
	}
	for in, wantErr := range map[string]string{
		"":                               "empty state",
		" \n":                            "empty state",
		"In Service":                     "not a lifecycle state name",
		"inservice":                      "not a lifecycle state name",
		"Warmed:Stopped:Now":             "not a lifecycle state name",
		"<html>":                         "EC2 gives one of Detached, InService",
		strings.Repeat("A", MaxAnswer+1): "more than the 1024",
	} {
		if _, err := ParseTargetLifecycleState([]byte(in)); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("ParseTargetLifecycleState(%q) error %v, want %q", in, err, wantErr)
		}
	}
}

func TestParseNamesThePath(t *testing.T) {
	_, err := Parse(Spot, []byte("{}"))
	if err == nil || !strings.HasPrefix(err.Error(), "meta-data/spot/instance-action: ") {
		t.Errorf("Parse(Spot) error %v does not name the path", err)
	}
	if _, err := Parse("bogus", nil); err == nil {
		t.Error("Parse of an unknown signal succeeded")
	}
}

func TestNoticeString(t *testing.T) {
	for n, want := range map[Notice]string{
		{Signal: Spot, Detail: "terminate", Time: time.Date(2017, 9, 18, 8, 22, 0, 0, time.UTC)}: "spot interruption notice: terminate at 2017-09-18T08:22:00Z",
		{Signal: Rebalance, Time: time.Date(2020, 10, 27, 8, 22, 0, 0, time.UTC)}:                "rebalance recommendation of 2020-10-27T08:22:00Z",
		{Signal: ASG, Detail: "Terminated"}:                                                      "auto scaling target lifecycle state Terminated",
	} {
		if got := n.String(); got != want {
			t.Errorf("%+v.String() = %q, want %q", n, got, want)
		}
	}
}

// Whatever IMDS (or something in its place) answers, the parsers return a
// notice of their own signal or an error naming what is wrong, never panic,
// and a notice's String is one line.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"action": "terminate", "time": "2017-09-18T08:22:00Z"}`,
		`{"noticeTime": "2020-10-27T08:22:00Z"}`,
		"InService", "Warmed:Stopped\n", `{"action":"stop","time":"2017-09-18T08:22:00Z"}}`, "null", "",
	} {
		for i := range Signals() {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		sig := Signals()[int(which)%len(Signals())]
		n, err := Parse(sig, b)
		if err != nil {
			if !strings.HasPrefix(err.Error(), sig.Path()+": ") {
				t.Fatalf("error %q does not name %s", err, sig.Path())
			}
			return
		}
		if n.Signal != sig {
			t.Fatalf("Parse(%s) gave a %s notice", sig, n.Signal)
		}
		if s := n.String(); strings.ContainsAny(s, "\n\r") {
			t.Fatalf("notice string %q has a line break", s)
		}
		if sig == Spot && n.Detail != SpotTerminate && n.Detail != SpotStop && n.Detail != SpotHibernate {
			t.Fatalf("spot action %q accepted", n.Detail)
		}
	})
}
