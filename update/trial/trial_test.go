package trial

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/update/bootcount"
)

func entry(t *testing.T, name string) bootcount.Entry {
	t.Helper()
	e, err := bootcount.Parse(name)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

var boot = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return boot.Add(d) }

func TestDecide(t *testing.T) {
	trial := entry(t, "berth-2+2-1.efi")
	last := entry(t, "berth-2+0-3.efi")
	old := entry(t, "berth-1.efi")
	esp := []bootcount.Entry{old, trial}
	for _, c := range []struct {
		name   string
		cfg    Config
		o      Observation
		action Action
		until  time.Time
		to     string
		reason string
	}{
		{name: "blessed boot", o: Observation{Booted: old, Entries: esp, BootStart: boot, Now: at(time.Minute)},
			action: None, reason: "not a trial boot: berth-1.efi has no boot counter"},
		{name: "just booted", o: Observation{Booted: trial, Entries: esp, BootStart: boot, Now: at(0)},
			action: Wait, until: at(10 * time.Minute), reason: "waiting for kubelet Ready, at most 10m0s after boot (until 2026-03-01T12:10:00Z)"},
		{name: "not Ready yet", o: Observation{Booted: trial, Entries: esp, BootStart: boot, Now: at(9*time.Minute + 59*time.Second)},
			action: Wait, until: at(10 * time.Minute), reason: "waiting for kubelet Ready"},
		{name: "Ready, soaking", o: Observation{Booted: trial, Entries: esp, BootStart: boot, Now: at(3 * time.Minute), Ready: true, ReadySince: at(2 * time.Minute)},
			action: Wait, until: at(5 * time.Minute), reason: "kubelet Ready since 2026-03-01T12:02:00Z; soaking 3m0s, until 2026-03-01T12:05:00Z"},
		{name: "soaked", o: Observation{Booted: trial, Entries: esp, BootStart: boot, Now: at(5 * time.Minute), Ready: true, ReadySince: at(2 * time.Minute)},
			action: Bless, reason: "kubelet Ready for 3m0s since 2026-03-01T12:02:00Z"},
		{name: "soaked long ago", o: Observation{Booted: trial, Entries: esp, BootStart: boot, Now: at(time.Hour), Ready: true, ReadySince: at(2 * time.Minute)},
			action: Bless, reason: "kubelet Ready for 58m0s"},
		// Ready just at the deadline still soaks, past the deadline.
		{name: "Ready at the deadline", o: Observation{Booted: trial, Entries: esp, BootStart: boot, Now: at(11 * time.Minute), Ready: true, ReadySince: at(10 * time.Minute)},
			action: Wait, until: at(13 * time.Minute), reason: "soaking 3m0s"},
		{name: "soaked past the deadline", o: Observation{Booted: trial, Entries: esp, BootStart: boot, Now: at(13 * time.Minute), Ready: true, ReadySince: at(10 * time.Minute)},
			action: Bless},
		{name: "deadline", o: Observation{Booted: trial, Entries: esp, BootStart: boot, Now: at(10 * time.Minute)},
			action: Revert, to: "berth-1.efi", reason: "rolled back: kubelet not Ready within 10m0s; next boot starts berth-1.efi"},
		{name: "Ready too late", o: Observation{Booted: trial, Entries: esp, BootStart: boot, Now: at(12 * time.Minute), Ready: true, ReadySince: at(10*time.Minute + time.Second)},
			action: Revert, to: "berth-1.efi", reason: "rolled back: kubelet not Ready within 10m0s (Ready only since 2026-03-01T12:10:01Z)"},
		// NotReady after the deadline: the streak that counted is gone.
		{name: "NotReady after the deadline", o: Observation{Booted: trial, Entries: esp, BootStart: boot, Now: at(11 * time.Minute)},
			action: Revert, to: "berth-1.efi", reason: "rolled back: kubelet not Ready within 10m0s"},
		{name: "settings", cfg: Config{Soak: 30 * time.Second, ReadyDeadline: 2 * time.Minute},
			o:      Observation{Booted: trial, Entries: esp, BootStart: boot, Now: at(2 * time.Minute)},
			action: Revert, to: "berth-1.efi", reason: "rolled back: kubelet not Ready within 2m0s"},
		{name: "settings, soaked", cfg: Config{Soak: 30 * time.Second, ReadyDeadline: 2 * time.Minute},
			o:      Observation{Booted: trial, Entries: esp, BootStart: boot, Now: at(90 * time.Second), Ready: true, ReadySince: at(time.Minute)},
			action: Bless},
		// The last try fails like the others; one booted when every entry
		// is bad has nothing to go back to.
		{name: "last try", o: Observation{Booted: last, Entries: []bootcount.Entry{old, last}, BootStart: boot, Now: at(10 * time.Minute)},
			action: Revert, to: "berth-1.efi"},
		{name: "last try passes", o: Observation{Booted: last, Entries: []bootcount.Entry{old, last}, BootStart: boot, Now: at(4 * time.Minute), Ready: true, ReadySince: at(time.Minute)},
			action: Bless},
		{name: "nothing to roll back to", o: Observation{Booted: trial, Entries: []bootcount.Entry{trial}, BootStart: boot, Now: at(10 * time.Minute)},
			action: None, reason: "kubelet not Ready within 10m0s; no other version to roll back to, staying on 2"},
		{name: "only bad ones to roll back to", o: Observation{Booted: entry(t, "berth-2+0-4.efi"), Entries: []bootcount.Entry{entry(t, "berth-1+0-3.efi"), entry(t, "berth-2+0-4.efi")}, BootStart: boot, Now: at(10 * time.Minute)},
			action: None, reason: "no other version to roll back to"},
		// An older bad one sorts after the trial marked bad: newest first.
		{name: "other version bad too", o: Observation{Booted: trial, Entries: []bootcount.Entry{entry(t, "berth-1+0-3.efi"), trial}, BootStart: boot, Now: at(10 * time.Minute)},
			action: None, reason: "no other version to roll back to"},
		// A leftover third UKI newer than the fallback is what
		// systemd-boot starts next, and the decision says so.
		{name: "rolls to the best other", o: Observation{Booted: trial, Entries: []bootcount.Entry{old, entry(t, "berth-1.5.efi"), trial}, BootStart: boot, Now: at(10 * time.Minute)},
			action: Revert, to: "berth-1.5.efi"},
		// LoaderEntrySelected's lowercased id finds the file.
		{name: "lowercased id", o: Observation{Booted: entry(t, "berth-2rc+3.efi"), Entries: []bootcount.Entry{old, entry(t, "berth-2RC+3.efi")}, BootStart: boot, Now: at(10 * time.Minute)},
			action: Revert, to: "berth-1.efi"},
		{name: "lowercased id, nothing else", o: Observation{Booted: entry(t, "berth-2rc+3.efi"), Entries: []bootcount.Entry{entry(t, "berth-2RC+3.efi")}, BootStart: boot, Now: at(10 * time.Minute)},
			action: None, reason: "no other version to roll back to, staying on 2rc"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := Decide(c.cfg, c.o)
			if err != nil {
				t.Fatal(err)
			}
			if d.Action != c.action || !d.Until.Equal(c.until) || d.To.Name != c.to || !strings.Contains(d.Reason, c.reason) || d.Reason == "" {
				t.Errorf("Decide = %v until %v to %q (%q); want %v until %v to %q (%q)", d.Action, d.Until, d.To.Name, d.Reason, c.action, c.until, c.to, c.reason)
			}
		})
	}
}

