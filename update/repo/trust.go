package repo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/berth-node/berth/internal/fsutil"
	"github.com/theupdateframework/go-tuf/v2/metadata"
)

// TrustedRootFile is the name of the trusted root.json in a key directory,
// beside the keys (tuf-<role>.pem): the one file made from them that is
// not secret. Node images carry it, and a repository made with InitFrom
// starts from it, so every image built with these keys trusts every
// repository they sign.
const TrustedRootFile = "root.json"

// TrustedRootExpiry is how long the trusted root is valid. Long: an image
// carries it for its whole life, and a repository renews its root itself
// (Add, Refresh) long before then; a node follows the renewals (each
// signed by the root key) from the root it carries.
const TrustedRootExpiry = 5 * 365 * 24 * time.Hour

// TrustedRoot signs a version 1 root.json naming keys for every role,
// expiring TrustedRootExpiry after opts' clock (opts.RootExpiry when set).
func TrustedRoot(keys *Keys, opts Options) ([]byte, error) {
	if opts.RootExpiry == 0 {
		opts.RootExpiry = TrustedRootExpiry
	}
	root := metadata.Root(opts.expires(metadata.ROOT))
	root.Signed.ConsistentSnapshot = true
	for _, role := range Roles() {
		key, err := keys.publicKey(role)
		if err != nil {
			return nil, fmt.Errorf("making the trusted root: %w", err)
		}
		if err := root.Signed.AddKey(key, role); err != nil {
			return nil, fmt.Errorf("making the trusted root: adding the %s key: %w", role, err)
		}
	}
	data, err := signed(root, keys.Root)
	if err != nil {
		return nil, fmt.Errorf("making the trusted root: signing: %w", err)
	}
	return data, nil
}

// ParseTrustedRoot checks that data is a TUF root.json signed by the keys
// it names for root, as a node's client needs it: what an image builder
// checks before putting it in an image, with no keys at hand.
func ParseTrustedRoot(data []byte) (*metadata.Metadata[metadata.RootType], error) {
	root, err := metadata.Root().FromBytes(data)
	if err != nil {
		return nil, fmt.Errorf("not a TUF root.json: %w", err)
	}
	if err := root.VerifyDelegate(metadata.ROOT, root); err != nil {
		return nil, fmt.Errorf("root.json is not signed by its own root key: %w", err)
	}
	if !root.Signed.ConsistentSnapshot {
		return nil, errors.New("root.json does not use consistent snapshots, which berth's repositories do")
	}
	for _, role := range Roles() {
		if r := root.Signed.Roles[role]; r == nil || len(r.KeyIDs) == 0 {
			return nil, fmt.Errorf("root.json names no %s key", role)
		}
	}
	return root, nil
}

// CheckTrustedRoot checks that data is a root.json signed by keys' root
// key that names keys for every role: a repository started from it is
// signed by keys, and an image that carries it trusts that repository.
func CheckTrustedRoot(data []byte, keys *Keys) error {
	root, err := ParseTrustedRoot(data)
	if err != nil {
		return fmt.Errorf("the trusted root: %w", err)
	}
	for _, role := range Roles() {
		key, err := keys.publicKey(role)
		if err != nil {
			return fmt.Errorf("the trusted root: %w", err)
		}
		id, err := key.ID()
		if err != nil {
			return fmt.Errorf("the trusted root: the %s key: %w", role, err)
		}
		if r := root.Signed.Roles[role]; len(r.KeyIDs) != 1 || r.KeyIDs[0] != id {
			return fmt.Errorf("the trusted root names other %s keys than these (id %s): it belongs to another key set", role, id)
		}
	}
	return nil
}

// KeySet is a key directory's content: the keys and the trusted root.
type KeySet struct {
	Keys *Keys
	// TrustedRoot is the root.json in the directory, as its bytes.
	TrustedRoot []byte
	// Created says SetUpKeys made new keys; Completed that it kept the
	// keys and only wrote a missing trusted root.
	Created, Completed bool
}

// SetUpKeys makes a repository key set in dir (`make keys`), or keeps the
// one there: four keys (Keys.Write) and the trusted root.json signed by
// the root key (TrustedRoot). An existing set is loaded and checked, and a
// missing root.json is made from its keys; some key files but not all, or
// a root.json of other keys, is an error. force replaces an existing set
// with a new one: a new repository, which nodes that carry the old root
// refuse.
func SetUpKeys(dir string, force bool, opts Options) (*KeySet, error) {
	rootPath := filepath.Join(dir, TrustedRootFile)
	have, err := anyKeyFile(dir)
	if err != nil {
		return nil, err
	}
	if have && !force {
		keys, err := LoadKeys(dir)
		if err != nil {
			return nil, fmt.Errorf("repository keys in %s: %w (force makes a new set)", dir, err)
		}
		data, err := os.ReadFile(rootPath)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if data, err = TrustedRoot(keys, opts); err != nil {
				return nil, err
			}
			if err := fsutil.WriteFileAtomic(rootPath, data, 0o644); err != nil {
				return nil, fmt.Errorf("writing the trusted root: %w", err)
			}
			return &KeySet{Keys: keys, TrustedRoot: data, Completed: true}, nil
		case err != nil:
			return nil, fmt.Errorf("reading the trusted root: %w", err)
		}
		if err := CheckTrustedRoot(data, keys); err != nil {
			return nil, fmt.Errorf("%s: %w (remove it to make one from the keys)", rootPath, err)
		}
		return &KeySet{Keys: keys, TrustedRoot: data}, nil
	}
	keys, err := GenerateKeys()
	if err != nil {
		return nil, err
	}
	data, err := TrustedRoot(keys, opts)
	if err != nil {
		return nil, err
	}
	if err := keys.Write(dir, force); err != nil {
		return nil, err
	}
	// After the keys: a root.json without its keys would be a trust
	// anchor nobody can sign for.
	if err := fsutil.WriteFileAtomic(rootPath, data, 0o644); err != nil {
		return nil, fmt.Errorf("writing the trusted root: %w", err)
	}
	return &KeySet{Keys: keys, TrustedRoot: data, Created: true}, nil
}

// anyKeyFile says whether dir holds any of the four key files.
func anyKeyFile(dir string) (bool, error) {
	for _, role := range Roles() {
		if _, err := os.Lstat(keyFile(dir, role)); err == nil {
			return true, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("repository keys in %s: %w", dir, err)
		}
	}
	return false, nil
}
