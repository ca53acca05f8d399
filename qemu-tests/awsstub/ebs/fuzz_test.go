package ebs

import (
	"net/http"
	"strings"
	"testing"
)

// FuzzParseRoute feeds arbitrary paths (outside input) to the router: it
// must not panic, and what it accepts must name a well-formed snapshot ID
// and a non-negative index.
func FuzzParseRoute(f *testing.F) {
	for _, p := range []string{"/snapshots", "/snapshots/snap-0123456789abcdef0/blocks/12", "/snapshots/completion/snap-01",
		"/snapshots/snap-01/blocks/-1", "/snapshots/snap-01/blocks/0x10", "/snapshots/SNAP-01/blocks/1", "/snapshots/snap-01/blocks/99999999999"} {
		f.Add(http.MethodPut, p)
		f.Add(http.MethodPost, p)
	}
	f.Fuzz(func(t *testing.T, method, path string) {
		r, err := ParseRoute(method, path)
		if err != nil {
			return
		}
		if r.Op != OpStart && !strings.HasPrefix(r.SnapshotID, "snap-") {
			t.Fatalf("%s %s: accepted snapshot ID %q", method, path, r.SnapshotID)
		}
		if r.Index < 0 {
			t.Fatalf("%s %s: accepted index %d", method, path, r.Index)
		}
	})
}

// FuzzParseStart feeds arbitrary StartSnapshot bodies: what is accepted
// has a volume size and Timeout inside EBS's bounds.
func FuzzParseStart(f *testing.F) {
	f.Add(`{"VolumeSize":1,"Timeout":60,"ClientToken":"x","Tags":[{"Key":"k","Value":"v"}]}`)
	f.Add(`{"VolumeSize":0}`)
	f.Add(`{"VolumeSize":1,"Timeout":5}`)
	f.Add(`{"Tags":[{"Key":"aws:x"}],"VolumeSize":1}`)
	f.Fuzz(func(t *testing.T, body string) {
		in, err := ParseStart([]byte(body))
		if err != nil {
			return
		}
		if in.VolumeSize == nil || *in.VolumeSize < 1 || *in.VolumeSize > MaxVolumeSize {
			t.Fatalf("accepted VolumeSize in %s", body)
		}
		if in.Timeout != nil && (*in.Timeout < MinTimeout || *in.Timeout > MaxTimeout) {
			t.Fatalf("accepted Timeout in %s", body)
		}
	})
}
