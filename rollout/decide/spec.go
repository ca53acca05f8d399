package decide

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/berth-node/berth/rollout/api/v1alpha1"
	"github.com/berth-node/berth/update/bootcount"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Spec is an UpdateSpec checked, with its defaults filled in.
type Spec struct {
	Version        string
	AllowDowngrade bool
	Selector       labels.Selector
	MaxUnavailable int
	// Window is nil when there is none: always open.
	Window       *Window
	Soak         time.Duration
	DrainTimeout time.Duration
	NodeTimeout  time.Duration
}

// ParseSpec checks s and fills in its defaults. Its error names the
// field at fault.
func ParseSpec(s v1alpha1.UpdateSpec) (Spec, error) {
	var errs []error
	out := Spec{Version: strings.TrimSpace(s.Version), AllowDowngrade: s.AllowDowngrade, MaxUnavailable: int(s.MaxUnavailable)}
	// The node's agent refuses what cannot name a UKI; saying so here
	// stops the rollout before a node is cordoned for nothing.
	if err := bootcount.CheckVersion(out.Version); err != nil {
		errs = append(errs, fmt.Errorf("spec.version: %w", err))
	}
	switch {
	case out.MaxUnavailable == 0:
		out.MaxUnavailable = v1alpha1.DefaultMaxUnavailable
	case out.MaxUnavailable < 0:
		errs = append(errs, fmt.Errorf("spec.maxUnavailable: %d: want 1 or more", s.MaxUnavailable))
	}
	sel := s.NodeSelector
	if sel == nil {
		sel = &metav1.LabelSelector{}
	}
	var err error
	if out.Selector, err = metav1.LabelSelectorAsSelector(sel); err != nil {
		errs = append(errs, fmt.Errorf("spec.nodeSelector: %w", err))
	}
	if s.MaintenanceWindow != nil {
		w, err := ParseWindow(*s.MaintenanceWindow)
		if err != nil {
			errs = append(errs, fmt.Errorf("spec.maintenanceWindow: %w", err))
		}
		out.Window = &w
	}
	for _, d := range []struct {
		field, value, def string
		to                *time.Duration
		zeroOK            bool
	}{
		{"soak", s.Soak, v1alpha1.DefaultSoak, &out.Soak, true},
		{"drainTimeout", s.DrainTimeout, v1alpha1.DefaultDrainTimeout, &out.DrainTimeout, false},
		{"nodeTimeout", s.NodeTimeout, v1alpha1.DefaultNodeTimeout, &out.NodeTimeout, false},
	} {
		v := strings.TrimSpace(d.value)
		if v == "" {
			v = d.def
		}
		t, err := time.ParseDuration(v)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("spec.%s: %q: want a duration such as %q", d.field, d.value, d.def))
		case t < 0 || t == 0 && !d.zeroOK:
			errs = append(errs, fmt.Errorf("spec.%s: %q: want more than 0", d.field, d.value))
		}
		*d.to = t
	}
	return out, errors.Join(errs...)
}

// sameVersion is update/agent's comparison: releases compare by their
// numbers ("v1.2" is "1.2.0"), anything else by its text, ignoring case.
// The agent's is unexported and its package is the node's; the test holds
// the two to the same answers.
func sameVersion(a, b string) bool {
	pa, oka := versionParts(a)
	pb, okb := versionParts(b)
	if oka && okb {
		for i := range max(len(pa), len(pb)) {
			if part(pa, i) != part(pb, i) {
				return false
			}
		}
		return true
	}
	return a != "" && strings.EqualFold(a, b)
}

func part(p []string, i int) string {
	if i < len(p) {
		return p[i]
	}
	return "0"
}

// versionParts splits a release version ("v1.2.3") into its numbers,
// without leading zeros; ok is false for anything else.
func versionParts(s string) ([]string, bool) {
	body := strings.TrimPrefix(s, "v")
	if body == "" {
		return nil, false
	}
	fields := strings.Split(body, ".")
	if len(fields) > 8 {
		return nil, false
	}
	for _, f := range fields {
		if f == "" || len(f) > 9 || len(f) > 1 && f[0] == '0' || strings.Trim(f, "0123456789") != "" {
			return nil, false
		}
	}
	return fields, true
}
