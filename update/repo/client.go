package repo

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/theupdateframework/go-tuf/v2/metadata"
	"github.com/theupdateframework/go-tuf/v2/metadata/config"
	"github.com/theupdateframework/go-tuf/v2/metadata/updater"
)

// Refusals. Every error of Latest and Fetch that one of these describes
// wraps it, beside go-tuf's own error where there is one.
var (
	// ErrExpired: metadata is past its expiry (or the node's clock is wrong).
	ErrExpired = errors.New("repository metadata has expired")
	// ErrSignature: metadata is not signed by the keys the trusted root names.
	ErrSignature = errors.New("repository metadata is not signed by the trusted keys")
	// ErrRollback: the repository serves metadata older than the node has seen.
	ErrRollback = errors.New("repository metadata is older than what the node has already seen")
	// ErrCorrupt: a file's length or hash is not what signed metadata says.
	ErrCorrupt = errors.New("length or hash does not match the signed metadata")
	// ErrNoRelease: the repository has no release for the architecture.
	ErrNoRelease = errors.New("no release for this architecture")
	// ErrDowngrade: the release is older than the running version.
	ErrDowngrade = errors.New("the release is older than the running version")
	// ErrIncomplete: a release lacks one of its files or its files disagree.
	ErrIncomplete = errors.New("the release is incomplete or inconsistent")
)

// Metadata size limits: far above what the builder writes (targets grows
// by about 700 bytes a release), far below what could exhaust a node.
const (
	rootMaxLength      = 512 << 10
	timestampMaxLength = 16 << 10
	snapshotMaxLength  = 64 << 10
	targetsMaxLength   = 8 << 20
)

// ClientConfig is what a node needs to read a repository.
type ClientConfig struct {
	// TrustedRoot is the root.json the node image carries.
	TrustedRoot []byte
	// MetadataURL is the repository's base URL; TargetsURL where its
	// targets/ is, MetadataURL + "/targets" when empty.
	MetadataURL, TargetsURL string
	// CacheDir keeps the metadata last trusted (rotated roots, the last
	// timestamp, snapshot and targets), which is what lets the client
	// refuse a repository rolled back to older metadata. The node's
	// /var/lib/berth/update, say.
	CacheDir string
	// Running is the version the node runs now; Latest refuses a release
	// older than it (ErrDowngrade) unless AllowDowngrade. It must be a
	// release version (see Version) unless AllowDowngrade.
	Running        string
	AllowDowngrade bool
	// HTTPClient does every request; nil means http.DefaultClient. Requests
	// carry the context passed to Latest and Fetch.
	HTTPClient *http.Client
	// Now is the clock metadata expiry is checked against; nil means
	// time.Now.
	Now func() time.Time
	// Log receives what the client does; nil means slog.Default().
	Log *slog.Logger
}

// Client reads one repository. Its methods may be called from one
// goroutine at a time.
type Client struct {
	cfg     ClientConfig
	running Version
	log     *slog.Logger
	hc      *http.Client
}

// NewClient checks cfg; it reaches nothing.
func NewClient(cfg ClientConfig) (*Client, error) {
	if len(cfg.TrustedRoot) == 0 {
		return nil, errors.New("update repository client: no trusted root.json")
	}
	if _, err := metadata.Root().FromBytes(cfg.TrustedRoot); err != nil {
		return nil, fmt.Errorf("update repository client: the trusted root.json: %w", err)
	}
	for _, u := range []struct{ name, v string }{{"metadata URL", cfg.MetadataURL}, {"targets URL", cfg.TargetsURL}} {
		if u.v == "" && u.name == "targets URL" {
			continue
		}
		p, err := url.Parse(u.v)
		if err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" {
			return nil, fmt.Errorf("update repository client: %s %q is not an http(s) URL", u.name, u.v)
		}
	}
	if cfg.TargetsURL == "" {
		cfg.TargetsURL = strings.TrimSuffix(cfg.MetadataURL, "/") + "/targets"
	}
	if cfg.CacheDir == "" {
		return nil, errors.New("update repository client: no cache directory")
	}
	c := &Client{cfg: cfg, log: cfg.Log, hc: cfg.HTTPClient}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.hc == nil {
		c.hc = http.DefaultClient
	}
	if cfg.Running != "" || !cfg.AllowDowngrade {
		v, err := ParseVersion(cfg.Running)
		if err != nil {
			return nil, fmt.Errorf("update repository client: the running version: %w (only AllowDowngrade updates a node that runs no release)", err)
		}
		c.running = v
	}
	return c, nil
}

