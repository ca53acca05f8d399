package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-node/berth/config/imds"
	"github.com/berth-node/berth/config/manifest"
	"github.com/berth-node/berth/config/nodeconfig"
	"github.com/berth-node/berth/init/kmod"
	"github.com/berth-node/berth/init/plan"
	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/internal/safe"
	"github.com/berth-node/berth/network"
)

// TestRefreshLiveRewritesBootJSON: with nothing else happening, the live
// section still moves on, and the loop ends with its context.
func TestRefreshLiveRewritesBootJSON(t *testing.T) {
	b, _ := testBoot()
	b.reportPath = filepath.Join(t.TempDir(), "boot.json")
	b.reported = true
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	safe.Go(slog.New(slog.DiscardHandler), "live", func() { defer close(done); b.refreshLive(ctx, time.Millisecond) },
		func(p *safe.Panic) { t.Errorf("refreshLive panicked: %v", p) })
	var first int64
	deadline := time.Now().Add(10 * time.Second)
	for {
		var r report.Report
		data, err := os.ReadFile(b.reportPath)
		if err == nil && json.Unmarshal(data, &r) == nil && r.Live != nil {
			if first == 0 {
				first = r.Live.AtMs
			} else if r.Live.AtMs > first {
				if r.Live.RSSKiB <= 0 || r.Live.Goroutines < 1 {
					t.Errorf("live section %+v: want RSS and goroutines", *r.Live)
				}
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("boot.json's live section not refreshed twice within 10 s (first atMs %d)", first)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("refreshLive still running 5 s after its context ended")
	}
}

// TestFinishReleasesPlanInputs: once the report is out, the boot no
// longer holds the config, metadata, network result or plan, and keeps
// what supervising still uses.
func TestFinishReleasesPlanInputs(t *testing.T) {
	b, _ := testBoot()
	b.reportPath = filepath.Join(t.TempDir(), "boot.json")
	m, ix := &manifest.Manifest{}, &kmod.Index{}
	b.node = nodeState{
		manifest: m, kmod: ix,
		net:      &network.Result{},
		instance: &imds.Metadata{},
		config:   &nodeconfig.Result{},
		plan:     &plan.Plan{Files: []plan.File{{Path: "/etc/kubernetes/kubelet/config.json", Data: []byte("{}")}}},
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.finish(ctx, nil)
	n := &b.node
	if n.config != nil || n.instance != nil || n.net != nil || n.plan != nil {
		t.Errorf("after finish: config %v, instance %v, net %v, plan %v; want all released", n.config, n.instance, n.net, n.plan)
	}
	if n.manifest != m || n.kmod != ix {
		t.Error("finish released the manifest or the module index, which the imports and hotplug still use")
	}
}
