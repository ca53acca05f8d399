package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-node/berth/report"
)

// TestRefreshLiveRewritesBootJSON: with nothing else happening, the live
// section still moves on, and the loop ends with its context.
func TestRefreshLiveRewritesBootJSON(t *testing.T) {
	b, _ := testBoot()
	b.reportPath = filepath.Join(t.TempDir(), "boot.json")
	b.reported = true
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); b.refreshLive(ctx, time.Millisecond) }()
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