// Target is one file of a release, as the targets role signed it.
type Target struct {
	Path   string
	Length int64
	Hashes map[string][]byte
}

// Release is a release the repository's signed metadata lists.
type Release struct {
	Arch     string
	Version  Version
	RootHash string
	Targets  map[Kind]Target
}

// Latest refreshes the repository's metadata (the whole TUF client
// workflow: root rotation, timestamp, snapshot, targets, each checked for
// signatures, versions and expiry) and returns the newest release for arch.
// It is the running version itself when the node is up to date; the caller
// compares. A newest release older than the running version is refused
// (ErrDowngrade) unless AllowDowngrade.
func (c *Client) Latest(ctx context.Context, arch string) (Release, error) {
	what := fmt.Sprintf("finding the newest %s release in the repository at %s", arch, c.cfg.MetadataURL)
	releases, err := c.releases(ctx, arch)
	if err != nil {
		return Release{}, fmt.Errorf("%s: %w", what, err)
	}
	var newest *Release
	for _, r := range releases {
		if newest == nil || r.Version.Compare(newest.Version) > 0 {
			newest = r
		}
	}
	if newest == nil {
		return Release{}, fmt.Errorf("%s: %w", what, ErrNoRelease)
	}
	if err := complete(newest); err != nil {
		return Release{}, fmt.Errorf("%s: %w", what, err)
	}
	if c.running.parts != nil && newest.Version.Compare(c.running) < 0 {
		if !c.cfg.AllowDowngrade {
			return Release{}, fmt.Errorf("%s: %w: newest is %s, running %s", what, ErrDowngrade, newest.Version, c.running)
		}
		c.log.Warn("update repository: downgrade allowed", "repository", c.cfg.MetadataURL, "arch", arch, "newest", newest.Version.String(), "running", c.running.String())
	}
	return *newest, nil
}

// Find refreshes the repository's metadata as Latest does and returns
// the release of arch with version (compared as versions: "v1.2" finds
// "1.2.0"). A version older than the running one is refused
// (ErrDowngrade) unless AllowDowngrade; one the repository does not list
// is ErrNoRelease, naming the newest it does.
func (c *Client) Find(ctx context.Context, arch, version string) (Release, error) {
	what := fmt.Sprintf("finding %s release %s in the repository at %s", arch, version, c.cfg.MetadataURL)
	want, err := ParseVersion(version)
	if err != nil {
		return Release{}, fmt.Errorf("%s: %w", what, err)
	}
	releases, err := c.releases(ctx, arch)
	if err != nil {
		return Release{}, fmt.Errorf("%s: %w", what, err)
	}
	var found, newest *Release
	for _, r := range releases {
		if r.Version.Compare(want) == 0 {
			found = r
		}
		if newest == nil || r.Version.Compare(newest.Version) > 0 {
			newest = r
		}
	}
	if found == nil {
		if newest == nil {
			return Release{}, fmt.Errorf("%s: %w", what, ErrNoRelease)
		}
		return Release{}, fmt.Errorf("%s: %w: the repository lists %s releases up to %s", what, ErrNoRelease, arch, newest.Version)
	}
	if err := complete(found); err != nil {
		return Release{}, fmt.Errorf("%s: %w", what, err)
	}
	if c.running.parts != nil && found.Version.Compare(c.running) < 0 && !c.cfg.AllowDowngrade {
		return Release{}, fmt.Errorf("%s: %w: running %s", what, ErrDowngrade, c.running)
	}
	return *found, nil
}

// complete checks r has every kind of target.
func complete(r *Release) error {
	for _, k := range Kinds() {
		if _, ok := r.Targets[k]; !ok {
			return fmt.Errorf("release %s: %w: no %s target", r.Version, ErrIncomplete, k)
		}
	}
	return nil
}

