package nodeconfig

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/update/trial"
)

func TestUpdateSettingsOf(t *testing.T) {
	cfg := withAnnotations(t, map[string]string{
		UpdateRepositoryAnnotation:         "https://updates.example.com/berth",
		UpdateTargetsURLAnnotation:         "http://10.0.2.2:8080/targets",
		UpdateTrialSoakAnnotation:          "90s",
		UpdateTrialReadyDeadlineAnnotation: "15m",
		"example.com/other":                "not berth's",
	})
	got, err := UpdateSettingsOf(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := UpdateSettings{Repository: "https://updates.example.com/berth", TargetsURL: "http://10.0.2.2:8080/targets",
		Soak: 90 * time.Second, ReadyDeadline: 15 * time.Minute}
	if got != want {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	none, err := UpdateSettingsOf(withAnnotations(t, nil))
	if err != nil || none != (UpdateSettings{}) {
		t.Errorf("no annotations: %+v %v", none, err)
	}
	if ps := ValidateDocument("user-data", cfg); slices.ContainsFunc(ps, func(p Problem) bool { return strings.Contains(p.Path, "berth.dev/update") }) {
		t.Errorf("good update annotations have problems: %q", strs(ps))
	}
}

// TestUpdateSettingsErrors: each bad value is an error at its annotation's
// path, from UpdateSettingsOf and from validation (berth check, the config
// phase), and the good ones beside it are kept.
func TestUpdateSettingsErrors(t *testing.T) {
	r := `metadata.annotations["berth.dev/update-repository"]`
	tu := `metadata.annotations["berth.dev/update-targets-url"]`
	s := `metadata.annotations["berth.dev/update-trial-soak"]`
	d := `metadata.annotations["berth.dev/update-trial-ready-deadline"]`
	for _, tc := range []struct {
		key, value, want string
	}{
		{UpdateRepositoryAnnotation, "updates.example.com", r + `: "updates.example.com": want an http:// or https:// URL`},
		{UpdateRepositoryAnnotation, "s3://bucket/berth", r + `: "s3://bucket/berth": want an http:// or https:// URL`},
		{UpdateRepositoryAnnotation, "https://user:pw@updates.example.com", r + `: "https://user:`},
		{UpdateRepositoryAnnotation, "https://user:pw@updates.example.com", `@updates.example.com": credentials do not belong in the URL`},
		{UpdateRepositoryAnnotation, "https://updates.example.com/?v=1", r + `: "https://updates.example.com/?v=1": a query or fragment`},
		{UpdateRepositoryAnnotation, "https://updates.example.com/\nx", r + `: "https://updates.example.com/\nx" is not a URL`},
		{UpdateTargetsURLAnnotation, "ftp://cdn.example.com", tu + `: "ftp://cdn.example.com": want an http:// or https:// URL`},
		{UpdateTrialSoakAnnotation, "5", s + `: "5" is not a duration: want a Go duration such as 90s`},
		{UpdateTrialSoakAnnotation, "0s", s + `: "0s": want a positive duration (leave the annotation out for the default, 3m0s)`},
		{UpdateTrialSoakAnnotation, "-1m", s + `: "-1m": want a positive duration`},
		{UpdateTrialSoakAnnotation, "2h", s + `: "2h": want 1s to 1h0m0s (default 3m0s)`},
		{UpdateTrialSoakAnnotation, "500ms", s + `: "500ms": want 1s to 1h0m0s`},
		{UpdateTrialReadyDeadlineAnnotation, "5s", d + `: "5s": want 10s to 2h0m0s (default 10m0s)`},
		{UpdateTrialReadyDeadlineAnnotation, "3h", d + `: "3h": want 10s to 2h0m0s`},
		{UpdateTrialReadyDeadlineAnnotation, "ten minutes", d + `: "ten minutes" is not a duration`},
	} {
		ann := map[string]string{tc.key: tc.value}
		good := UpdateTrialSoakAnnotation
		if tc.key == good {
			good = UpdateRepositoryAnnotation
			ann[good] = "https://good.example.com"
		} else {
			ann[good] = "4m"
		}
		got, err := UpdateSettingsOf(withAnnotations(t, ann))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), ":pw@") {
			t.Errorf("%s=%q: got %v\nwant %s", tc.key, tc.value, err, tc.want)
		}
		if got.Soak != 4*time.Minute && got.Repository != "https://good.example.com" {
			t.Errorf("%s=%q: the good annotation beside it was lost: %+v", tc.key, tc.value, got)
		}
		ps := ValidateDocument("user-data", withAnnotations(t, map[string]string{tc.key: tc.value}))
		if !slices.ContainsFunc(ps, func(p Problem) bool {
			return p.Severity == SeverityError && strings.HasPrefix(p.Path, "metadata.annotations[") && strings.Contains(p.Path+": "+p.Message, tc.want)
		}) {
			t.Errorf("%s=%q: validation %q, want %s", tc.key, tc.value, strs(ps), tc.want)
		}
	}
	// A misspelt update annotation is unknown, not silently dropped.
	ps := ValidateDocument("user-data", withAnnotations(t, map[string]string{"berth.dev/update-repo": "https://x.example.com"}))
	if !slices.ContainsFunc(ps, func(p Problem) bool { return p.Unknown && strings.Contains(p.Path, "berth.dev/update-repo") }) {
		t.Errorf("a misspelt annotation: %q", strs(ps))
	}
}

