// Package release reads the release an image directory holds (what `make
// disk` built: manifest.json, the signed UKI berth.efi, root.erofs) and
// adds it to an update repository (package update/repo) for `make
// update-repo`. It is host-side, beside the image builder: it checks the
// build with the image's own verity code, which PID 1 does not link.
package release

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/berth-node/berth/config/manifest"
	"github.com/berth-node/berth/image/verity"
	mverity "github.com/berth-node/berth/mounts/verity"
	"github.com/berth-node/berth/update/repo"
)

// Files of an image directory (image/cmd/mkimage -disk) a release is made
// from.
const (
	ImageManifest = "manifest.json"
	ImageRoot     = "root.erofs"
)

// ImageOptions tune ReleaseFromImage.
type ImageOptions struct {
	// Version, when set, is the version the caller means to release
	// (make's VERSION): the image must have been built as it.
	Version string
	// AllowUnsigned takes an image whose UKI is not signed for Secure
	// Boot: nodes with Secure Boot on would refuse to start it (and roll
	// back), so only for machines that boot with it off.
	AllowUnsigned bool
}

// ReleaseFromImage is the release an image directory holds, as `make disk`
// built it: its manifest's version and architecture, the signed UKI beside
// disk.raw (manifest disk.ukiFile) and root.erofs, the root filesystem
// followed by its dm-verity hash tree, exactly the bytes a root slot holds
// (update/apply's Layout). Everything the release claims is checked
// against the files, since a node checks it too and would refuse (or
// fail to boot) what does not add up: the version is a release version,
// the UKI is the one the manifest describes and carries the root hash on
// its command line, and root.erofs hashes to that root hash with its tree
// right after the filesystem.
func ReleaseFromImage(dir string, opts ImageOptions) (repo.NewRelease, error) {
	what := "reading the release in the image directory " + dir
	fail := func(err error) (repo.NewRelease, error) { return repo.NewRelease{}, fmt.Errorf("%s: %w", what, err) }
	if opts.Version != "" {
		if _, err := repo.ParseVersion(opts.Version); err != nil {
			return fail(fmt.Errorf("%w: a repository holds releases only; build and add one with `make disk update-repo VERSION=1.2.3`", err))
		}
	}
	m, err := manifest.Load(filepath.Join(dir, ImageManifest))
	if err != nil {
		return fail(err)
	}
	if _, err := repo.ParseVersion(m.BerthVersion); err != nil {
		return fail(fmt.Errorf("the image was built as %q, which is not a release version (%w): a repository holds releases only; build and add one with `make disk update-repo VERSION=1.2.3`", m.BerthVersion, err))
	}
	if opts.Version != "" && opts.Version != m.BerthVersion {
		return fail(fmt.Errorf("the image was built as version %s, not %s: build it again with `make disk update-repo VERSION=%s`", m.BerthVersion, opts.Version, opts.Version))
	}
	arch := m.Arch
	if arch == "" {
		arch = manifest.LegacyArch
	}
	d := m.Disk
	if d == nil || d.UKIFile == "" {
		return fail(errors.New("the manifest describes no UKI file: build the image with `make disk` (mkimage -disk), which writes berth.efi beside disk.raw"))
	}
	if d.SignedBy == nil && !opts.AllowUnsigned {
		return fail(errors.New("the UKI is not signed for Secure Boot (built with UNSIGNED=1?): nodes with Secure Boot on would refuse to start it; build it signed (make keys, make disk)"))
	}
	r := m.Root
	if r == nil || r.RootHash == "" || r.Size <= 0 {
		return fail(errors.New("the manifest describes no root image with a dm-verity root hash"))
	}
	if r.Path != "" {
		return fail(fmt.Errorf("the root image is in the initramfs (%s; built with -root-in-initramfs): a release needs root.erofs with its hash tree for a root slot", r.Path))
	}
	param, err := cmdlineVerity(d.Cmdline)
	if err != nil {
		return fail(fmt.Errorf("the UKI's command line: %w", err))
	}
	if param.RootHash != r.RootHash {
		return fail(fmt.Errorf("the UKI's command line names root hash %s, the manifest's root %s: they are from different builds", param.RootHash, r.RootHash))
	}
	ukiPath := filepath.Join(dir, filepath.Base(d.UKIFile))
	if err := checkUKI(ukiPath, d); err != nil {
		return fail(err)
	}
	rootPath := filepath.Join(dir, ImageRoot)
	if err := checkRootImage(rootPath, r.Size, param); err != nil {
		return fail(err)
	}
	return repo.NewRelease{Arch: arch, Version: m.BerthVersion, RootHash: r.RootHash, UKI: ukiPath, Root: rootPath}, nil
}

