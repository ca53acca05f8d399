package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/runtime/kubelet"
	"github.com/berth-node/berth/update/status"
)

func TestWritePulledRecords(t *testing.T) {
	root := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	pause := kubelet.PulledRecord{ImageRef: "sha256:" + strings.Repeat("a", 64), Repos: []string{"registry.k8s.io/pause"}}
	demo := kubelet.PulledRecord{ImageRef: "sha256:" + strings.Repeat("b", 64), Repos: []string{"localhost/berth-demo"}}
	broken := kubelet.PulledRecord{ImageRef: "sha256:" + strings.Repeat("c", 64), Repos: []string{"localhost/other"}}
	at := func(r kubelet.PulledRecord) string { return filepath.Join(root, kubelet.PulledRecordPath(r.ImageRef)) }

	// kubelet pulled the demo image under its registry name in an
	// earlier boot, and left a record berth cannot read.
	kubeletWrote := `{"kind":"ImagePulledRecord","apiVersion":"kubelet.config.k8s.io/v1beta1","lastUpdatedTime":"2026-11-28T09:05:11Z","imageRef":"` + demo.ImageRef + `","credentialMapping":{"registry.berth.test/berth/demo":{"nodePodsAccessible":true}}}`
	for path, data := range map[string]string{at(demo): kubeletWrote, at(broken): "{"} {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	rep := &report.Apply{}
	writePulledRecords(log, rep, root, []kubelet.PulledRecord{pause, demo, broken}, now)
	if want := []string{kubelet.PulledRecordPath(pause.ImageRef), kubelet.PulledRecordPath(demo.ImageRef)}; strings.Join(rep.PulledRecords, " ") != strings.Join(want, " ") {
		t.Errorf("written %v, want %v", rep.PulledRecords, want)
	}
	if len(rep.PulledRecordErrors) != 1 || !strings.HasPrefix(rep.PulledRecordErrors[0], kubelet.PulledRecordPath(broken.ImageRef)+": reading kubelet's pull record") {
		t.Errorf("errors %q, want the broken record's, named by path", rep.PulledRecordErrors)
	}
	if b, _ := os.ReadFile(at(broken)); string(b) != "{" {
		t.Errorf("the broken record was rewritten: %q", b)
	}
	merged, _ := os.ReadFile(at(demo))
	for _, want := range []string{`"registry.berth.test/berth/demo":{"nodePodsAccessible":true}`, `"localhost/berth-demo":{"nodePodsAccessible":true}`} {
		if !strings.Contains(string(merged), want) {
			t.Errorf("merged record %s lacks %s", merged, want)
		}
	}
	fi, err := os.Stat(at(pause))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("new record: %v, %v; want mode 0600 as kubelet writes", fi, err)
	}
	di, err := os.Stat(filepath.Join(root, kubelet.PulledRecordsDir))
	if err != nil || di.Mode().Perm() != 0o700 {
		t.Errorf("records dir: %v, %v; want mode 0700 as kubelet makes it", di, err)
	}

	// A second boot finds them as it left them and writes nothing.
	rep = &report.Apply{}
	writePulledRecords(log, rep, root, []kubelet.PulledRecord{pause, demo}, now.Add(time.Hour))
	if len(rep.PulledRecords) != 0 || len(rep.PulledRecordErrors) != 0 {
		t.Errorf("second boot wrote %v, errors %v; want nothing", rep.PulledRecords, rep.PulledRecordErrors)
	}
	entries, _ := os.ReadDir(filepath.Join(root, kubelet.PulledRecordsDir))
	if len(entries) != 3 {
		t.Errorf("%d files in the records dir, want 3 (no temp files left)", len(entries))
	}
}

// On a trial boot the apply phase leaves the kernel's panics on a hang as
// the image's command line armed them; the update agent writes their
// at-rest values once the trial is blessed. Any other boot writes all.
func TestHeldForTrial(t *testing.T) {
	all := kubelet.Sysctls(false)
	for _, c := range []struct {
		name string
		st   *status.Status
		held []string
	}{
		{"no status (not a disk boot)", nil, nil},
		{"blessed", &status.Status{Trial: false}, nil},
		{"trial", &status.Status{Trial: true}, []string{hungTaskPanic, softLockupPanic}},
	} {
		kept, held := heldForTrial(c.st, all)
		if !slices.Equal(held, c.held) {
			t.Errorf("%s: held %q, want %q", c.name, held, c.held)
		}
		if len(kept)+len(held) != len(all) {
			t.Errorf("%s: %d kept and %d held of %d sysctls", c.name, len(kept), len(held), len(all))
		}
		for _, s := range kept {
			if slices.Contains(held, s.Key) {
				t.Errorf("%s: %s both kept and held", c.name, s.Key)
			}
		}
	}
}
