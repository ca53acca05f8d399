package kmod

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/internal/safe"
)

// TestLoaderPanicIsTheModulesError: a loader that panics fails that
// module (and skips what depends on it) like any load error; the other
// modules load and the call does not wait for a result that never comes.
func TestLoaderPanicIsTheModulesError(t *testing.T) {
	ix := fixture(t)
	f := newFakeSysfs(t, ix, nil)
	loader := func(path string) error {
		if Name(path) == "nvme_core" {
			panic("loader bug")
		}
		return f.load(path)
	}
	s := newSession(ix, nil, loader, map[string]bool{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	got, err := load(ctx, s, []string{"nvme", "loop", "erofs"})
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("load took %v", took)
	}
	if want := []string{"loop", "erofs"}; !reflect.DeepEqual(got, want) {
		t.Errorf("loaded %v, want %v", got, want)
	}
	var p *safe.Panic
	if !errors.As(err, &p) || p.Value != "loader bug" {
		t.Errorf("err = %v; want one holding the loader's panic", err)
	}
	for _, w := range []string{"loading module nvme_core from testdata/kernel/drivers/nvme/host/nvme-core.ko: panic: loader bug",
		"loading module nvme: skipped, its dependency nvme_core failed"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("err = %v; want it to contain %q", err, w)
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v: the load waited for its deadline", err)
	}
}

// panicSource is a device source whose scan panics.
type panicSource struct{}

func (panicSource) Scan() ([]string, error) { panic("scan bug") }
func (panicSource) Added(context.Context, time.Time) ([]string, error) {
	return nil, nil
}

// TestScanPanicIsTheColdplugsError: a panic in the sysfs scan (run beside
// the preload) is the coldplug's error, at once, not after its timeout;
// the preload modules still load.
func TestScanPanicIsTheColdplugsError(t *testing.T) {
	ix := fixture(t)
	f := newFakeSysfs(t, ix, nil)
	s := newSession(ix, nil, f.load, map[string]bool{})
	start := time.Now()
	got, err := loadAndColdplug(context.Background(), s, panicSource{}, testPolicy, []string{"loop"})
	if took := time.Since(start); took > testPolicy.Timeout/2 {
		t.Errorf("coldplug took %v: it waited for its timeout", took)
	}
	if !reflect.DeepEqual(got, []string{"loop"}) {
		t.Errorf("loaded %v, want the preload [loop]", got)
	}
	var p *safe.Panic
	if !errors.As(err, &p) || !strings.Contains(err.Error(), "scanning sysfs for devices: panic: scan bug") {
		t.Errorf("err = %v; want the scan's panic", err)
	}
}
