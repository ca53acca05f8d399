package creds

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/config/imds"
)

// fakeSource hands out credentials expiring `life` after the fake now,
// numbered so a test sees which fetch it got.
type fakeSource struct {
	now   *time.Time
	life  time.Duration
	fail  bool
	calls int
}

func (f *fakeSource) RoleCredentials(context.Context) (*imds.Credentials, error) {
	f.calls++
	if f.fail {
		return nil, errors.New("imds down")
	}
	return &imds.Credentials{Role: "node", AccessKeyID: "AKID" + string(rune('0'+f.calls)), SecretAccessKey: "SECRETKEY",
		Token: "SESSIONTOKEN", Expiration: f.now.Add(f.life)}, nil
}

func TestCacheRefreshTiming(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	now := t0
	src := &fakeSource{now: &now, life: time.Hour}
	c := NewCache(src, Options{Clock: func() time.Time { return now }})
	ctx := context.Background()

	get := func() *imds.Credentials {
		t.Helper()
		cr, err := c.Get(ctx)
		if err != nil {
			t.Fatalf("at +%s: %v", now.Sub(t0), err)
		}
		return cr
	}
	first := get()
	if src.calls != 1 || first.AccessKeyID != "AKID1" {
		t.Fatalf("cold Get: %d fetches, key %s", src.calls, first.AccessKeyID)
	}
	// Reused until RefreshBefore (5 min) before Expiration.
	for _, at := range []time.Duration{time.Second, 30 * time.Minute, 54*time.Minute + 59*time.Second} {
		now = t0.Add(at)
		if cr := get(); cr != first || src.calls != 1 {
			t.Fatalf("at +%s: fetched again (%d) though the credentials had > 5 min left", at, src.calls)
		}
	}
	// Inside the window: fetched again, before they expire.
	now = t0.Add(55 * time.Minute)
	second := get()
	if src.calls != 2 || second.AccessKeyID != "AKID2" || !second.Expiration.Equal(now.Add(time.Hour)) {
		t.Fatalf("at +55m: %d fetches, key %s", src.calls, second.AccessKeyID)
	}
	// The new ones are reused again.
	now = now.Add(10 * time.Minute)
	if cr := get(); cr != second || src.calls != 2 {
		t.Fatalf("new credentials not reused: %d fetches", src.calls)
	}
}

func TestCacheRefreshFailureFallsBack(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	now := t0
	src := &fakeSource{now: &now, life: time.Hour}
	var logs bytes.Buffer
	c := NewCache(src, Options{Clock: func() time.Time { return now }, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	first, err := c.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	src.fail = true
	// In the refresh window a failed fetch keeps the still-valid ones...
	now = t0.Add(56 * time.Minute)
	if cr, err := c.Get(context.Background()); err != nil || cr != first {
		t.Fatalf("refresh failure: %v, %v", cr, err)
	}
	// ...and is not retried before RetryEvery.
	now = now.Add(10 * time.Second)
	if _, err := c.Get(context.Background()); err != nil || src.calls != 2 {
		t.Fatalf("retried after 10s: %d calls, %v", src.calls, err)
	}
	now = now.Add(30 * time.Second)
	if _, err := c.Get(context.Background()); err != nil || src.calls != 3 {
		t.Fatalf("not retried after 40s: %d calls, %v", src.calls, err)
	}
	// Within HardMargin of expiry they are never handed out.
	now = t0.Add(59*time.Minute + 30*time.Second)
	if cr, err := c.Get(context.Background()); err == nil {
		t.Fatalf("got credentials 30s before expiry with IMDS down: %v", cr)
	}
	if out := logs.String(); strings.Contains(out, "SECRETKEY") || strings.Contains(out, "SESSIONTOKEN") || !strings.Contains(out, "AKID1") {
		t.Errorf("log leaks secrets or lacks the key id: %s", out)
	}
}

func TestCacheRejectsStaleFromSource(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	src := &fakeSource{now: &now, life: 30 * time.Second}
	c := NewCache(src, Options{Clock: func() time.Time { return now }})
	if _, err := c.Get(context.Background()); err == nil || !strings.Contains(err.Error(), "expire") {
		t.Fatalf("credentials expiring in 30s accepted: %v", err)
	}
}

func TestDecide(t *testing.T) {
	o := NewCache(nil, Options{}).opts
	exp := time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		now, exp, last time.Time
		want           Decision
	}{
		{now: exp.Add(-time.Hour), want: Fetch},
		{now: exp.Add(-time.Hour), exp: exp, last: exp.Add(-time.Hour), want: Use},
		{now: exp.Add(-5 * time.Minute), exp: exp, last: exp.Add(-time.Hour), want: Refresh},
		{now: exp.Add(-4 * time.Minute), exp: exp, last: exp.Add(-4*time.Minute - 10*time.Second), want: Use},
		{now: exp.Add(-time.Minute), exp: exp, last: exp.Add(-time.Minute), want: Fetch},
		{now: exp, exp: exp, want: Fetch},
	} {
		if got := o.Decide(tc.now, tc.exp, tc.last); got != tc.want {
			t.Errorf("Decide(now=%s, exp=%s, last=%s) = %d, want %d", tc.now, tc.exp, tc.last, got, tc.want)
		}
	}
}

func TestAWSConversion(t *testing.T) {
	exp := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := AWS(&imds.Credentials{Role: "r", AccessKeyID: "A", SecretAccessKey: "S", Token: "T", Expiration: exp})
	if a.AccessKeyID != "A" || a.SecretAccessKey != "S" || a.SessionToken != "T" || !a.CanExpire || !a.Expires.Equal(exp) {
		t.Errorf("AWS() = %+v", a)
	}
}
