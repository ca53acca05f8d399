package repo

import (
	"errors"
	"fmt"
	"strings"
)

// maxVersionParts and maxPartDigits bound a version so a comparison never
// overflows and a hostile version string costs nothing to parse.
const (
	maxVersionParts = 8
	maxPartDigits   = 9
)

// ErrVersion: a version string is not a release version.
var ErrVersion = errors.New("not a release version")

// Version is a release version: an optional "v", then one to eight
// dot-separated decimal numbers of at most nine digits each, without leading
// zeros ("v1.4.0", "2026.12.1", "7"). Versions compare number by number from
// the left, a missing number counting as zero, so "1.2" equals "1.2.0" and
// "1.10" is newer than "1.9". Anything else (a git describe suffix such as
// "-3-gabc123", "-rc1", "dev") is not a release version: a repository holds
// only releases, and a node running something else cannot tell an upgrade
// from a downgrade.
type Version struct {
	raw   string
	parts []uint32
}

// ParseVersion parses a release version (see Version).
func ParseVersion(s string) (Version, error) {
	body := strings.TrimPrefix(s, "v")
	if body == "" {
		return Version{}, fmt.Errorf("version %q: %w: empty", s, ErrVersion)
	}
	fields := strings.Split(body, ".")
	if len(fields) > maxVersionParts {
		return Version{}, fmt.Errorf("version %q: %w: more than %d numbers", s, ErrVersion, maxVersionParts)
	}
	v := Version{raw: s, parts: make([]uint32, 0, len(fields))}
	for i, f := range fields {
		if f == "" {
			return Version{}, fmt.Errorf("version %q: %w: number %d is empty", s, ErrVersion, i+1)
		}
		for _, c := range []byte(f) {
			if c < '0' || c > '9' {
				return Version{}, fmt.Errorf("version %q: %w: number %d has %q", s, ErrVersion, i+1, rune(c))
			}
		}
		if len(f) > maxPartDigits {
			return Version{}, fmt.Errorf("version %q: %w: number %d has more than %d digits", s, ErrVersion, i+1, maxPartDigits)
		}
		if len(f) > 1 && f[0] == '0' {
			return Version{}, fmt.Errorf("version %q: %w: number %d has a leading zero", s, ErrVersion, i+1)
		}
		var n uint32
		for _, c := range []byte(f) {
			n = n*10 + uint32(c-'0')
		}
		v.parts = append(v.parts, n)
	}
	return v, nil
}

// String is the version as it was written.
func (v Version) String() string { return v.raw }

// Compare is -1 when v is older than w, 0 when they are the same release,
// +1 when v is newer.
func (v Version) Compare(w Version) int {
	for i := 0; i < max(len(v.parts), len(w.parts)); i++ {
		a, b := v.part(i), w.part(i)
		switch {
		case a < b:
			return -1
		case a > b:
			return 1
		}
	}
	return 0
}

func (v Version) part(i int) uint32 {
	if i < len(v.parts) {
		return v.parts[i]
	}
	return 0
}
