package repo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/berth-node/berth/internal/fsutil"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/theupdateframework/go-tuf/v2/metadata"
)

// Default expiries. Every Add and Refresh re-signs targets, snapshot and
// timestamp, so these bound how long a repository may go without one.
const (
	// DefaultRootExpiry: the root key is an offline key kept with the
	// Secure Boot keys; a year between renewals. Add and Refresh renew root
	// themselves when it would expire before the metadata they sign.
	DefaultRootExpiry = 365 * 24 * time.Hour
	// DefaultTargetsExpiry and DefaultSnapshotExpiry: a quarter, longer
	// than any sensible gap between releases or refreshes.
	DefaultTargetsExpiry  = 90 * 24 * time.Hour
	DefaultSnapshotExpiry = 90 * 24 * time.Hour
	// DefaultTimestampExpiry bounds a freeze attack: a mirror or an
	// attacker in the path can keep a node on old (validly signed) metadata,
	// away from a security release, for at most this long. A week, not a
	// day: the keys sit on a build host, not on an online signer, and when
	// the timestamp expires nodes stop updating (they keep running), so the
	// cost of a missed refresh is a fleet that cannot update. A repository
	// with a daily `Refresh` job can set a day.
	DefaultTimestampExpiry = 7 * 24 * time.Hour
)

// ErrRepoExists: Init found a repository already there.
var ErrRepoExists = errors.New("a repository already exists")

// ErrReleaseExists: Add was given a release the repository already holds.
var ErrReleaseExists = errors.New("the release is already in the repository")

// Options tune the builder; the zero value means the defaults.
type Options struct {
	// Now is the clock expiries count from; nil means time.Now.
	Now func() time.Time
	// Expiries; zero means the Default* constant.
	RootExpiry, TargetsExpiry, SnapshotExpiry, TimestampExpiry time.Duration
}

func (o Options) now() time.Time {
	if o.Now != nil {
		return o.Now().UTC()
	}
	return time.Now().UTC()
}

func (o Options) expiry(role string) time.Duration {
	var d, def time.Duration
	switch role {
	case metadata.ROOT:
		d, def = o.RootExpiry, DefaultRootExpiry
	case metadata.TARGETS:
		d, def = o.TargetsExpiry, DefaultTargetsExpiry
	case metadata.SNAPSHOT:
		d, def = o.SnapshotExpiry, DefaultSnapshotExpiry
	default:
		d, def = o.TimestampExpiry, DefaultTimestampExpiry
	}
	if d == 0 {
		return def
	}
	return d
}

// expires is when metadata for role signed now expires, to the second (the
// TUF format has no fractions).
func (o Options) expires(role string) time.Time {
	return o.now().Add(o.expiry(role)).Truncate(time.Second)
}

// state is a repository's current top-level metadata.
type state struct {
	dir       string
	root      *metadata.Metadata[metadata.RootType]
	targets   *metadata.Metadata[metadata.TargetsType]
	snapshot  *metadata.Metadata[metadata.SnapshotType]
	timestamp *metadata.Metadata[metadata.TimestampType]
}

// Init makes a new, empty repository in dir: root, targets, snapshot and
// timestamp, all at version 1, signed with keys. It refuses a directory that
// already has a root.json (ErrRepoExists).
func Init(ctx context.Context, dir string, keys *Keys, opts Options) error {
	return initRepo(ctx, dir, keys, nil, opts)
}

// InitFrom is Init starting from trustedRoot, the root.json that node
// images carry (TrustedRoot made it, beside the keys): the repository's
// 1.root.json is those very bytes, so a node trusts the repository from
// its first version on. trustedRoot must be signed by keys' root key and
// name keys for every role.
func InitFrom(ctx context.Context, dir string, keys *Keys, trustedRoot []byte, opts Options) error {
	if err := CheckTrustedRoot(trustedRoot, keys); err != nil {
		return fmt.Errorf("initialising the repository in %s: %w", dir, err)
	}
	return initRepo(ctx, dir, keys, trustedRoot, opts)
}

