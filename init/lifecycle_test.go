package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/config/imds"
	"github.com/berth-node/berth/config/lifecycle"
	"github.com/berth-node/berth/init/power"
	"github.com/berth-node/berth/qemu-tests/imdsserver"
)

// A spot notice on IMDS becomes one power-off request on PID 1's power
// channel, the way the ACPI power button's does, and the report's
// lifecycle section names the notice.
func TestLifecycleSpotNoticeRequestsPowerOff(t *testing.T) {
	srv, err := imdsserver.New(imdsserver.Config{Instance: imdsserver.DefaultInstance()})
	if err != nil {
		t.Fatal(err)
	}
	url, stop, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	b, buf := testBoot()
	b.power = make(chan power.Request, powerBacklog)
	b.reportPath = filepath.Join(t.TempDir(), "boot.json")
	b.node.instance = &imds.Metadata{InstanceID: "i-0123456789abcdef0"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	at := time.Date(2026, 3, 1, 12, 2, 0, 0, time.UTC)
	if err := srv.SetSpotAction("terminate", at); err != nil {
		t.Fatal(err)
	}
	b.startLifecycle(ctx, imds.ParseOverride(url, true))
	select {
	case req := <-b.power:
		if req.Mode != power.PowerOff || req.Reason != "spot interruption notice: terminate at 2026-03-01T12:02:00Z" {
			t.Errorf("power request %+v", req)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no power request within 10 s; console:\n%s", buf.String())
	}
	if !strings.Contains(buf.String(), "lifecycle: lifecycle notice: spot interruption notice: terminate at 2026-03-01T12:02:00Z: starting the graceful shutdown") {
		t.Errorf("console does not name the notice:\n%s", buf.String())
	}
	b.repMu.Lock()
	st, _ := b.rep.Lifecycle.(*lifecycle.Status)
	raw, _ := json.Marshal(b.rep.Lifecycle)
	b.repMu.Unlock()
	if st == nil || st.Shutdown == nil || st.Shutdown.Detail != "terminate" {
		t.Errorf("report lifecycle section: %s", raw)
	}
}

func TestLifecycleNotStartedWithIMDSOff(t *testing.T) {
	b, buf := testBoot()
	b.startLifecycle(context.Background(), imds.ParseOverride("off", true))
	if !strings.Contains(buf.String(), "lifecycle notices not watched: berth.imds=off") || b.rep.Lifecycle != nil {
		t.Errorf("console:\n%s", buf.String())
	}
}