// releases refreshes the metadata and gathers arch's releases from the
// targets role, checking each target's custom metadata against its path.
func (c *Client) releases(ctx context.Context, arch string) (map[string]*Release, error) {
	if err := checkArch(arch); err != nil {
		return nil, err
	}
	up, err := c.updater(ctx)
	if err != nil {
		return nil, err
	}
	if err := up.Refresh(); err != nil {
		return nil, classify(err)
	}
	releases := map[string]*Release{}
	for path, tf := range up.GetTopLevelTargets() {
		cu, err := customOf(tf)
		if err != nil {
			return nil, fmt.Errorf("target %s: %w", path, err)
		}
		if want := targetPath(cu.Arch, cu.Version, cu.Kind); path != want {
			return nil, fmt.Errorf("target %s: %w: its metadata says %s", path, ErrMetadata, want)
		}
		if cu.Arch != arch {
			continue
		}
		v, _ := ParseVersion(cu.Version)
		r := releases[cu.Version]
		if r == nil {
			r = &Release{Arch: arch, Version: v, RootHash: cu.RootHash, Targets: map[Kind]Target{}}
			releases[cu.Version] = r
		}
		if r.RootHash != cu.RootHash {
			return nil, fmt.Errorf("release %s: %w: its files name root hashes %s and %s", cu.Version, ErrIncomplete, r.RootHash, cu.RootHash)
		}
		hashes := map[string][]byte{}
		for alg, h := range tf.Hashes {
			hashes[alg] = append([]byte(nil), h...)
		}
		r.Targets[cu.Kind] = Target{Path: path, Length: tf.Length, Hashes: hashes}
	}
	return releases, nil
}

