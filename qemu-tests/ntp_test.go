package qemutests

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ntpFixture is the host's NTP server (hostNTP) for a guest whose clock
// starts deliberately wrong.
type ntpFixture struct {
	port int
	// skew is how far ahead the guest's RTC starts.
	skew time.Duration
}

func startNTPFixture(t *testing.T) *ntpFixture {
	t.Helper()
	return &ntpFixture{port: hostNTP(t), skew: 2 * time.Hour}
}

// cmdline points berth at the fixture.
func (f *ntpFixture) cmdline() string { return "berth.ntp=10.0.2.2:" + strconv.Itoa(f.port) }

// qemuArgs start the guest's clock skew ahead of the host's.
func (f *ntpFixture) qemuArgs() []string {
	return []string{"-rtc", "base=" + time.Now().UTC().Add(f.skew).Format("2006-01-02T15:04:05")}
}

// check says whether the guest's clock was put right: the guest's time
// against the host's, and boot.json's time section (stepped by about the
// skew, synced).
func (f *ntpFixture) check(h *hcNode) error {
	before := time.Now()
	out, err := h.sh("date +%s")
	if err != nil {
		return err
	}
	after := time.Now()
	guest, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil {
		return fmt.Errorf("guest date %q: %w", out, err)
	}
	if guest < before.Unix()-2 || guest > after.Unix()+2 {
		return fmt.Errorf("guest clock reads %d, host %d..%d: not synced (it started %s ahead)", guest, before.Unix(), after.Unix(), f.skew)
	}
	out, err = h.sh("cat /run/berth/boot.json")
	if err != nil {
		return err
	}
	var rep struct {
		Time *struct {
			Synced      bool    `json:"synced"`
			Stepped     bool    `json:"stepped"`
			StepMs      float64 `json:"stepMs"`
			FirstSyncMs int64   `json:"firstSyncMs"`
			Server      string  `json:"server"`
		} `json:"time"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &rep); err != nil {
		return fmt.Errorf("boot.json: %w", err)
	}
	ts := rep.Time
	switch {
	case ts == nil:
		return errors.New("boot.json has no time section")
	case !ts.Synced || !ts.Stepped:
		return fmt.Errorf("time section %+v: want synced and stepped", *ts)
	}
	if d := time.Duration(ts.StepMs * float64(time.Millisecond)); (d + f.skew).Abs() > 5*time.Second {
		return fmt.Errorf("stepped by %s, want about -%s", d, f.skew)
	}
	figure(h.t, "%s image: first NTP sync %d ms after kernel start (guest clock), stepped %.1f s, server %s", h.image(), ts.FirstSyncMs, ts.StepMs/1000, ts.Server)
	return nil
}