// TestLoadBottlerocketUpdates: settings.updates' URLs become the update
// annotations, which read back as they were set; the other keys are
// warnings naming their setting.
func TestLoadBottlerocketUpdates(t *testing.T) {
	doc := `[settings.kubernetes]
cluster-name = "c"
api-server = "https://api.example.com"
cluster-dns-ip = "10.100.0.10"
[settings.updates]
metadata-base-url = "https://updates.example.com/berth"
targets-base-url = "https://cdn.example.com/berth/targets"
version-lock = "latest"
ignore-waves = true
seed = 42
`
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	res, _ := Load(context.Background(), quiet, []Source{{Name: UserDataSource, Data: []byte(doc)}})
	if res == nil || res.Config == nil {
		t.Fatal("no config")
	}
	ps := res.Problems
	got, err := UpdateSettingsOf(res.Config)
	if err != nil {
		t.Fatal(err)
	}
	if want := (UpdateSettings{Repository: "https://updates.example.com/berth", TargetsURL: "https://cdn.example.com/berth/targets"}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	for _, k := range []string{"version-lock", "ignore-waves", "seed"} {
		if !slices.ContainsFunc(ps, func(p Problem) bool {
			return p.Severity == SeverityWarning && p.Path == "settings.updates."+k && strings.Contains(p.Message, "ignored")
		}) {
			t.Errorf("settings.updates.%s: no warning in %q", k, strs(ps))
		}
	}
	if BottlerocketSettings()[UpdateRepositoryAnnotation] != "settings.updates.metadata-base-url" ||
		BottlerocketSettings()[UpdateTargetsURLAnnotation] != "settings.updates.targets-base-url" {
		t.Error("BottlerocketSettings does not name the settings the update annotations come from")
	}
}

// TestTrialBoundsAreUpdateTrials: nodeconfig's copy of the trial timings'
// defaults and bounds is update/trial's: what berth check accepts, the
// trial accepts, and the other way round.
func TestTrialBoundsAreUpdateTrials(t *testing.T) {
	if DefaultTrialSoak != trial.DefaultSoak || DefaultTrialReadyDeadline != trial.DefaultReadyDeadline {
		t.Errorf("defaults %v %v, update/trial's %v %v", DefaultTrialSoak, DefaultTrialReadyDeadline, trial.DefaultSoak, trial.DefaultReadyDeadline)
	}
	for _, b := range []struct {
		name     string
		min, max time.Duration
		cfg      func(time.Duration) trial.Config
	}{
		{"soak", MinTrialSoak, MaxTrialSoak, func(d time.Duration) trial.Config { return trial.Config{Soak: d} }},
		{"ready deadline", MinTrialReadyDeadline, MaxTrialReadyDeadline, func(d time.Duration) trial.Config { return trial.Config{ReadyDeadline: d} }},
	} {
		for _, d := range []time.Duration{b.min, b.max} {
			if err := b.cfg(d).Validate(); err != nil {
				t.Errorf("%s %v: nodeconfig takes it, update/trial refuses it: %v", b.name, d, err)
			}
		}
		for _, d := range []time.Duration{b.min - time.Nanosecond, b.max + time.Nanosecond} {
			if err := b.cfg(d).Validate(); err == nil {
				t.Errorf("%s %v: nodeconfig refuses it, update/trial takes it", b.name, d)
			}
		}
	}
}