// TestNotReadyRestartsSoak walks one boot: Ready, NotReady in the middle
// of the soak, Ready again; only a whole soak blesses.
func TestNotReadyRestartsSoak(t *testing.T) {
	trial := entry(t, "berth-2+2-1.efi")
	o := Observation{Booted: trial, Entries: []bootcount.Entry{entry(t, "berth-1.efi"), trial}, BootStart: boot}
	steps := []struct {
		now        time.Duration
		ready      bool
		since      time.Duration
		action     Action
		until      time.Duration
		reasonPart string
	}{
		{1 * time.Minute, true, 1 * time.Minute, Wait, 4 * time.Minute, "soaking"},
		{3 * time.Minute, false, 0, Wait, 10 * time.Minute, "waiting for kubelet Ready"},
		{4 * time.Minute, true, 3*time.Minute + 30*time.Second, Wait, 6*time.Minute + 30*time.Second, "soaking"},
		// Four minutes since the first Ready, but the soak restarted.
		{5 * time.Minute, true, 3*time.Minute + 30*time.Second, Wait, 6*time.Minute + 30*time.Second, "soaking"},
		{6*time.Minute + 30*time.Second, true, 3*time.Minute + 30*time.Second, Bless, 0, "kubelet Ready for 3m0s"},
	}
	for _, s := range steps {
		o.Now, o.Ready, o.ReadySince = at(s.now), s.ready, time.Time{}
		if s.ready {
			o.ReadySince = at(s.since)
		}
		d, err := Decide(Config{}, o)
		if err != nil {
			t.Fatalf("at %v: %v", s.now, err)
		}
		wantUntil := time.Time{}
		if s.action == Wait {
			wantUntil = at(s.until)
		}
		if d.Action != s.action || !d.Until.Equal(wantUntil) || !strings.Contains(d.Reason, s.reasonPart) {
			t.Errorf("at %v: %v until %v (%s); want %v until %v (%s)", s.now, d.Action, d.Until, d.Reason, s.action, wantUntil, s.reasonPart)
		}
	}
}

