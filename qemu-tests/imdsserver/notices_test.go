package imdsserver

import (
	"net/http"
	"testing"
	"time"
)

// The lifecycle notices follow EC2: a 404 while there is none, the
// documented JSON or text while one stands, a token required as for any
// path, and a 404 again once withdrawn. User data survives the switches.
func TestNotices(t *testing.T) {
	s := newServer(t, Config{UserData: []byte("ud")})
	tok := token(t, s, "60")
	get := func(p string) (int, string) {
		rec := do(t, s, http.MethodGet, "/latest/meta-data/"+p, map[string]string{TokenHeader: tok})
		return rec.Code, rec.Body.String()
	}
	paths := []string{"spot/instance-action", "spot/termination-time", "events/recommendations/rebalance",
		"autoscaling/target-lifecycle-state", "spot/", "events/", "autoscaling/"}
	for _, p := range paths {
		if code, _ := get(p); code != http.StatusNotFound {
			t.Errorf("GET %s with no notice: %d, want 404", p, code)
		}
	}

	at := time.Date(2017, 9, 18, 8, 22, 0, 0, time.FixedZone("x", 3600))
	if err := s.SetSpotAction("terminate", at); err != nil {
		t.Fatal(err)
	}
	if err := s.SetRebalance(time.Date(2020, 10, 27, 8, 22, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	if err := s.SetLifecycleState("Warmed:Stopped"); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{
		"spot/instance-action":               `{"action":"terminate","time":"2017-09-18T07:22:00Z"}`,
		"spot/termination-time":              "2017-09-18T07:22:00Z",
		"spot/":                              "instance-action\ntermination-time",
		"events/recommendations/rebalance":   `{"noticeTime":"2020-10-27T08:22:00Z"}`,
		"autoscaling/target-lifecycle-state": "Warmed:Stopped",
	} {
		if code, body := get(p); code != http.StatusOK || body != want {
			t.Errorf("GET %s: %d %q, want 200 %q", p, code, body, want)
		}
	}
	// Without a token, 401 as for every path.
	if rec := do(t, s, http.MethodGet, "/latest/meta-data/spot/instance-action", nil); rec.Code != http.StatusUnauthorized {
		t.Errorf("GET spot/instance-action without a token: %d, want 401", rec.Code)
	}
	// A stop notice has no termination-time.
	if err := s.SetSpotAction("stop", at); err != nil {
		t.Fatal(err)
	}
	if code, _ := get("spot/termination-time"); code != http.StatusNotFound {
		t.Errorf("termination-time for a stop notice: %d, want 404", code)
	}
	if err := s.SetSpotAction("", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetRebalance(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetLifecycleState(""); err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if code, _ := get(p); code != http.StatusNotFound {
			t.Errorf("GET %s after withdrawal: %d, want 404", p, code)
		}
	}
	if rec := do(t, s, http.MethodGet, "/latest/user-data", map[string]string{TokenHeader: tok}); rec.Body.String() != "ud" {
		t.Errorf("user data lost across notice switches: %q", rec.Body.String())
	}
	if err := s.SetSpotAction("reboot", at); err == nil {
		t.Error("SetSpotAction accepted an action EC2 never gives")
	}
	if err := s.SetLifecycleState("In\nService"); err == nil {
		t.Error("SetLifecycleState accepted a line break")
	}
}
