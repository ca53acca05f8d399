package repo

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// Kind is one of a release's two target files.
type Kind string

const (
	// KindUKI is the signed unified kernel image.
	KindUKI Kind = "uki"
	// KindRoot is the root slot image (dm-verity protected).
	KindRoot Kind = "root"
)

// Kinds are the kinds every release has, in the order they are added.
func Kinds() []Kind { return []Kind{KindUKI, KindRoot} }

// fileName is the target file's name inside "<arch>/<version>/".
func (k Kind) fileName() string {
	if k == KindUKI {
		return "berth.efi"
	}
	return "root.img"
}

func (k Kind) valid() bool { return k == KindUKI || k == KindRoot }

// maxArchLen bounds an architecture name; Go's longest GOARCH is 11 bytes.
const maxArchLen = 16

// ErrMetadata: a target's custom metadata is malformed.
var ErrMetadata = errors.New("malformed release metadata")

// Custom is the custom metadata of a release's target file, as the
// targets role signs it.
type Custom struct {
	Version  string `json:"version"`
	Arch     string `json:"arch"`
	RootHash string `json:"rootHash"`
	Kind     Kind   `json:"kind"`
}

// checkArch accepts a GOARCH-style name: lower-case letters and digits. The
// name is a path element of every target, so nothing else may be in it.
func checkArch(arch string) error {
	if arch == "" || len(arch) > maxArchLen {
		return fmt.Errorf("architecture %q: must be 1 to %d characters", arch, maxArchLen)
	}
	for _, c := range []byte(arch) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return fmt.Errorf("architecture %q: only lower-case letters and digits are allowed", arch)
		}
	}
	return nil
}

// checkRootHash accepts a dm-verity root hash: lower-case hex of a SHA-256
// or SHA-512 digest.
func checkRootHash(h string) error {
	if len(h) != 64 && len(h) != 128 {
		return fmt.Errorf("root hash %q: want 64 or 128 hex digits, have %d characters", h, len(h))
	}
	if _, err := hex.DecodeString(h); err != nil {
		return fmt.Errorf("root hash %q: %w", h, err)
	}
	for _, c := range []byte(h) {
		if c >= 'A' && c <= 'F' {
			return fmt.Errorf("root hash %q: upper-case hex (write it in lower case)", h)
		}
	}
	return nil
}

// validate checks every field; the error names the first bad one.
func (c Custom) validate() error {
	if _, err := ParseVersion(c.Version); err != nil {
		return fmt.Errorf("version: %w", err)
	}
	if err := checkArch(c.Arch); err != nil {
		return fmt.Errorf("arch: %w", err)
	}
	if err := checkRootHash(c.RootHash); err != nil {
		return fmt.Errorf("rootHash: %w", err)
	}
	if !c.Kind.valid() {
		return fmt.Errorf("kind: %q is neither %q nor %q", c.Kind, KindUKI, KindRoot)
	}
	return nil
}

// ParseCustom reads and checks a target's custom metadata. Fields it does
// not know are ignored, so a later builder may add some without old nodes
// refusing its releases; a missing or malformed known field is an error.
func ParseCustom(data []byte) (Custom, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return Custom{}, fmt.Errorf("%w: no custom metadata", ErrMetadata)
	}
	var c Custom
	if err := json.Unmarshal(data, &c); err != nil {
		return Custom{}, fmt.Errorf("%w: %w", ErrMetadata, err)
	}
	if err := c.validate(); err != nil {
		return Custom{}, fmt.Errorf("%w: %w", ErrMetadata, err)
	}
	return c, nil
}

// targetPath is the TUF target path of a release's file.
func targetPath(arch, version string, k Kind) string {
	return arch + "/" + version + "/" + k.fileName()
}
