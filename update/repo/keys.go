package repo

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/berth-node/berth/internal/fsutil"
	"github.com/theupdateframework/go-tuf/v2/metadata"
)

// ErrKeysExist: a directory already holds repository keys.
var ErrKeysExist = errors.New("repository keys already exist")

// Roles are TUF's four top-level roles, in the order their key files are
// written and loaded.
func Roles() []string {
	return []string{metadata.ROOT, metadata.TARGETS, metadata.SNAPSHOT, metadata.TIMESTAMP}
}

// Keys are a repository's signing keys, one ed25519 key per top-level role.
type Keys struct {
	Root, Targets, Snapshot, Timestamp ed25519.PrivateKey
}

// keyFile is the file a role's key is kept in.
func keyFile(dir, role string) string { return filepath.Join(dir, "tuf-"+role+".pem") }

func (k *Keys) byRole(role string) *ed25519.PrivateKey {
	switch role {
	case metadata.ROOT:
		return &k.Root
	case metadata.TARGETS:
		return &k.Targets
	case metadata.SNAPSHOT:
		return &k.Snapshot
	case metadata.TIMESTAMP:
		return &k.Timestamp
	}
	return nil
}

// GenerateKeys makes four new ed25519 keys.
func GenerateKeys() (*Keys, error) {
	k := &Keys{}
	for _, role := range Roles() {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("generating the %s key: %w", role, err)
		}
		*k.byRole(role) = priv
	}
	return k, nil
}

// Write saves the keys in dir as tuf-<role>.pem (PKCS #8 PEM, mode 0600),
// creating dir with mode 0700. If any of the four files is already there it
// writes nothing and fails with ErrKeysExist, unless force: new keys are a
// new repository, and nodes that trust the old root refuse it.
func (k *Keys) Write(dir string, force bool) error {
	if !force {
		for _, role := range Roles() {
			p := keyFile(dir, role)
			if _, err := os.Lstat(p); err == nil {
				return fmt.Errorf("writing repository keys to %s: %s: %w (force replaces them; nodes that trust the old root.json then refuse the repository)", dir, p, ErrKeysExist)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("writing repository keys to %s: %w", dir, err)
			}
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("writing repository keys: %w", err)
	}
	for _, role := range Roles() {
		priv := *k.byRole(role)
		if len(priv) != ed25519.PrivateKeySize {
			return fmt.Errorf("writing repository keys to %s: no %s key", dir, role)
		}
		der, err := x509.MarshalPKCS8PrivateKey(priv)
		if err != nil {
			return fmt.Errorf("writing the %s key: %w", role, err)
		}
		data := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
		if err := fsutil.WriteFileAtomic(keyFile(dir, role), data, 0o600); err != nil {
			return fmt.Errorf("writing the %s key: %w", role, err)
		}
	}
	return nil
}

// LoadKeys reads the four keys Write saved in dir. A key file that others
// than its owner may read is refused: it has been exposed, or is about to be.
func LoadKeys(dir string) (*Keys, error) {
	k := &Keys{}
	for _, role := range Roles() {
		p := keyFile(dir, role)
		priv, err := loadKey(p)
		if err != nil {
			return nil, fmt.Errorf("loading the %s key: %w", role, err)
		}
		*k.byRole(role) = priv
	}
	return k, nil
}

func loadKey(path string) (ed25519.PrivateKey, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s: mode %04o lets others read it; chmod 600 it", path, st.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, rest := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%s: no PEM PRIVATE KEY block", path)
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("%s: data after the PRIVATE KEY block", path)
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	priv, ok := key.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: a %T, not an ed25519 key", path, key)
	}
	return priv, nil
}

// publicKey is role's key as TUF metadata names it.
func (k *Keys) publicKey(role string) (*metadata.Key, error) {
	priv := *k.byRole(role)
	if len(priv) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("no %s key", role)
	}
	key, err := metadata.KeyFromPublicKey(priv.Public())
	if err != nil {
		return nil, fmt.Errorf("the %s key: %w", role, err)
	}
	return key, nil
}
