package repo

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/theupdateframework/go-tuf/v2/metadata"
)

const (
	hashA = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	hashB = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
)

// testRepo is a repository built by the builder and served over HTTP.
type testRepo struct {
	dir  string
	keys *Keys
	srv  *httptest.Server
	// files are the source files of every release added, by
	// "<arch>/<version>/<kind>".
	files map[string][]byte
}

func newTestRepo(t testing.TB, opts Options) *testRepo {
	t.Helper()
	keys, err := GenerateKeys()
	if err != nil {
		t.Fatal(err)
	}
	r := &testRepo{dir: filepath.Join(t.TempDir(), "repo"), keys: keys, files: map[string][]byte{}}
	if err := Init(context.Background(), r.dir, keys, opts); err != nil {
		t.Fatal(err)
	}
	r.srv = httptest.NewServer(http.FileServer(http.Dir(r.dir)))
	t.Cleanup(r.srv.Close)
	return r
}

// add publishes a release with random files: the root image is 1 MiB plus
// a little, so it spans many reads.
func (r *testRepo) add(t testing.TB, arch, version, rootHash string, opts Options) {
	t.Helper()
	src := t.TempDir()
	rel := NewRelease{Arch: arch, Version: version, RootHash: rootHash,
		UKI: filepath.Join(src, "uki.efi"), Root: filepath.Join(src, "root.img")}
	for path, size := range map[string]int{rel.UKI: 40 << 10, rel.Root: 1<<20 + 123} {
		data := make([]byte, size)
		rand.Read(data)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		kind := KindUKI
		if path == rel.Root {
			kind = KindRoot
		}
		r.files[arch+"/"+version+"/"+string(kind)] = data
	}
	if err := Add(context.Background(), r.dir, r.keys, rel, opts); err != nil {
		t.Fatal(err)
	}
}

func (r *testRepo) rootJSON(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(r.dir, "root.json"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func (r *testRepo) client(t testing.TB, cfg ClientConfig) *Client {
	t.Helper()
	if cfg.TrustedRoot == nil {
		cfg.TrustedRoot = r.rootJSON(t)
	}
	if cfg.MetadataURL == "" {
		cfg.MetadataURL = r.srv.URL
	}
	if cfg.CacheDir == "" {
		cfg.CacheDir = t.TempDir()
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Running == "" && !cfg.AllowDowngrade {
		cfg.Running = "0.1"
	}
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// targetFile is the file on disk that serves rel's kind.
func (r *testRepo) targetFile(t *testing.T, rel Release, kind Kind) string {
	t.Helper()
	tg := rel.Targets[kind]
	return filepath.Join(r.dir, "targets", filepath.FromSlash(consistentName(tg.Path, tg.Hashes["sha256"])))
}

// republish re-signs the repository after mutate changed its targets,
// signing targets with targetsKey and snapshot and timestamp with the
// repository's own keys.
func (r *testRepo) republish(t *testing.T, targetsKey ed25519.PrivateKey, mutate func(*metadata.TargetsType)) {
	t.Helper()
	s, err := load(r.dir, r.keys)
	if err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		mutate(&s.targets.Signed)
	}
	k := *r.keys
	k.Targets = targetsKey
	if err := s.publish(context.Background(), &k, Options{}); err != nil {
		t.Fatal(err)
	}
}

func mustErr(t *testing.T, err, want error, mentions ...string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error = %v, want %v", err, want)
	}
	for _, m := range mentions {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("error %q does not name %q", err, m)
		}
	}
}

func TestLatestAndFetch(t *testing.T) {
	ctx := context.Background()
	r := newTestRepo(t, Options{})
	r.add(t, "amd64", "1.9.0", hashA, Options{})
	r.add(t, "amd64", "1.10", hashB, Options{})
	r.add(t, "arm64", "2.0.0", hashA, Options{})
	c := r.client(t, ClientConfig{Running: "1.9.0"})

	rel, err := c.Latest(ctx, "amd64")
	if err != nil {
		t.Fatal(err)
	}
	if rel.Version.String() != "1.10" || rel.Arch != "amd64" || rel.RootHash != hashB {
		t.Fatalf("Latest(amd64) = %s/%s root hash %s, want amd64/1.10 %s", rel.Arch, rel.Version, rel.RootHash, hashB)
	}
	for _, k := range Kinds() {
		var buf bytes.Buffer
		if err := c.Fetch(ctx, rel, k, &buf); err != nil {
			t.Fatalf("Fetch %s: %v", k, err)
		}
		if want := r.files["amd64/1.10/"+string(k)]; !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("Fetch %s: %d bytes that differ from the %d added", k, buf.Len(), len(want))
		}
	}
	arm, err := c.Latest(ctx, "arm64")
	if err != nil {
		t.Fatal(err)
	}
	if arm.Version.String() != "2.0.0" || arm.Targets[KindRoot].Path != "arm64/2.0.0/root.img" {
		t.Errorf("Latest(arm64) = %s with root %s", arm.Version, arm.Targets[KindRoot].Path)
	}
	// The running release itself is returned when it is the newest.
	same, err := r.client(t, ClientConfig{Running: "v1.10.0"}).Latest(ctx, "amd64")
	if err != nil || same.Version.String() != "1.10" {
		t.Errorf("Latest running the newest = %v, %v; want 1.10", same.Version, err)
	}
}

