package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-node/berth/image/secureboot"
	"github.com/berth-node/berth/update/repo"
)

func runLogged(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var logs bytes.Buffer
	err := run(context.Background(), slog.New(slog.NewTextHandler(&logs, nil)), args)
	return logs.String(), err
}

func load(t *testing.T, dir string) *secureboot.Keys {
	t.Helper()
	k, err := secureboot.LoadKeys(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), dir)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestGenerateKeepForce(t *testing.T) {
	out := filepath.Join(t.TempDir(), "build", "keys")
	if _, err := runLogged(t, "-out", out); err != nil {
		t.Fatal(err)
	}
	first := load(t, out)
	for _, f := range []string{"PK.key", "PK.crt", "KEK.key", "KEK.crt", "db.key", "db.crt", "PK.esl", "KEK.esl", "db.esl",
		"PK.auth", "KEK.auth", "db.auth", "uefi-data", "keys.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}

	// make keys again: the set is kept, and says so.
	logs, err := runLogged(t, "-out", out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs, "kept") || load(t, out).DB.Fingerprint() != first.DB.Fingerprint() {
		t.Fatalf("second run did not keep the set: %s", logs)
	}

	// A set missing a derived file gets it back, nothing else changes.
	os.Remove(filepath.Join(out, "uefi-data"))
	if _, err := runLogged(t, "-out", out); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "uefi-data")); !bytes.Equal(b, first.File(secureboot.FileUEFIData)) {
		t.Fatal("uefi-data not restored as it was")
	}

	// A broken set is not silently replaced.
	os.WriteFile(filepath.Join(out, "db.key"), []byte("garbage"), 0o600)
	if _, err := runLogged(t, "-out", out); err == nil || !strings.Contains(err.Error(), "db.key: not PEM") || !strings.Contains(err.Error(), "-force") {
		t.Fatalf("broken set: %v", err)
	}
	if _, err := runLogged(t, "-out", out, "-force"); err != nil {
		t.Fatal(err)
	}
	if load(t, out).DB.Fingerprint() == first.DB.Fingerprint() {
		t.Fatal("-force did not make a new set")
	}
}

func TestFrom(t *testing.T) {
	mine := t.TempDir()
	for _, f := range []string{"PK.key", "PK.crt", "KEK.key", "KEK.crt", "db.key", "db.crt"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "secureboot", "testdata", "testkeys", f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(mine, f), b, 0o600)
	}
	out := filepath.Join(t.TempDir(), "keys")
	if _, err := runLogged(t, "-from", mine, "-out", out); err != nil {
		t.Fatal(err)
	}
	k := load(t, out)
	if k.DB.Cert.Subject.CommonName != "berth TEST ONLY db" {
		t.Fatalf("-out holds %q", k.DB.Cert.Subject.CommonName)
	}
	if entries, _ := os.ReadDir(mine); len(entries) != 6 {
		t.Fatalf("-from directory changed: %d files", len(entries))
	}
	// Again: the same keys are there, kept.
	if logs, err := runLogged(t, "-from", mine, "-out", out); err != nil || !strings.Contains(logs, "kept") {
		t.Fatalf("second -from: %v %s", err, logs)
	}
	// Other keys in -out: refused without -force.
	other := filepath.Join(t.TempDir(), "keys")
	if _, err := runLogged(t, "-out", other); err != nil {
		t.Fatal(err)
	}
	if _, err := runLogged(t, "-from", mine, "-out", other); !errors.Is(err, secureboot.ErrExists) {
		t.Fatalf("-from over another set: %v", err)
	}
	// In place: the missing files are added beside the user's, and the
	// update repository's keys in update/.
	if _, err := runLogged(t, "-from", mine, "-out", mine); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(mine); len(entries) != 15 {
		t.Fatalf("in place: %d entries, want 14 files and update/", len(entries))
	}
	if _, err := repo.LoadKeys(filepath.Join(mine, UpdateDir)); err != nil {
		t.Fatalf("in place: %v", err)
	}
	load(t, mine)
}

func TestFlags(t *testing.T) {
	if _, err := runLogged(t, "-out", ""); err == nil {
		t.Error("empty -out taken")
	}
	if _, err := runLogged(t, "extra"); err == nil {
		t.Error("argument taken")
	}
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o600)
	if _, err := runLogged(t, "-out", f); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("-out a file: %v", err)
	}
}

// TestUpdateKeys: make keys also makes the update repository's keys and
// trusted root in -out/update, keeps them on the next run, makes them for
// a Secure Boot set made before they were, and -force replaces them.
func TestUpdateKeys(t *testing.T) {
	out := filepath.Join(t.TempDir(), "keys")
	if _, err := runLogged(t, "-out", out); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(out, UpdateDir)
	rootPath := filepath.Join(dir, repo.TrustedRootFile)
	first, err := os.ReadFile(rootPath)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := repo.LoadKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.CheckTrustedRoot(first, keys); err != nil {
		t.Fatalf("the trusted root does not match the keys: %v", err)
	}

	logs, err := runLogged(t, "-out", out)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(rootPath); !bytes.Equal(again, first) || !strings.Contains(logs, "update repository keys: kept") {
		t.Fatalf("a second run did not keep the update keys: %s", logs)
	}

	// A key directory from before the update keys gets them.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := runLogged(t, "-out", out); err != nil {
		t.Fatal(err)
	}
	if _, err := repo.LoadKeys(dir); err != nil {
		t.Fatalf("update keys not added to an existing set: %v", err)
	}
	added, _ := os.ReadFile(rootPath)

	if _, err := runLogged(t, "-out", out, "-force"); err != nil {
		t.Fatal(err)
	}
	if forced, err := os.ReadFile(rootPath); err != nil || bytes.Equal(forced, added) {
		t.Fatalf("-force kept the update keys' root (%v)", err)
	}
}
