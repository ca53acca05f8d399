package nodeconfig

import (
	"errors"
	"fmt"
	"time"

	"github.com/berth-node/berth/internal/syntax"
)

// berth's annotations for in-place updates (package update/repo's
// repository, update/trial's trial boot): which repository the node takes
// releases from, and how long a new version's trial boot waits.
// Bottlerocket's settings.updates.metadata-base-url and targets-base-url
// carry over as the first two.
//
//	metadata:
//	  annotations:
//	    berth.dev/update-repository: https://updates.example.com/berth
//	    berth.dev/update-trial-soak: 5m
//	    berth.dev/update-trial-ready-deadline: 15m
const (
	// UpdateRepositoryAnnotation is the update repository's URL (its
	// metadata base, http or https), over the image's default
	// (manifest update.repository).
	UpdateRepositoryAnnotation = "berth.dev/update-repository"
	// UpdateTargetsURLAnnotation is where the repository's target files
	// are, when not under targets/ of the repository URL (a CDN, another
	// bucket).
	UpdateTargetsURLAnnotation = "berth.dev/update-targets-url"
	// UpdateTrialSoakAnnotation is how long a newly updated node must
	// stay Ready before its version is kept (a Go duration: 3m, 90s).
	UpdateTrialSoakAnnotation = "berth.dev/update-trial-soak"
	// UpdateTrialReadyDeadlineAnnotation is how long after the boot a
	// newly updated node has to become Ready before berth rolls it back
	// (a Go duration).
	UpdateTrialReadyDeadlineAnnotation = "berth.dev/update-trial-ready-deadline"
)

// UpdateAnnotations are the update annotations, in the order their
// problems are reported.
func UpdateAnnotations() []string {
	return []string{UpdateRepositoryAnnotation, UpdateTargetsURLAnnotation, UpdateTrialSoakAnnotation, UpdateTrialReadyDeadlineAnnotation}
}

// The trial timings' defaults and bounds: update/trial's (Default*,
// Config.Validate), which config/ may not import (update/ is a layer
// above); a test holds the two to the same values.
const (
	DefaultTrialSoak          = 3 * time.Minute
	MinTrialSoak              = time.Second
	MaxTrialSoak              = time.Hour
	DefaultTrialReadyDeadline = 10 * time.Minute
	MinTrialReadyDeadline     = 10 * time.Second
	MaxTrialReadyDeadline     = 2 * time.Hour
)

// UpdateSettings are what user data says about in-place updates; a zero
// field was not set: the image's default repository, the repository's own
// targets/, update/trial's default timings (trial.Config takes a zero
// field as its default, so the caller passes Soak and ReadyDeadline as
// they are).
type UpdateSettings struct {
	// Repository and TargetsURL are http or https URLs
	// (syntax.HTTPURL).
	Repository, TargetsURL string
	// Soak and ReadyDeadline are a trial's timings, within
	// trial.Config.Validate's bounds.
	Soak, ReadyDeadline time.Duration
}

// UpdateSettingsOf reads the update annotations of a NodeConfig. Errors
// name each bad annotation's field path, such as
// metadata.annotations["berth.dev/update-trial-soak"]; with an error,
// the result holds what was good.
func UpdateSettingsOf(cfg *NodeConfig) (UpdateSettings, error) {
	ann, err := Annotations(cfg)
	u, uerr := updateFrom(ann)
	return u, errors.Join(err, uerr)
}

// updateFrom reads the update annotations of an annotations map.
func updateFrom(ann map[string]string) (UpdateSettings, error) {
	var u UpdateSettings
	var errs []error
	bad := func(key string, err error) { errs = append(errs, &annotationError{Key: key, Err: err}) }
	for _, f := range []struct {
		key string
		to  *string
	}{{UpdateRepositoryAnnotation, &u.Repository}, {UpdateTargetsURLAnnotation, &u.TargetsURL}} {
		v, ok := ann[f.key]
		if !ok {
			continue
		}
		if err := syntax.HTTPURL(v); err != nil {
			bad(f.key, err)
			continue
		}
		*f.to = v
	}
	for _, f := range []struct {
		key           string
		to            *time.Duration
		def, min, max time.Duration
	}{
		{UpdateTrialSoakAnnotation, &u.Soak, DefaultTrialSoak, MinTrialSoak, MaxTrialSoak},
		{UpdateTrialReadyDeadlineAnnotation, &u.ReadyDeadline, DefaultTrialReadyDeadline, MinTrialReadyDeadline, MaxTrialReadyDeadline},
	} {
		v, ok := ann[f.key]
		if !ok {
			continue
		}
		d, err := time.ParseDuration(v)
		switch {
		case err != nil:
			bad(f.key, fmt.Errorf("%q is not a duration: want a Go duration such as 90s, 5m or 1h30m", cut(v, 64)))
			continue
		case d <= 0:
			bad(f.key, fmt.Errorf("%q: want a positive duration (leave the annotation out for the default, %v)", v, f.def))
			continue
		case d < f.min || d > f.max:
			bad(f.key, fmt.Errorf("%q: want %v to %v (default %v)", v, f.min, f.max, f.def))
			continue
		}
		*f.to = d
	}
	return u, errors.Join(errs...)
}
