package imds

import (
	"slices"
	"testing"
)

func TestParseOverride(t *testing.T) {
	for _, tc := range []struct {
		v    string
		set  bool
		want Override
		eps  []string
	}{
		{"", false, Override{}, nil},
		{"", true, Override{}, nil},
		{"off", true, Override{Off: true}, nil},
		{"http://10.0.2.2:8080", true, Override{Endpoint: "http://10.0.2.2:8080"}, []string{"http://10.0.2.2:8080"}},
		// Not set: a stale value from a caller means nothing.
		{"off", false, Override{}, nil},
	} {
		got := ParseOverride(tc.v, tc.set)
		if got != tc.want || !slices.Equal(got.Endpoints(), tc.eps) {
			t.Errorf("ParseOverride(%q, %v) = %+v (endpoints %v), want %+v (%v)", tc.v, tc.set, got, got.Endpoints(), tc.want, tc.eps)
		}
	}
}
