package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-node/berth/update/repo"
)

func runLogged(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var logs bytes.Buffer
	err := run(context.Background(), slog.New(slog.NewTextHandler(&logs, nil)), args)
	return logs.String(), err
}

// The command's own part: flags, and -refresh. What it adds is
// update/repo's AddImage, tested there with real image directories.
func TestRun(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "update")
	if _, err := repo.SetUpKeys(keys, false, repo.Options{}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "repo")
	if _, err := runLogged(t, "-image", t.TempDir(), "-keys", keys, "-repo", dir); err == nil || !strings.Contains(err.Error(), "manifest.json") {
		t.Errorf("an image directory without a build: %v", err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Error("a refused release left a repository directory")
	}
	if _, err := runLogged(t, "-refresh", "-keys", keys, "-repo", dir); err == nil {
		t.Error("-refresh of no repository succeeded")
	}
	k, _ := repo.LoadKeys(keys)
	root, _ := os.ReadFile(filepath.Join(keys, repo.TrustedRootFile))
	if err := repo.InitFrom(context.Background(), dir, k, root, repo.Options{}); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, "timestamp.json"))
	logs, err := runLogged(t, "-refresh", "-keys", keys, "-repo", dir)
	if err != nil || !strings.Contains(logs, "refreshed") {
		t.Fatalf("-refresh: %v %s", err, logs)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "timestamp.json")); bytes.Equal(before, after) {
		t.Error("-refresh did not re-sign the timestamp")
	}
	if _, err := os.Stat(filepath.Join(dir, "2.snapshot.json")); err != nil {
		t.Errorf("-refresh: %v", err)
	}
	if _, err := runLogged(t, "extra"); err == nil {
		t.Error("an argument was taken")
	}
	if _, err := runLogged(t, "-keys", ""); err == nil {
		t.Error("an empty -keys was taken")
	}
}