func TestRepositoryLayout(t *testing.T) {
	r := newTestRepo(t, Options{})
	r.add(t, "amd64", "1.0.0", hashA, Options{})
	// Init wrote version 1, Add version 2 of targets, snapshot and timestamp.
	for _, name := range []string{"root.json", "1.root.json", "1.targets.json", "2.targets.json", "1.snapshot.json", "2.snapshot.json", "timestamp.json"} {
		if _, err := os.Stat(filepath.Join(r.dir, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Nothing half-written is left behind, and the keys are not in it.
	filepath.WalkDir(r.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(d.Name(), ".tmp-") || strings.HasSuffix(d.Name(), ".pem") {
			t.Errorf("%s is in the repository", p)
		}
		return nil
	})
	ts, err := metadata.Timestamp().FromFile(filepath.Join(r.dir, "timestamp.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := ts.Signed.Expires.Sub(time.Now()); got < DefaultTimestampExpiry-time.Hour || got > DefaultTimestampExpiry {
		t.Errorf("timestamp expires in %s, want about %s", got, DefaultTimestampExpiry)
	}
	tg, err := metadata.Targets().FromFile(filepath.Join(r.dir, "2.targets.json"))
	if err != nil {
		t.Fatal(err)
	}
	tf := tg.Signed.Targets["amd64/1.0.0/root.img"]
	if tf == nil {
		t.Fatalf("2.targets.json lists %v", tg.Signed.Targets)
	}
	c, err := customOf(tf)
	if err != nil {
		t.Fatal(err)
	}
	if c != (Custom{Version: "1.0.0", Arch: "amd64", RootHash: hashA, Kind: KindRoot}) {
		t.Errorf("custom metadata = %+v", c)
	}
}

func TestCorruptTarget(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		tamper func([]byte) []byte
	}{
		{"flipped byte", func(b []byte) []byte { b[len(b)/2] ^= 1; return b }},
		{"truncated", func(b []byte) []byte { return b[:len(b)-1] }},
		{"extended", func(b []byte) []byte { return append(b, 0) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRepo(t, Options{})
			r.add(t, "amd64", "1.0.0", hashA, Options{})
			c := r.client(t, ClientConfig{})
			rel, err := c.Latest(ctx, "amd64")
			if err != nil {
				t.Fatal(err)
			}
			p := r.targetFile(t, rel, KindRoot)
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, tc.tamper(data), 0o644); err != nil {
				t.Fatal(err)
			}
			err = c.Fetch(ctx, rel, KindRoot, &bytes.Buffer{})
			mustErr(t, err, ErrCorrupt, "amd64/1.0.0/root.img", r.srv.URL)
		})
	}
}

// TestTargetFromAnotherRepository: a file another repository signed, put
// where this one's is, is refused though it is a valid target there.
func TestTargetFromAnotherRepository(t *testing.T) {
	ctx := context.Background()
	a, b := newTestRepo(t, Options{}), newTestRepo(t, Options{})
	a.add(t, "amd64", "1.0.0", hashA, Options{})
	b.add(t, "amd64", "1.0.0", hashA, Options{})
	relA, err := a.client(t, ClientConfig{}).Latest(ctx, "amd64")
	if err != nil {
		t.Fatal(err)
	}
	relB, err := b.client(t, ClientConfig{}).Latest(ctx, "amd64")
	if err != nil {
		t.Fatal(err)
	}
	other, err := os.ReadFile(b.targetFile(t, relB, KindUKI))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(a.targetFile(t, relA, KindUKI), other, 0o644); err != nil {
		t.Fatal(err)
	}
	mustErr(t, a.client(t, ClientConfig{}).Fetch(ctx, relA, KindUKI, &bytes.Buffer{}), ErrCorrupt, "amd64/1.0.0/berth.efi")
}

func TestForeignSignatures(t *testing.T) {
	ctx := context.Background()
	foreign, err := GenerateKeys()
	if err != nil {
		t.Fatal(err)
	}
	t.Run("targets", func(t *testing.T) {
		r := newTestRepo(t, Options{})
		r.add(t, "amd64", "1.0.0", hashA, Options{})
		// A release signed by a targets key root does not name, with a
		// snapshot and timestamp that are themselves in order.
		r.republish(t, foreign.Targets, func(tg *metadata.TargetsType) {
			for p, tf := range tg.Targets {
				tg.Targets[strings.Replace(p, "1.0.0", "9.0.0", 1)] = tf
			}
		})
		_, err := r.client(t, ClientConfig{}).Latest(ctx, "amd64")
		mustErr(t, err, ErrSignature, r.srv.URL, "targets")
	})
	t.Run("timestamp", func(t *testing.T) {
		r := newTestRepo(t, Options{})
		r.add(t, "amd64", "1.0.0", hashA, Options{})
		ts, err := metadata.Timestamp().FromFile(filepath.Join(r.dir, "timestamp.json"))
		if err != nil {
			t.Fatal(err)
		}
		ts.Signed.Version++
		data, err := signed(ts, foreign.Timestamp)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(r.dir, "timestamp.json"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = r.client(t, ClientConfig{}).Latest(ctx, "amd64")
		mustErr(t, err, ErrSignature, r.srv.URL, "timestamp")
	})
	t.Run("another repository", func(t *testing.T) {
		a, b := newTestRepo(t, Options{}), newTestRepo(t, Options{})
		b.add(t, "amd64", "1.0.0", hashA, Options{})
		// Trusting a's root, pointed at b.
		_, err := a.client(t, ClientConfig{MetadataURL: b.srv.URL}).Latest(ctx, "amd64")
		mustErr(t, err, ErrSignature, b.srv.URL)
	})
	t.Run("builder refuses foreign keys", func(t *testing.T) {
		r := newTestRepo(t, Options{})
		err := Refresh(ctx, r.dir, foreign, Options{})
		if err == nil || !strings.Contains(err.Error(), "another repository") || !strings.Contains(err.Error(), r.dir) {
			t.Fatalf("Refresh with another repository's keys: %v", err)
		}
	})
}

func TestExpired(t *testing.T) {
	ctx := context.Background()
	t.Run("built in the past", func(t *testing.T) {
		past := func() time.Time { return time.Now().Add(-10 * 24 * time.Hour) }
		r := newTestRepo(t, Options{Now: past})
		r.add(t, "amd64", "1.0.0", hashA, Options{Now: past})
		_, err := r.client(t, ClientConfig{}).Latest(ctx, "amd64")
		mustErr(t, err, ErrExpired, r.srv.URL, "timestamp")
	})
	t.Run("node clock past the timestamp", func(t *testing.T) {
		r := newTestRepo(t, Options{})
		r.add(t, "amd64", "1.0.0", hashA, Options{})
		later := func() time.Time { return time.Now().Add(DefaultTimestampExpiry + time.Hour) }
		_, err := r.client(t, ClientConfig{Now: later}).Latest(ctx, "amd64")
		mustErr(t, err, ErrExpired, r.srv.URL)
	})
	t.Run("refresh renews", func(t *testing.T) {
		past := func() time.Time { return time.Now().Add(-10 * 24 * time.Hour) }
		r := newTestRepo(t, Options{Now: past})
		r.add(t, "amd64", "1.0.0", hashA, Options{Now: past})
		if err := Refresh(ctx, r.dir, r.keys, Options{}); err != nil {
			t.Fatal(err)
		}
		if _, err := r.client(t, ClientConfig{}).Latest(ctx, "amd64"); err != nil {
			t.Fatalf("after Refresh: %v", err)
		}
	})
}

// TestRootRenewal: a root about to expire is renewed by Add, and a node
// that carries the first root follows the chain to the second.
func TestRootRenewal(t *testing.T) {
	ctx := context.Background()
	t0 := time.Now()
	at := func(d time.Duration) func() time.Time { return func() time.Time { return t0.Add(d) } }
	r := newTestRepo(t, Options{Now: at(-40 * 24 * time.Hour), RootExpiry: 30 * 24 * time.Hour,
		TargetsExpiry: 7 * 24 * time.Hour, SnapshotExpiry: 7 * 24 * time.Hour, TimestampExpiry: 24 * time.Hour})
	firstRoot := r.rootJSON(t)
	if _, err := os.Stat(filepath.Join(r.dir, "2.root.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Init renewed a root that outlives its metadata: %v", err)
	}
	r.add(t, "amd64", "1.0.0", hashA, Options{})
	if _, err := os.Stat(filepath.Join(r.dir, "2.root.json")); err != nil {
		t.Fatalf("Add did not renew the expiring root: %v", err)
	}
	cache := t.TempDir()
	rel, err := r.client(t, ClientConfig{TrustedRoot: firstRoot, CacheDir: cache}).Latest(ctx, "amd64")
	if err != nil {
		t.Fatalf("Latest from the first root: %v", err)
	}
	if rel.Version.String() != "1.0.0" {
		t.Errorf("Latest = %s", rel.Version)
	}
	cached, err := metadata.Root().FromFile(filepath.Join(cache, "metadata", "root.json"))
	if err != nil {
		t.Fatal(err)
	}
	if cached.Signed.Version != 2 {
		t.Errorf("cached root is version %d, want 2", cached.Signed.Version)
	}
	// The next refresh starts from the cached root, though the image's
	// root has expired by now.
	if _, err := r.client(t, ClientConfig{TrustedRoot: firstRoot, CacheDir: cache}).Latest(ctx, "amd64"); err != nil {
		t.Errorf("second Latest: %v", err)
	}
}

func TestRollback(t *testing.T) {
	ctx := context.Background()
	r := newTestRepo(t, Options{})
	r.add(t, "amd64", "1.0.0", hashA, Options{})
	old, err := os.ReadFile(filepath.Join(r.dir, "timestamp.json"))
	if err != nil {
		t.Fatal(err)
	}
	r.add(t, "amd64", "1.1.0", hashB, Options{})
	cache := t.TempDir()
	if _, err := r.client(t, ClientConfig{CacheDir: cache}).Latest(ctx, "amd64"); err != nil {
		t.Fatal(err)
	}
	// The server goes back to the state before 1.1.0, validly signed.
	if err := os.WriteFile(filepath.Join(r.dir, "timestamp.json"), old, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = r.client(t, ClientConfig{CacheDir: cache}).Latest(ctx, "amd64")
	mustErr(t, err, ErrRollback, r.srv.URL)
}

func TestDowngrade(t *testing.T) {
	ctx := context.Background()
	r := newTestRepo(t, Options{})
	r.add(t, "amd64", "1.2.0", hashA, Options{})
	_, err := r.client(t, ClientConfig{Running: "1.10"}).Latest(ctx, "amd64")
	mustErr(t, err, ErrDowngrade, "1.2.0", "1.10", r.srv.URL)
	rel, err := r.client(t, ClientConfig{Running: "1.10", AllowDowngrade: true}).Latest(ctx, "amd64")
	if err != nil || rel.Version.String() != "1.2.0" {
		t.Errorf("with AllowDowngrade: %v, %v; want 1.2.0", rel.Version, err)
	}
	// A node running no release can only update with AllowDowngrade.
	if _, err := NewClient(ClientConfig{TrustedRoot: r.rootJSON(t), MetadataURL: r.srv.URL, CacheDir: t.TempDir(), Running: "v0.3.1-4-gabc123"}); !errors.Is(err, ErrVersion) {
		t.Errorf("NewClient running a git describe version: %v", err)
	}
	if _, err := r.client(t, ClientConfig{AllowDowngrade: true}).Latest(ctx, "amd64"); err != nil {
		t.Errorf("running nothing, AllowDowngrade: %v", err)
	}
}

func TestNoRelease(t *testing.T) {
	ctx := context.Background()
	r := newTestRepo(t, Options{})
	_, err := r.client(t, ClientConfig{}).Latest(ctx, "amd64")
	mustErr(t, err, ErrNoRelease, "amd64", r.srv.URL)
	r.add(t, "amd64", "1.0.0", hashA, Options{})
	_, err = r.client(t, ClientConfig{}).Latest(ctx, "riscv64")
	mustErr(t, err, ErrNoRelease, "riscv64", r.srv.URL)
}

// TestIncompleteRelease: a release that lost a file, or whose files
// disagree on the root hash, is refused though validly signed.
func TestIncompleteRelease(t *testing.T) {
	ctx := context.Background()
	r := newTestRepo(t, Options{})
	r.add(t, "amd64", "1.0.0", hashA, Options{})
	r.republish(t, r.keys.Targets, func(tg *metadata.TargetsType) {
		delete(tg.Targets, "amd64/1.0.0/berth.efi")
	})
	_, err := r.client(t, ClientConfig{}).Latest(ctx, "amd64")
	mustErr(t, err, ErrIncomplete, "1.0.0", "uki")

	r.add(t, "amd64", "1.1.0", hashA, Options{})
	r.republish(t, r.keys.Targets, func(tg *metadata.TargetsType) {
		c := Custom{Version: "1.1.0", Arch: "amd64", RootHash: hashB, Kind: KindUKI}
		raw, _ := json.Marshal(c)
		msg := json.RawMessage(raw)
		tg.Targets["amd64/1.1.0/berth.efi"].Custom = &msg
	})
	_, err = r.client(t, ClientConfig{}).Latest(ctx, "amd64")
	mustErr(t, err, ErrIncomplete, hashA, hashB)

	r.republish(t, r.keys.Targets, func(tg *metadata.TargetsType) {
		// A listing under another release's path.
		tg.Targets["amd64/1.2.0/root.img"] = tg.Targets["amd64/1.1.0/root.img"]
		delete(tg.Targets, "amd64/1.1.0/root.img")
		delete(tg.Targets, "amd64/1.1.0/berth.efi")
	})
	_, err = r.client(t, ClientConfig{}).Latest(ctx, "amd64")
	mustErr(t, err, ErrMetadata, "amd64/1.2.0/root.img")
}

func TestAddRefusals(t *testing.T) {
	ctx := context.Background()
	r := newTestRepo(t, Options{})
	r.add(t, "amd64", "1.2.0", hashA, Options{})
	src := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(src, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		rel  NewRelease
		want string
	}{
		{"same version", NewRelease{Arch: "amd64", Version: "1.2", RootHash: hashA, UKI: src, Root: src}, "already in the repository"},
		{"bad version", NewRelease{Arch: "amd64", Version: "1.2.0-dirty", RootHash: hashA, UKI: src, Root: src}, "version"},
		{"bad arch", NewRelease{Arch: "../x", Version: "1.3", RootHash: hashA, UKI: src, Root: src}, "architecture"},
		{"bad root hash", NewRelease{Arch: "amd64", Version: "1.3", RootHash: "abc", UKI: src, Root: src}, "root hash"},
		{"missing file", NewRelease{Arch: "amd64", Version: "1.3", RootHash: hashA, UKI: src, Root: src + ".gone"}, "f.gone"},
	} {
		err := Add(ctx, r.dir, r.keys, tc.rel, Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Add = %v, want an error about %q", tc.name, err, tc.want)
		}
	}
	if err := Init(ctx, r.dir, r.keys, Options{}); !errors.Is(err, ErrRepoExists) {
		t.Errorf("Init over a repository: %v", err)
	}
}

func TestKeys(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	k, err := GenerateKeys()
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Write(dir, false); err != nil {
		t.Fatal(err)
	}
	for _, role := range Roles() {
		st, err := os.Stat(keyFile(dir, role))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s key has mode %04o", role, st.Mode().Perm())
		}
	}
	got, err := LoadKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Root.Equal(k.Root) || !got.Targets.Equal(k.Targets) || !got.Snapshot.Equal(k.Snapshot) || !got.Timestamp.Equal(k.Timestamp) {
		t.Error("loaded keys differ from the written")
	}
	k2, err := GenerateKeys()
	if err != nil {
		t.Fatal(err)
	}
	if err := k2.Write(dir, false); !errors.Is(err, ErrKeysExist) {
		t.Errorf("Write over keys: %v", err)
	}
	if got, _ := LoadKeys(dir); !got.Root.Equal(k.Root) {
		t.Error("a refused Write changed the keys")
	}
	if err := k2.Write(dir, true); err != nil {
		t.Fatalf("forced Write: %v", err)
	}
	if got, _ := LoadKeys(dir); !got.Root.Equal(k2.Root) {
		t.Error("a forced Write left the old keys")
	}
	if err := os.Chmod(keyFile(dir, "snapshot"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeys(dir); err == nil || !strings.Contains(err.Error(), "tuf-snapshot.pem") {
		t.Errorf("LoadKeys with a readable key: %v", err)
	}
	if err := os.WriteFile(keyFile(dir, "snapshot"), []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeys(dir); err == nil || !strings.Contains(err.Error(), "tuf-snapshot.pem") {
		t.Errorf("LoadKeys with a garbled key: %v", err)
	}
}

func TestNewClientRefusals(t *testing.T) {
	r := newTestRepo(t, Options{})
	root := r.rootJSON(t)
	for _, tc := range []struct {
		name string
		cfg  ClientConfig
	}{
		{"no root", ClientConfig{MetadataURL: r.srv.URL, CacheDir: "/x", Running: "1"}},
		{"garbled root", ClientConfig{TrustedRoot: []byte("{"), MetadataURL: r.srv.URL, CacheDir: "/x", Running: "1"}},
		{"no URL", ClientConfig{TrustedRoot: root, CacheDir: "/x", Running: "1"}},
		{"file URL", ClientConfig{TrustedRoot: root, MetadataURL: "file:///srv", CacheDir: "/x", Running: "1"}},
		{"no cache", ClientConfig{TrustedRoot: root, MetadataURL: r.srv.URL, Running: "1"}},
		{"no running version", ClientConfig{TrustedRoot: root, MetadataURL: r.srv.URL, CacheDir: "/x"}},
	} {
		if _, err := NewClient(tc.cfg); err == nil {
			t.Errorf("%s: NewClient accepted it", tc.name)
		}
	}
}

func TestCanceled(t *testing.T) {
	r := newTestRepo(t, Options{})
	r.add(t, "amd64", "1.0.0", hashA, Options{})
	c := r.client(t, ClientConfig{})
	rel, err := c.Latest(context.Background(), "amd64")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Latest(ctx, "amd64"); !errors.Is(err, context.Canceled) {
		t.Errorf("Latest canceled: %v", err)
	}
	if err := c.Fetch(ctx, rel, KindRoot, &bytes.Buffer{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Fetch canceled: %v", err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// BenchmarkFetch reports Fetch's allocations for a target of a little over
// 1 MiB: bytes allocated per op well under the target's size show that
// Fetch streams rather than buffers.
func BenchmarkFetch(b *testing.B) {
	r := newTestRepo(b, Options{})
	r.add(b, "amd64", "1.0.0", hashA, Options{})
	c := r.client(b, ClientConfig{})
	rel, err := c.Latest(context.Background(), "amd64")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(rel.Targets[KindRoot].Length)
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Fetch(context.Background(), rel, KindRoot, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}

func TestFind(t *testing.T) {
	ctx := context.Background()
	r := newTestRepo(t, Options{})
	r.add(t, "amd64", "1.9.0", hashA, Options{})
	r.add(t, "amd64", "1.10", hashB, Options{})
	r.add(t, "arm64", "2.0.0", hashA, Options{})
	c := r.client(t, ClientConfig{Running: "1.9.0"})
	rel, err := c.Find(ctx, "amd64", "v1.10.0")
	if err != nil {
		t.Fatal(err)
	}
	if rel.Version.String() != "1.10" || rel.RootHash != hashB || rel.Targets[KindUKI].Path != "amd64/1.10/berth.efi" {
		t.Errorf("Find(amd64, v1.10.0) = %s root hash %s UKI %s", rel.Version, rel.RootHash, rel.Targets[KindUKI].Path)
	}
	// Not in the repository: the error names the newest there is.
	_, err = c.Find(ctx, "amd64", "1.11")
	mustErr(t, err, ErrNoRelease, "1.11", "up to 1.10", r.srv.URL)
	// Another architecture's release is not this one's.
	_, err = c.Find(ctx, "amd64", "2.0.0")
	mustErr(t, err, ErrNoRelease, "2.0.0")
	// Older than the running version: only with AllowDowngrade.
	_, err = r.client(t, ClientConfig{Running: "1.10"}).Find(ctx, "amd64", "1.9.0")
	mustErr(t, err, ErrDowngrade, "1.9.0", "running 1.10")
	old, err := r.client(t, ClientConfig{Running: "1.10", AllowDowngrade: true}).Find(ctx, "amd64", "1.9.0")
	if err != nil || old.RootHash != hashA {
		t.Errorf("Find older with AllowDowngrade = %s, %v; want 1.9.0", old.Version, err)
	}
	_, err = c.Find(ctx, "amd64", "1.10-rc1")
	mustErr(t, err, ErrVersion, "1.10-rc1")
}