func TestDecideRejects(t *testing.T) {
	trial := entry(t, "berth-2+2-1.efi")
	esp := []bootcount.Entry{entry(t, "berth-1.efi"), trial}
	for _, c := range []struct {
		name string
		cfg  Config
		o    Observation
		want string
	}{
		{"soak too short", Config{Soak: 500 * time.Millisecond}, Observation{Booted: trial, Entries: esp, BootStart: boot, Now: boot}, "update.trial.soak: 500ms: want 1s to 1h"},
		{"negative soak", Config{Soak: -time.Minute}, Observation{Booted: trial, Entries: esp, BootStart: boot, Now: boot}, "update.trial.soak: -1m0s"},
		{"deadline too long", Config{ReadyDeadline: 3 * time.Hour}, Observation{Booted: trial, Entries: esp, BootStart: boot, Now: boot}, "update.trial.readyDeadline: 3h0m0s: want 10s to 2h"},
		{"no boot start", Config{}, Observation{Booted: trial, Entries: esp, Now: boot}, "boot start"},
		{"time runs backwards", Config{}, Observation{Booted: trial, Entries: esp, BootStart: boot, Now: at(-time.Second)}, "before the boot started"},
		{"Ready before this boot", Config{}, Observation{Booted: trial, Entries: esp, BootStart: boot, Now: at(time.Minute), Ready: true, ReadySince: at(-time.Minute)}, "readiness must be seen in this boot"},
		{"Ready in the future", Config{}, Observation{Booted: trial, Entries: esp, BootStart: boot, Now: at(time.Minute), Ready: true, ReadySince: at(2 * time.Minute)}, "outside this boot"},
		{"booted entry gone", Config{}, Observation{Booted: trial, Entries: esp[:1], BootStart: boot, Now: boot}, "berth-2+2-1.efi is not among the UKIs"},
	} {
		if d, err := Decide(c.cfg, c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Decide = %+v, %v; want an error with %q", c.name, d, err, c.want)
		}
	}
	// Both settings wrong: both named.
	err := Config{Soak: 2 * time.Hour, ReadyDeadline: time.Second}.Validate()
	if err == nil || !strings.Contains(err.Error(), SettingSoak) || !strings.Contains(err.Error(), SettingReadyDeadline) {
		t.Errorf("Validate = %v; want both settings named", err)
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	if c := (Config{}).WithDefaults(); c.Soak != DefaultSoak || c.ReadyDeadline != DefaultReadyDeadline {
		t.Errorf("WithDefaults = %+v", c)
	}
}

func TestActionString(t *testing.T) {
	for a, s := range map[Action]string{None: "none", Wait: "wait", Bless: "bless", Revert: "revert", Action(9): "Action(9)"} {
		if a.String() != s {
			t.Errorf("%d.String() = %q, want %q", int(a), a.String(), s)
		}
	}
}