func initRepo(ctx context.Context, dir string, keys *Keys, trustedRoot []byte, opts Options) error {
	rootPath := filepath.Join(dir, "root.json")
	if _, err := os.Lstat(rootPath); err == nil {
		return fmt.Errorf("initialising the repository in %s: %w (%s)", dir, ErrRepoExists, rootPath)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("initialising the repository in %s: %w", dir, err)
	}
	s := &state{
		dir:       dir,
		root:      metadata.Root(opts.expires(metadata.ROOT)),
		targets:   metadata.Targets(opts.expires(metadata.TARGETS)),
		snapshot:  metadata.Snapshot(opts.expires(metadata.SNAPSHOT)),
		timestamp: metadata.Timestamp(opts.expires(metadata.TIMESTAMP)),
	}
	s.root.Signed.ConsistentSnapshot = true
	for _, role := range Roles() {
		key, err := keys.publicKey(role)
		if err != nil {
			return fmt.Errorf("initialising the repository in %s: %w", dir, err)
		}
		if err := s.root.Signed.AddKey(key, role); err != nil {
			return fmt.Errorf("initialising the repository in %s: adding the %s key to root: %w", dir, role, err)
		}
	}
	// publish bumps every version; start one lower so the first is 1.
	s.targets.Signed.Version, s.snapshot.Signed.Version, s.timestamp.Signed.Version = 0, 0, 0
	if trustedRoot != nil {
		// Kept byte for byte: re-signing would give other bytes (and,
		// with another clock, another expiry) than the images carry.
		root, err := metadata.Root().FromBytes(trustedRoot)
		if err != nil {
			return fmt.Errorf("initialising the repository in %s: the trusted root: %w", dir, err)
		}
		s.root = root
		if err := s.writeRootBytes(trustedRoot); err != nil {
			return fmt.Errorf("initialising the repository in %s: %w", dir, err)
		}
	} else if err := s.writeRoot(keys); err != nil {
		return fmt.Errorf("initialising the repository in %s: %w", dir, err)
	}
	if err := s.publish(ctx, keys, opts); err != nil {
		return fmt.Errorf("initialising the repository in %s: %w", dir, err)
	}
	return nil
}

// NewRelease is what Add publishes: for an architecture and version, the
// UKI and root image files on the host, and the root image's dm-verity
// root hash.
type NewRelease struct {
	Arch, Version, RootHash string
	UKI, Root               string
}