// updater is a go-tuf Updater for one refresh (an Updater refreshes once),
// starting from the newest root the node trusts: the cached one when it has
// rotated past the image's.
func (c *Client) updater(ctx context.Context) (*updater.Updater, error) {
	mdDir := filepath.Join(c.cfg.CacheDir, "metadata")
	root := c.cfg.TrustedRoot
	if cached, err := os.ReadFile(filepath.Join(mdDir, "root.json")); err == nil {
		if newer(cached, root) {
			root = cached
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("reading the cached root: %w", err)
	}
	cfg, err := config.New(c.cfg.MetadataURL, root)
	if err != nil {
		return nil, err
	}
	cfg.RemoteTargetsURL = c.cfg.TargetsURL
	cfg.LocalMetadataDir = mdDir
	cfg.LocalTargetsDir = filepath.Join(c.cfg.CacheDir, "targets")
	cfg.RootMaxLength, cfg.TimestampMaxLength = rootMaxLength, timestampMaxLength
	cfg.SnapshotMaxLength, cfg.TargetsMaxLength = snapshotMaxLength, targetsMaxLength
	cfg.Fetcher = fetcher{ctx: ctx, hc: c.hc}
	up, err := updater.New(cfg)
	if err != nil {
		return nil, classify(err)
	}
	if c.cfg.Now != nil {
		up.UnsafeSetRefTime(c.cfg.Now().UTC())
	}
	return up, nil
}

// newer reports whether root a is a later version than root b; a cached
// root that does not parse is ignored (the image's is used, and go-tuf
// overwrites the cache).
func newer(a, b []byte) bool {
	ra, err := metadata.Root().FromBytes(a)
	if err != nil {
		return false
	}
	rb, err := metadata.Root().FromBytes(b)
	if err != nil {
		return true
	}
	return ra.Signed.Version > rb.Signed.Version
}

// classify wraps a go-tuf error with the refusal it is.
func classify(err error) error {
	switch {
	case errors.Is(err, &metadata.ErrExpiredMetadata{}):
		return fmt.Errorf("%w: %w", ErrExpired, err)
	case errors.Is(err, &metadata.ErrUnsignedMetadata{}):
		return fmt.Errorf("%w: %w", ErrSignature, err)
	case errors.Is(err, &metadata.ErrBadVersionNumber{}):
		return fmt.Errorf("%w: %w", ErrRollback, err)
	case errors.Is(err, &metadata.ErrLengthOrHashMismatch{}), errors.Is(err, &metadata.ErrDownloadLengthMismatch{}):
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return err
}

// Fetch downloads one of rel's files and writes it to w, streaming: memory
// stays bounded however large the root image. go-tuf's DownloadTarget reads
// a whole target into memory (and caches it on disk), so Fetch does its own
// GET of the consistent-snapshot name and checks the length and every
// SHA-256/SHA-512 hash the targets role signed as the bytes go by.
//
// w receives the bytes before they are verified: when Fetch returns an
// error, whatever w holds must be thrown away (the caller writes into the
// inactive slot and switches to it only after Fetch returns nil).
func (c *Client) Fetch(ctx context.Context, rel Release, kind Kind, w io.Writer) error {
	t, ok := rel.Targets[kind]
	if !ok {
		return fmt.Errorf("fetching the %s of release %s/%s: %w: no %s target", kind, rel.Arch, rel.Version, ErrIncomplete, kind)
	}
	sum := t.Hashes["sha256"]
	u := strings.TrimSuffix(c.cfg.TargetsURL, "/") + "/" + consistentName(t.Path, sum)
	what := fmt.Sprintf("fetching target %s from %s", t.Path, u)
	if len(sum) != sha256.Size {
		return fmt.Errorf("%s: %w: the signed metadata has no sha256 hash", what, ErrMetadata)
	}
	hs := map[string]hash.Hash{}
	for alg := range t.Hashes {
		switch alg {
		case "sha256":
			hs[alg] = sha256.New()
		case "sha512":
			hs[alg] = sha512.New()
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %s", what, resp.Status)
	}
	if resp.ContentLength > t.Length {
		return fmt.Errorf("%s: %w: the server announces %d bytes, the signed length is %d", what, ErrCorrupt, resp.ContentLength, t.Length)
	}
	ws := []io.Writer{w}
	for _, h := range hs {
		ws = append(ws, h)
	}
	// One byte past the signed length is enough to know it is too long.
	n, err := io.Copy(io.MultiWriter(ws...), io.LimitReader(resp.Body, t.Length+1))
	if err != nil {
		return fmt.Errorf("%s: after %d bytes: %w", what, n, err)
	}
	if n != t.Length {
		return fmt.Errorf("%s: %w: got %s bytes, the signed length is %d", what, ErrCorrupt, lengthWord(n, t.Length), t.Length)
	}
	for alg, h := range hs {
		if got := h.Sum(nil); subtle.ConstantTimeCompare(got, t.Hashes[alg]) != 1 {
			return fmt.Errorf("%s: %w: %s is %s, the signed one is %s", what, ErrCorrupt, alg, hex.EncodeToString(got), hex.EncodeToString(t.Hashes[alg]))
		}
	}
	return nil
}

func lengthWord(n, want int64) string {
	if n > want {
		return "more than " + strconv.FormatInt(want, 10)
	}
	return strconv.FormatInt(n, 10)
}

// consistentName is where a consistent-snapshot repository keeps a target:
// "<dir>/<sha256>.<name>".
func consistentName(path string, sum []byte) string {
	dir, name := "", path
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		dir, name = path[:i+1], path[i+1:]
	}
	return dir + hex.EncodeToString(sum) + "." + name
}

// fetcher is go-tuf's metadata fetcher with a context: the default one
// uses context.Background, so a node shutting down could not stop it.
type fetcher struct {
	ctx context.Context
	hc  *http.Client
}

func (f fetcher) DownloadFile(u string, maxLength int64, _ time.Duration) ([]byte, error) {
	req, err := http.NewRequestWithContext(f.ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := f.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// go-tuf stops looking for a newer root on this error's 404.
		return nil, &metadata.ErrDownloadHTTP{StatusCode: resp.StatusCode, URL: u}
	}
	if resp.ContentLength > maxLength {
		return nil, &metadata.ErrDownloadLengthMismatch{Msg: fmt.Sprintf("%s: %d bytes announced, at most %d expected", u, resp.ContentLength, maxLength)}
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxLength+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", u, err)
	}
	if int64(len(data)) > maxLength {
		return nil, &metadata.ErrDownloadLengthMismatch{Msg: fmt.Sprintf("%s: more than %d bytes", u, maxLength)}
	}
	return data, nil
}
