package controlplane

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeBins writes shell scripts standing in for the components, so the
// failure paths of Start run without the real binaries.
func fakeBins(t *testing.T, etcd string) string {
	t.Helper()
	dir := t.TempDir()
	for _, b := range binaries {
		body := "#!/bin/sh\nsleep 60\n"
		if b == "etcd" {
			body = "#!/bin/sh\n" + etcd + "\n"
		}
		if err := os.WriteFile(filepath.Join(dir, b), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestStartReportsComponentExitWithLogTail(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	_, err := Start(context.Background(), quiet(), Options{
		BinDirs:  []string{fakeBins(t, "echo 'etcdmain: listen tcp 127.0.0.1:2379: bind: address already in use' >&2; exit 3")},
		StateDir: state,
	})
	var ce *ComponentError
	if !errors.As(err, &ce) {
		t.Fatalf("Start error %v is not a ComponentError", err)
	}
	if ce.Component != "etcd" || !strings.Contains(err.Error(), "address already in use") || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("error does not name etcd, its exit status and its log: %v", err)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("state directory left behind after a failed start: %v", err)
	}
}

func TestStartTimesOutAndStopsChildren(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	start := time.Now()
	_, err := Start(context.Background(), quiet(), Options{
		BinDirs:      []string{fakeBins(t, "echo $$ > "+pidFile+"; echo 'waiting for quorum'; exec sleep 60")},
		ReadyTimeout: 2 * time.Second,
		StopTimeout:  2 * time.Second,
	})
	if err == nil || !strings.Contains(err.Error(), "not ready") || !strings.Contains(err.Error(), "waiting for quorum") {
		t.Fatalf("Start error %v does not say etcd was not ready with its log", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("Start took %s despite a 2s ready timeout", d)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/proc/" + strings.TrimSpace(string(b))); !os.IsNotExist(err) {
		t.Errorf("fake etcd (pid %s) still running after Start failed", strings.TrimSpace(string(b)))
	}
}
