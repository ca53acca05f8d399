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
	// In place: the missing files are added beside the user's.
	if _, err := runLogged(t, "-from", mine, "-out", mine); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(mine); len(entries) != 14 {
		t.Fatalf("in place: %d files, want 14", len(entries))
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