// cmdlineVerity is the berth.verity= parameter of a kernel command line.
func cmdlineVerity(cmdline string) (mverity.Param, error) {
	var found []string
	for _, w := range strings.Fields(cmdline) {
		if v, ok := strings.CutPrefix(w, mverity.ParamKey+"="); ok {
			found = append(found, v)
		}
	}
	if len(found) != 1 {
		return mverity.Param{}, fmt.Errorf("want one %s=, found %d in %q", mverity.ParamKey, len(found), cmdline)
	}
	return mverity.ParseParam(found[0])
}

// checkUKI checks that path is the UKI the manifest describes, its
// command line in it.
func checkUKI(path string, d *manifest.Disk) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("the UKI: %w", err)
	}
	sum := sha256.Sum256(data)
	if int64(len(data)) != d.UKISize || hex.EncodeToString(sum[:]) != d.UKISHA256 {
		return fmt.Errorf("the UKI %s is %d bytes with sha256 %s, the manifest's %d bytes with sha256 %s: it is not this build's", path, len(data), hex.EncodeToString(sum[:]), d.UKISize, d.UKISHA256)
	}
	if !bytes.Contains(data, []byte(d.Cmdline)) {
		return fmt.Errorf("the UKI %s does not carry the manifest's command line", path)
	}
	return nil
}

// checkRootImage checks that path is a root slot image for param: fsSize
// bytes of filesystem (param's data blocks), then at once the dm-verity
// hash tree built over them with param's salt, ending the file, with
// param's root hash.
func checkRootImage(path string, fsSize int64, param mverity.Param) error {
	if fsSize%verity.BlockSize != 0 {
		return fmt.Errorf("the root filesystem's %d bytes are not a whole number of %d-byte blocks", fsSize, verity.BlockSize)
	}
	blocks := uint64(fsSize / verity.BlockSize)
	if param.DataBlocks != blocks || param.HashStartBlock != blocks {
		return fmt.Errorf("the UKI's command line puts %d data blocks and the tree at block %d, the manifest's root filesystem is %d blocks with the tree right after: a slot image must be laid out as the command line says", param.DataBlocks, param.HashStartBlock, blocks)
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("the root image: %w (make disk writes root.erofs beside disk.raw)", err)
	} else if err != nil {
		return fmt.Errorf("the root image: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("the root image: %w", err)
	}
	want := fsSize + verity.HashSize(blocks, false)
	if st.Size() != want {
		return fmt.Errorf("the root image %s is %d bytes, want %d: the filesystem's %d and its hash tree's %d (not an image built with its tree, or truncated)", path, st.Size(), want, fsSize, want-fsSize)
	}
	salt, err := hex.DecodeString(param.Salt)
	if param.Salt == "-" {
		salt, err = nil, nil
	}
	if err != nil {
		return fmt.Errorf("the UKI's verity salt %q: %w", param.Salt, err)
	}
	tree, err := verity.Build(f, fsSize, verity.Options{Salt: salt})
	if err != nil {
		return fmt.Errorf("hashing the root image %s: %w", path, err)
	}
	if tree.RootHashHex() != param.RootHash {
		return fmt.Errorf("the root image %s hashes to root hash %s, the UKI's command line says %s: the filesystem is not this build's, or was changed", path, tree.RootHashHex(), param.RootHash)
	}
	onDisk := make([]byte, len(tree.Hash))
	if _, err := io.ReadFull(io.NewSectionReader(f, fsSize, int64(len(onDisk))), onDisk); err != nil {
		return fmt.Errorf("reading the root image's hash tree: %w", err)
	}
	if !bytes.Equal(onDisk, tree.Hash) {
		return fmt.Errorf("the root image %s's hash tree is not the one its filesystem gives: dm-verity would fail reads from it", path)
	}
	return nil
}

// AddImage adds the release in imageDir (ReleaseFromImage) to the
// repository in repoDir, signed with the key set in keysDir (SetUpKeys'
// keys and trusted root). A repository that does not exist yet is made
// from the key set's trusted root (InitFrom), the one images built with
// these keys carry; created says so.
func AddImage(ctx context.Context, repoDir, keysDir, imageDir string, img ImageOptions, opts repo.Options) (rel repo.NewRelease, created bool, err error) {
	rel, err = ReleaseFromImage(imageDir, img)
	if err != nil {
		return rel, false, err
	}
	keys, err := repo.LoadKeys(keysDir)
	if err != nil {
		return rel, false, fmt.Errorf("loading the repository keys (make keys makes them): %w", err)
	}
	if _, err := os.Lstat(filepath.Join(repoDir, "root.json")); errors.Is(err, fs.ErrNotExist) {
		root, err := os.ReadFile(filepath.Join(keysDir, repo.TrustedRootFile))
		if err != nil {
			return rel, false, fmt.Errorf("reading the trusted root to start the repository from (make keys makes it): %w", err)
		}
		if err := repo.InitFrom(ctx, repoDir, keys, root, opts); err != nil {
			return rel, false, err
		}
		created = true
	} else if err != nil {
		return rel, false, fmt.Errorf("the repository in %s: %w", repoDir, err)
	}
	return rel, created, repo.Add(ctx, repoDir, keys, rel, opts)
}