// Add publishes a release: it copies the UKI and the root image into the
// repository's targets/ under their SHA-256, lists them in targets with
// their custom metadata, and re-signs targets, snapshot and timestamp with
// new versions (and root, when it would expire before them). A version the
// repository already holds for the architecture is refused
// (ErrReleaseExists): nodes would not know which of two builds to take.
func Add(ctx context.Context, dir string, keys *Keys, rel NewRelease, opts Options) error {
	what := fmt.Sprintf("adding release %s/%s to the repository in %s", rel.Arch, rel.Version, dir)
	for _, k := range Kinds() {
		if err := (Custom{Version: rel.Version, Arch: rel.Arch, RootHash: rel.RootHash, Kind: k}).validate(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	s, err := load(dir, keys)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	newV, _ := ParseVersion(rel.Version)
	for path, tf := range s.targets.Signed.Targets {
		c, err := customOf(tf)
		if err != nil {
			return fmt.Errorf("%s: target %s: %w", what, path, err)
		}
		if c.Arch != rel.Arch {
			continue
		}
		if v, _ := ParseVersion(c.Version); v.Compare(newV) == 0 {
			return fmt.Errorf("%s: %w as %s", what, ErrReleaseExists, path)
		}
	}
	src := map[Kind]string{KindUKI: rel.UKI, KindRoot: rel.Root}
	for _, k := range Kinds() {
		tf, err := s.addTarget(ctx, src[k], Custom{Version: rel.Version, Arch: rel.Arch, RootHash: rel.RootHash, Kind: k})
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		s.targets.Signed.Targets[tf.Path] = tf
	}
	if err := s.publish(ctx, keys, opts); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// Refresh re-signs targets, snapshot and timestamp with new versions and
// new expiries, changing nothing else: what a repository without releases
// for a while needs before its timestamp expires.
func Refresh(ctx context.Context, dir string, keys *Keys, opts Options) error {
	s, err := load(dir, keys)
	if err != nil {
		return fmt.Errorf("refreshing the repository in %s: %w", dir, err)
	}
	if err := s.publish(ctx, keys, opts); err != nil {
		return fmt.Errorf("refreshing the repository in %s: %w", dir, err)
	}
	return nil
}

// load reads dir's current metadata, checks that it is signed as its root
// says, and that keys are the keys root names: the builder must never sign
// metadata its own root does not trust, nor build on metadata it did not sign.
func load(dir string, keys *Keys) (*state, error) {
	s := &state{dir: dir}
	var err error
	if s.root, err = metadata.Root().FromFile(filepath.Join(dir, "root.json")); err != nil {
		return nil, fmt.Errorf("reading root.json: %w", err)
	}
	if err := s.root.VerifyDelegate(metadata.ROOT, s.root); err != nil {
		return nil, fmt.Errorf("root.json: %w", err)
	}
	for _, role := range Roles() {
		key, err := keys.publicKey(role)
		if err != nil {
			return nil, err
		}
		id, err := key.ID()
		if err != nil {
			return nil, fmt.Errorf("the %s key: %w", role, err)
		}
		r := s.root.Signed.Roles[role]
		if r == nil || len(r.KeyIDs) != 1 || r.KeyIDs[0] != id {
			return nil, fmt.Errorf("the %s key (id %s) is not the one root.json trusts for %s: these keys belong to another repository", role, id, role)
		}
	}
	if s.timestamp, err = metadata.Timestamp().FromFile(filepath.Join(dir, "timestamp.json")); err != nil {
		return nil, fmt.Errorf("reading timestamp.json: %w", err)
	}
	if err := s.root.VerifyDelegate(metadata.TIMESTAMP, s.timestamp); err != nil {
		return nil, fmt.Errorf("timestamp.json: %w", err)
	}
	snapMeta := s.timestamp.Signed.Meta["snapshot.json"]
	if snapMeta == nil {
		return nil, fmt.Errorf("timestamp.json names no snapshot.json")
	}
	snapName := strconv.FormatInt(snapMeta.Version, 10) + ".snapshot.json"
	if s.snapshot, err = metadata.Snapshot().FromFile(filepath.Join(dir, snapName)); err != nil {
		return nil, fmt.Errorf("reading %s: %w", snapName, err)
	}
	if err := s.root.VerifyDelegate(metadata.SNAPSHOT, s.snapshot); err != nil {
		return nil, fmt.Errorf("%s: %w", snapName, err)
	}
	tMeta := s.snapshot.Signed.Meta["targets.json"]
	if tMeta == nil {
		return nil, fmt.Errorf("%s names no targets.json", snapName)
	}
	tName := strconv.FormatInt(tMeta.Version, 10) + ".targets.json"
	if s.targets, err = metadata.Targets().FromFile(filepath.Join(dir, tName)); err != nil {
		return nil, fmt.Errorf("reading %s: %w", tName, err)
	}
	if err := s.root.VerifyDelegate(metadata.TARGETS, s.targets); err != nil {
		return nil, fmt.Errorf("%s: %w", tName, err)
	}
	return s, nil
}

// customOf parses a listed target's custom metadata.
func customOf(tf *metadata.TargetFiles) (Custom, error) {
	if tf.Custom == nil {
		return Custom{}, fmt.Errorf("%w: no custom metadata", ErrMetadata)
	}
	return ParseCustom(*tf.Custom)
}

// addTarget copies src into targets/ as <dir>/<sha256>.<name>, the name a
// consistent-snapshot client asks for, and returns its target entry.
func (s *state) addTarget(ctx context.Context, src string, c Custom) (*metadata.TargetFiles, error) {
	path := targetPath(c.Arch, c.Version, c.Kind)
	destDir := filepath.Join(s.dir, "targets", filepath.FromSlash(filepath.Dir(path)))
	if err := os.MkdirAll(destDir, 0o755); err != nil {
		return nil, fmt.Errorf("copying the %s %s: %w", c.Kind, src, err)
	}
	sum, n, err := copyHashed(ctx, src, destDir, c.Kind.fileName())
	if err != nil {
		return nil, fmt.Errorf("copying the %s %s: %w", c.Kind, src, err)
	}
	raw, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("custom metadata of %s: %w", path, err)
	}
	msg := json.RawMessage(raw)
	return &metadata.TargetFiles{
		Length: n,
		Hashes: metadata.Hashes{"sha256": sum},
		Custom: &msg,
		Path:   path,
	}, nil
}

// copyHashed copies src into destDir in one pass, hashing as it goes, and
// renames the copy to <sha256>.<name> once it is complete and synced.
func copyHashed(ctx context.Context, src, destDir, name string) (sum []byte, n int64, err error) {
	in, err := os.Open(src)
	if err != nil {
		return nil, 0, err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(destDir, "."+name+".tmp-*")
	if err != nil {
		return nil, 0, err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	if n, err = io.Copy(io.MultiWriter(tmp, h), ctxReader{ctx, in}); err != nil {
		return nil, 0, err
	}
	if err = tmp.Chmod(0o644); err != nil {
		return nil, 0, err
	}
	if err = tmp.Sync(); err != nil {
		return nil, 0, err
	}
	if err = tmp.Close(); err != nil {
		return nil, 0, err
	}
	sum = h.Sum(nil)
	if err = os.Rename(tmp.Name(), filepath.Join(destDir, hex.EncodeToString(sum)+"."+name)); err != nil {
		return nil, 0, err
	}
	return sum, n, syncDir(destDir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ctxReader stops a long copy when its context is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// publish signs new versions of targets, snapshot and timestamp (and of
// root, when it would expire before any of them) and writes them in the
// order a client reads them last to first, so that timestamp.json, the one
// name that changes, points only at files already in place.
func (s *state) publish(ctx context.Context, keys *Keys, opts Options) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.targets.Signed.Version++
	s.targets.Signed.Expires = opts.expires(metadata.TARGETS)
	s.snapshot.Signed.Version++
	s.snapshot.Signed.Expires = opts.expires(metadata.SNAPSHOT)
	s.timestamp.Signed.Version++
	s.timestamp.Signed.Expires = opts.expires(metadata.TIMESTAMP)

	latest := s.targets.Signed.Expires
	for _, t := range []time.Time{s.snapshot.Signed.Expires, s.timestamp.Signed.Expires} {
		if t.After(latest) {
			latest = t
		}
	}
	if s.root.Signed.Expires.Before(latest) {
		s.root.Signed.Version++
		s.root.Signed.Expires = opts.expires(metadata.ROOT)
		if err := s.writeRoot(keys); err != nil {
			return err
		}
	}

	tData, err := signed(s.targets, keys.Targets)
	if err != nil {
		return fmt.Errorf("signing targets: %w", err)
	}
	tName := strconv.FormatInt(s.targets.Signed.Version, 10) + ".targets.json"
	s.snapshot.Signed.Meta["targets.json"] = metaFile(s.targets.Signed.Version, tData)
	sData, err := signed(s.snapshot, keys.Snapshot)
	if err != nil {
		return fmt.Errorf("signing snapshot: %w", err)
	}
	sName := strconv.FormatInt(s.snapshot.Signed.Version, 10) + ".snapshot.json"
	s.timestamp.Signed.Meta["snapshot.json"] = metaFile(s.snapshot.Signed.Version, sData)
	tsData, err := signed(s.timestamp, keys.Timestamp)
	if err != nil {
		return fmt.Errorf("signing timestamp: %w", err)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{tName, tData}, {sName, sData}, {"timestamp.json", tsData}} {
		if err := fsutil.WriteFileAtomic(filepath.Join(s.dir, f.name), f.data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// writeRoot signs root and writes it as <version>.root.json, which clients
// walk to rotate, and as root.json, what a node image embeds.
func (s *state) writeRoot(keys *Keys) error {
	data, err := signed(s.root, keys.Root)
	if err != nil {
		return fmt.Errorf("signing root: %w", err)
	}
	return s.writeRootBytes(data)
}

// writeRootBytes writes data, root as signed, under both names.
func (s *state) writeRootBytes(data []byte) error {
	name := strconv.FormatInt(s.root.Signed.Version, 10) + ".root.json"
	for _, n := range []string{name, "root.json"} {
		if err := fsutil.WriteFileAtomic(filepath.Join(s.dir, n), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// metaFile describes a metadata file by version, length and SHA-256, so a
// client bounds its download and checks it before parsing.
func metaFile(version int64, data []byte) *metadata.MetaFiles {
	sum := sha256.Sum256(data)
	return &metadata.MetaFiles{Version: version, Length: int64(len(data)), Hashes: metadata.Hashes{"sha256": sum[:]}}
}

// signer is what signed needs of a metadata.Metadata.
type signer interface {
	ClearSignatures()
	Sign(signature.Signer) (*metadata.Signature, error)
	ToBytes(pretty bool) ([]byte, error)
}

// signed replaces md's signatures with one by key and returns its bytes.
func signed(md signer, key []byte) ([]byte, error) {
	sv, err := signature.LoadED25519Signer(key)
	if err != nil {
		return nil, err
	}
	md.ClearSignatures()
	if _, err := md.Sign(sv); err != nil {
		return nil, err
	}
	return md.ToBytes(true)
}
