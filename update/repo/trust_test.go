package repo

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSetUpKeys(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "update")
	ks, err := SetUpKeys(dir, false, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !ks.Created {
		t.Error("a new set is not reported as created")
	}
	onDisk, err := os.ReadFile(filepath.Join(dir, TrustedRootFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(onDisk, ks.TrustedRoot) {
		t.Error("root.json on disk differs from the set's")
	}
	if err := CheckTrustedRoot(onDisk, ks.Keys); err != nil {
		t.Errorf("the new trusted root: %v", err)
	}
	root, err := ParseTrustedRoot(onDisk)
	if err != nil {
		t.Fatal(err)
	}
	if left := time.Until(root.Signed.Expires); left < TrustedRootExpiry-time.Hour {
		t.Errorf("the trusted root expires in %v, want about %v", left, TrustedRootExpiry)
	}

	// Kept: same keys, same bytes.
	again, err := SetUpKeys(dir, false, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if again.Created || again.Completed || !again.Keys.Root.Equal(ks.Keys.Root) || !bytes.Equal(again.TrustedRoot, onDisk) {
		t.Errorf("an existing set was not kept as it is: created %v completed %v", again.Created, again.Completed)
	}

	// A missing root.json is made from the keys there.
	if err := os.Remove(filepath.Join(dir, TrustedRootFile)); err != nil {
		t.Fatal(err)
	}
	done, err := SetUpKeys(dir, false, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !done.Completed || !done.Keys.Root.Equal(ks.Keys.Root) || CheckTrustedRoot(done.TrustedRoot, ks.Keys) != nil {
		t.Error("a missing root.json was not made from the existing keys")
	}

	// A root.json of other keys is refused, and left alone.
	other, err := SetUpKeys(filepath.Join(t.TempDir(), "other"), false, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, TrustedRootFile), other.TrustedRoot, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := SetUpKeys(dir, false, Options{}); err == nil || !strings.Contains(err.Error(), "another key set") {
		t.Errorf("root.json of other keys: %v", err)
	}

	// A lost key file is refused: not a set to sign with, nor to replace
	// silently.
	if err := os.Remove(keyFile(dir, "snapshot")); err != nil {
		t.Fatal(err)
	}
	if _, err := SetUpKeys(dir, false, Options{}); err == nil || !strings.Contains(err.Error(), "snapshot") {
		t.Errorf("a set missing the snapshot key: %v", err)
	}

	// force: a new set.
	forced, err := SetUpKeys(dir, true, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !forced.Created || forced.Keys.Root.Equal(ks.Keys.Root) {
		t.Error("force kept the old keys")
	}
	if err := CheckTrustedRoot(forced.TrustedRoot, ks.Keys); err == nil {
		t.Error("the forced set's root trusts the old keys")
	}
}

func TestParseTrustedRootRefusals(t *testing.T) {
	ks, err := SetUpKeys(filepath.Join(t.TempDir(), "k"), false, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tampered := bytes.Replace(ks.TrustedRoot, []byte(`"consistent_snapshot": true`), []byte(`"consistent_snapshot": false`), 1)
	if bytes.Equal(tampered, ks.TrustedRoot) {
		t.Fatal("the test's replacement did not apply")
	}
	for name, tc := range map[string]struct {
		data []byte
		want string
	}{
		"not json":     {[]byte("hello"), "not a TUF root.json"},
		"tampered":     {tampered, "not signed by its own root key"},
		"targets role": {[]byte(`{"signed":{"_type":"targets","spec_version":"1.0.31","version":1,"expires":"2030-01-01T00:00:00Z","targets":{}},"signatures":[]}`), "not a TUF root.json"},
	} {
		if _, err := ParseTrustedRoot(tc.data); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %q", name, err, tc.want)
		}
	}
}

// TestInitFrom: a repository started from the key set's trusted root is
// read by a node that carries that root, and its 1.root.json is the very
// file the node carries.
func TestInitFrom(t *testing.T) {
	ctx := context.Background()
	ks, err := SetUpKeys(filepath.Join(t.TempDir(), "keys"), false, Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "repo")
	if err := InitFrom(ctx, dir, ks.Keys, ks.TrustedRoot, Options{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"root.json", "1.root.json"} {
		if b, err := os.ReadFile(filepath.Join(dir, n)); err != nil || !bytes.Equal(b, ks.TrustedRoot) {
			t.Errorf("%s is not the trusted root (%v)", n, err)
		}
	}
	src := t.TempDir()
	rel := NewRelease{Arch: "amd64", Version: "1.2.0", RootHash: hashA, UKI: filepath.Join(src, "u"), Root: filepath.Join(src, "r")}
	for _, p := range []string{rel.UKI, rel.Root} {
		if err := os.WriteFile(p, []byte("content of "+p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := Add(ctx, dir, ks.Keys, rel, Options{}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()
	c, err := NewClient(ClientConfig{TrustedRoot: ks.TrustedRoot, MetadataURL: srv.URL, CacheDir: t.TempDir(), Running: "1.1", Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Latest(ctx, "amd64")
	if err != nil {
		t.Fatal(err)
	}
	if got.Version.String() != "1.2.0" || got.RootHash != hashA {
		t.Errorf("latest release %s %s", got.Version, got.RootHash)
	}

	// Another key set's root, or one these keys did not sign, is refused.
	other, err := SetUpKeys(filepath.Join(t.TempDir(), "other"), false, Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = InitFrom(ctx, filepath.Join(t.TempDir(), "repo2"), ks.Keys, other.TrustedRoot, Options{})
	if err == nil || !strings.Contains(err.Error(), "another key set") {
		t.Errorf("InitFrom with another set's root: %v", err)
	}
	if err := InitFrom(ctx, dir, ks.Keys, ks.TrustedRoot, Options{}); !errors.Is(err, ErrRepoExists) {
		t.Errorf("InitFrom over a repository: %v", err)
	}
}
