package registry

import (
	"strings"
	"testing"
)

// FuzzParsePath feeds arbitrary request paths (outside input) to the
// router: no panic, and a routed name and reference are always valid, so
// no path separator reaches a lookup.
func FuzzParsePath(f *testing.F) {
	f.Add("/v2/")
	f.Add("/v2/team/demo/manifests/v1")
	f.Add("/v2/demo/blobs/sha256:0000000000000000000000000000000000000000000000000000000000000000")
	f.Fuzz(func(t *testing.T, p string) {
		rt, ok := parsePath(p)
		if !ok || rt.kind == "base" {
			return
		}
		validRef := digestRE.MatchString(rt.ref) || (rt.kind == "manifests" && tagRE.MatchString(rt.ref))
		if !nameRE.MatchString(rt.repo) || strings.Contains(rt.ref, "/") || !validRef {
			t.Fatalf("%q routed to %+v", p, rt)
		}
	})
}
