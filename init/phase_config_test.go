package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// The manifest's accepts decode beside the phases and reach the config
// phase once; an image without them, or with unreadable ones, gives nil
// and (for the unreadable) a warning naming the manifest.
func TestAcceptsDecodedBeside(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	for _, c := range []struct {
		name, raw string
		want      bool
		warn      string
	}{
		{"recorded", `{"kubelet": {"version": "v1.35.4", "flags": {}, "featureGates": {}}}`, true, ""},
		{"older image", ``, false, ""},
		{"unreadable", `{"kubelet": 3}`, false, "accepts are unreadable"},
	} {
		buf.Reset()
		b := &boot{log: log}
		b.decodeAccepts(log, []byte(c.raw))
		a := b.accepts(log)
		if (a != nil) != c.want || (a != nil && a.Kubelet.Version != "v1.35.4") {
			t.Errorf("%s: accepts %+v, want decoded: %v", c.name, a, c.want)
		}
		if b.accepts(log) != nil {
			t.Errorf("%s: a second call gave the accepts again", c.name)
		}
		if c.warn != "" && !strings.Contains(buf.String(), c.warn) || c.warn == "" && buf.Len() != 0 {
			t.Errorf("%s: log %q, want %q", c.name, buf.String(), c.warn)
		}
	}
}
