package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/config/imds"
	"github.com/berth-node/berth/config/lifecycle"
	"github.com/berth-node/berth/config/sources"
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
	b.startLifecycle(ctx, imds.ParseOverride(url, true), sources.IMDS)
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
	b.startLifecycle(context.Background(), imds.ParseOverride("off", true), sources.Image)
	if !strings.Contains(buf.String(), "lifecycle notices not watched: berth.imds=off") || b.rep.Lifecycle != nil {
		t.Errorf("console:\n%s", buf.String())
	}
}

// A node whose user data comes from a seed (or a URL) is no EC2
// instance: no notices to watch, and no IMDS to ask.
func TestLifecycleNotStartedOffEC2(t *testing.T) {
	b, buf := testBoot()
	b.node.instance = nil
	b.startLifecycle(context.Background(), imds.Override{}, sources.Seed)
	if !strings.Contains(buf.String(), "lifecycle notices not watched: user data comes from nocloud, not IMDS") || b.rep.Lifecycle != nil {
		t.Errorf("console:\n%s", buf.String())
	}
}

// The console says why the node goes down before the power server can
// log the shutdown's first step: the request is logged before it is sent
// (the handler below sees the power channel still empty when the line is
// written). A request that finds the backlog full is logged as dropped.
func TestRequestShutdownLogsBeforeSending(t *testing.T) {
	b, _ := testBoot()
	b.power = make(chan power.Request, powerBacklog)
	h := &queuedAtLog{Handler: b.log.Handler(), power: b.power, queued: -1}
	b.requestShutdown(slog.New(h), "spot interruption notice: terminate at 2026-03-01T12:02:00Z")
	if h.queued != 0 {
		t.Errorf("\"shutdown requested\" logged with %d request(s) already sent (-1: not logged): the power server may log the shutdown before the console says why", h.queued)
	}
	if req := <-b.power; req.Mode != power.PowerOff || req.Reason != "spot interruption notice: terminate at 2026-03-01T12:02:00Z" {
		t.Errorf("power request %+v", req)
	}

	b, buf := testBoot()
	b.power = make(chan power.Request, 1)
	b.power <- power.Request{Mode: power.PowerOff, Reason: "ACPI power button"}
	b.requestShutdown(b.log, "auto scaling lifecycle: Terminated")
	if c := buf.String(); !strings.Contains(c, "shutdown request dropped: others are pending and the first goes ahead") || !strings.Contains(c, `reason="auto scaling lifecycle: Terminated"`) {
		t.Errorf("a request with the backlog full is not logged as dropped:\n%s", buf.String())
	}
	if req := <-b.power; req.Reason != "ACPI power button" || len(b.power) != 0 {
		t.Errorf("the pending request %+v was replaced or another queued (%d left)", req, len(b.power))
	}
}

// queuedAtLog records how many requests the power channel held when the
// "shutdown requested" line was handled.
type queuedAtLog struct {
	slog.Handler
	power  chan power.Request
	queued int
}

func (h *queuedAtLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "shutdown requested" {
		h.queued = len(h.power)
	}
	return h.Handler.Handle(ctx, r)
}
