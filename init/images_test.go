package main

import (
	"context"
	"errors"
	"github.com/berth-node/berth/init/report"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/config/manifest"
)

const testSandbox = "registry.k8s.io/pause:3.10"

var testImages = []manifest.Image{
	{Name: "localhost/berth-demo:v1", Path: "/usr/share/berth/images/demo.tar"},
	{Name: testSandbox, Path: "/usr/share/berth/images/pause.tar"},
	{Name: "registry.berth.test/berth/busybox:1", Path: "/usr/share/berth/images/busybox.tar"},
}

func TestImportOrder(t *testing.T) {
	var got []string
	for _, im := range importOrder(testImages, testSandbox) {
		got = append(got, im.Name)
	}
	want := []string{testSandbox, "localhost/berth-demo:v1", "registry.berth.test/berth/busybox:1"}
	if !slices.Equal(got, want) {
		t.Errorf("order %v, want the sandbox image first, then the manifest's order %v", got, want)
	}
	if testImages[0].Name != "localhost/berth-demo:v1" {
		t.Error("importOrder changed the manifest's slice")
	}
	got = got[:0]
	for _, im := range importOrder(testImages, "") {
		got = append(got, im.Name)
	}
	if !slices.Equal(got, []string{"localhost/berth-demo:v1", testSandbox, "registry.berth.test/berth/busybox:1"}) {
		t.Errorf("without a sandbox image: %v, want the manifest's order", got)
	}
}

// fakeCtr answers ctr's commands: ls lists have, import fails for the
// paths in fail, and every call takes 100 ms on a fake clock.
type fakeCtr struct {
	have  []string
	lsErr error
	fail  map[string]bool
	calls []string
	now   time.Duration
}

func (f *fakeCtr) run(_ context.Context, cmd *exec.Cmd) ([]byte, error) {
	args := strings.Join(cmd.Args[1:], " ")
	f.calls = append(f.calls, args)
	f.now += 100 * time.Millisecond
	switch {
	case strings.HasSuffix(args, "images ls -q"):
		if f.lsErr != nil {
			return []byte("ctr: connection refused"), f.lsErr
		}
		return []byte(strings.Join(f.have, "\n") + "\n"), nil
	case f.fail[cmd.Args[len(cmd.Args)-1]]:
		return []byte("ctr: unpack: no space left on device"), errors.New("exit status 1")
	}
	return nil, nil
}

func runImports(t *testing.T, f *fakeCtr, fresh bool) []report.ImageImport {
	t.Helper()
	f.now = 5 * time.Second
	var got []report.ImageImport
	im := imageImporter{
		log: slog.New(slog.DiscardHandler), run: f.run, ctr: "/usr/bin/ctr", timeout: time.Minute,
		clock: func() time.Duration { return f.now },
		done:  func(r report.ImageImport) { got = append(got, r) },
		fresh: fresh,
	}
	im.importAll(context.Background(), testImages, testSandbox)
	return got
}

func TestImportAll(t *testing.T) {
	f := &fakeCtr{have: []string{"registry.berth.test/berth/busybox:1"}, fail: map[string]bool{"/usr/share/berth/images/demo.tar": true}}
	got := runImports(t, f, false)
	wantCalls := []string{
		"-n k8s.io images ls -q", // once for all of them
		"-n k8s.io images import /usr/share/berth/images/pause.tar",
		"-n k8s.io images import /usr/share/berth/images/demo.tar",
	}
	if !slices.Equal(f.calls, wantCalls) {
		t.Errorf("ctr calls:\n%s\nwant:\n%s", strings.Join(f.calls, "\n"), strings.Join(wantCalls, "\n"))
	}
	want := []report.ImageImport{
		{Name: testSandbox, Imported: true, StartMs: 5100, DurationMs: 100},
		{Name: "localhost/berth-demo:v1", StartMs: 5200, DurationMs: 100,
			Error: "ctr images import /usr/share/berth/images/demo.tar: exit status 1: ctr: unpack: no space left on device"},
		{Name: "registry.berth.test/berth/busybox:1", StartMs: 5300}, // already present
	}
	if !slices.Equal(got, want) {
		t.Errorf("results:\n%+v\nwant:\n%+v", got, want)
	}
}

// TestImportAllListFails: a failed listing costs an import of what may be
// there already, never an image left out.
func TestImportAllListFails(t *testing.T) {
	f := &fakeCtr{lsErr: errors.New("exit status 1")}
	got := runImports(t, f, false)
	if len(got) != len(testImages) {
		t.Fatalf("%d results, want %d: %+v", len(got), len(testImages), got)
	}
	for _, r := range got {
		if !r.Imported || r.Error != "" {
			t.Errorf("%s: %+v, want imported", r.Name, r)
		}
	}
}

// TestImportAllFresh: a containerd that started without a database has
// nothing to list; the sandbox image's import starts at once.
func TestImportAllFresh(t *testing.T) {
	f := &fakeCtr{}
	got := runImports(t, f, true)
	if len(f.calls) != len(testImages) || !strings.HasSuffix(f.calls[0], "pause.tar") {
		t.Errorf("ctr calls %q, want one import per image, the sandbox image's first", f.calls)
	}
	if len(got) == 0 || got[0].StartMs != 5000 {
		t.Errorf("results %+v, want the sandbox image's import at 5000 ms", got)
	}
}
