package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/berth-node/berth/config/manifest"
)

func TestCheckImageArch(t *testing.T) {
	for name, tc := range map[string]struct {
		m      *manifest.Manifest
		goarch string
		errHas string // empty: accepted
		logHas string // empty: nothing logged
	}{
		"no manifest":     {nil, "arm64", "", ""},
		"same arch":       {&manifest.Manifest{Arch: "arm64"}, "arm64", "", ""},
		"other arch":      {&manifest.Manifest{Arch: "amd64"}, "arm64", "/etc/berth/manifest.json: the image is for amd64 but this berth runs on arm64", ""},
		"legacy on amd64": {&manifest.Manifest{}, "amd64", "", "records no architecture"},
		"legacy on arm64": {&manifest.Manifest{}, "arm64", "is for amd64", "records no architecture"},
	} {
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, nil))
		err := checkImageArch(log, tc.m, tc.goarch)
		switch {
		case tc.errHas == "" && err != nil:
			t.Errorf("%s: %v, want nil", name, err)
		case tc.errHas != "" && (err == nil || !strings.Contains(err.Error(), tc.errHas)):
			t.Errorf("%s: %v, want an error containing %q", name, err, tc.errHas)
		}
		if got := buf.String(); (tc.logHas == "") != (got == "") || !strings.Contains(got, tc.logHas) {
			t.Errorf("%s: logged %q, want %q", name, got, tc.logHas)
		}
	}
	if runningArch() == "" {
		t.Error("runningArch is empty")
	}
}
