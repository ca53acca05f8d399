package release

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-node/berth/config/manifest"
	"github.com/berth-node/berth/image/verity"
	mverity "github.com/berth-node/berth/mounts/verity"
	"github.com/berth-node/berth/update/repo"
)

// fakeImage writes an image directory as mkimage -disk leaves it: a root
// filesystem of blocks random blocks with its dm-verity tree appended
// (root.erofs), a "signed UKI" whose command line names the tree
// (berth.efi), and manifest.json describing both. edit changes the
// manifest before it is written.
func fakeImage(t *testing.T, version string, blocks int, edit func(*manifest.Manifest)) string {
	t.Helper()
	dir := t.TempDir()
	fs := make([]byte, blocks*verity.BlockSize)
	rand.Read(fs)
	tree, err := verity.Build(bytes.NewReader(fs), int64(len(fs)), verity.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ImageRoot), append(append([]byte(nil), fs...), tree.Hash...), 0o644); err != nil {
		t.Fatal(err)
	}
	param := mverity.Param{DataBlocks: tree.DataBlocks, HashStartBlock: tree.DataBlocks, RootHash: tree.RootHashHex(), Salt: tree.SaltHex()}
	cmdline := "console=ttyS0 " + mverity.ParamKey + "=" + param.String()
	uki := append([]byte("MZ stub .cmdline "+cmdline+" .linux "), make([]byte, 5000)...)
	uki = append(uki, "SIGNED"...)
	if err := os.WriteFile(filepath.Join(dir, "berth.efi"), uki, 0o644); err != nil {
		t.Fatal(err)
	}
	fsSum, ukiSum := sha256.Sum256(fs), sha256.Sum256(uki)
	m := &manifest.Manifest{BerthVersion: version, Arch: "amd64",
		Root: &manifest.Root{Format: "erofs", Size: int64(len(fs)), SHA256: hex.EncodeToString(fsSum[:]), RootHash: tree.RootHashHex(),
			Serial: "berth-root", Verity: param.String()},
		Disk: &manifest.Disk{Path: "disk.raw", Cmdline: cmdline, UKI: "EFI/Linux/berth-" + version + ".efi", Slot: "a",
			UKIFile: "berth.efi", UKISize: int64(len(uki)), UKISHA256: hex.EncodeToString(ukiSum[:]),
			SignedBy: &manifest.DiskSigner{Subject: "CN=test db", CertSHA256: "ab"}}}
	if edit != nil {
		edit(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ImageManifest), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestAddImage: make update-repo's path, from a fresh key set to a node
// that carries the key set's root and fetches the release: the root image
// it gets is root.erofs byte for byte, laid out as update/apply takes a
// slot image.
func TestAddImage(t *testing.T) {
	ctx := context.Background()
	keysDir := filepath.Join(t.TempDir(), "update")
	ks, err := repo.SetUpKeys(keysDir, false, repo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	repoDir := filepath.Join(t.TempDir(), "update-repo")
	img := fakeImage(t, "1.2.0", 300, nil)
	rel, created, err := AddImage(ctx, repoDir, keysDir, img, ImageOptions{Version: "1.2.0"}, repo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !created || rel.Version != "1.2.0" || rel.Arch != "amd64" || rel.UKI != filepath.Join(img, "berth.efi") || rel.Root != filepath.Join(img, ImageRoot) {
		t.Fatalf("release %+v (created %v)", rel, created)
	}
	if b, _ := os.ReadFile(filepath.Join(repoDir, "1.root.json")); !bytes.Equal(b, ks.TrustedRoot) {
		t.Error("the new repository does not start from the key set's trusted root")
	}
	// A second build goes into the same repository; the same version again
	// is refused.
	img2 := fakeImage(t, "1.3.0", 40, nil)
	if _, created, err := AddImage(ctx, repoDir, keysDir, img2, ImageOptions{}, repo.Options{}); err != nil || created {
		t.Fatalf("second release: %v (created %v)", err, created)
	}
	if _, _, err := AddImage(ctx, repoDir, keysDir, img, ImageOptions{}, repo.Options{}); !errors.Is(err, repo.ErrReleaseExists) {
		t.Fatalf("the same release again: %v", err)
	}

	srv := httptest.NewServer(http.FileServer(http.Dir(repoDir)))
	defer srv.Close()
	c, err := repo.NewClient(repo.ClientConfig{TrustedRoot: ks.TrustedRoot, MetadataURL: srv.URL, CacheDir: t.TempDir(), Running: "1.1",
		Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	latest, err := c.Latest(ctx, "amd64")
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Load(filepath.Join(img2, ImageManifest))
	if err != nil {
		t.Fatal(err)
	}
	if latest.Version.String() != "1.3.0" || latest.RootHash != m.Root.RootHash {
		t.Fatalf("latest %s root hash %s, want 1.3.0 with %s", latest.Version, latest.RootHash, m.Root.RootHash)
	}
	for k, file := range map[repo.Kind]string{repo.KindUKI: "berth.efi", repo.KindRoot: ImageRoot} {
		var got bytes.Buffer
		if err := c.Fetch(ctx, latest, k, &got); err != nil {
			t.Fatal(err)
		}
		if want, _ := os.ReadFile(filepath.Join(img2, file)); !bytes.Equal(got.Bytes(), want) {
			t.Errorf("the release's %s is not the image's %s", k, file)
		}
		// update/apply takes a slot image of n data blocks and their tree
		// right after, nothing else.
		if k == repo.KindRoot {
			if n := uint64(got.Len() / verity.BlockSize); got.Len()%verity.BlockSize != 0 || n != 40+mverity.TreeBlocks(40) {
				t.Errorf("the root image is %d bytes, not 40 data blocks and their tree", got.Len())
			}
		}
	}
}

func TestReleaseFromImageRefusals(t *testing.T) {
	for name, tc := range map[string]struct {
		version string
		edit    func(*manifest.Manifest)
		files   func(dir string)
		opts    ImageOptions
		want    string
	}{
		"git describe version": {version: "v1.2-3-gabcdef", want: "make disk update-repo VERSION=1.2.3"},
		"dev":                  {version: "dev", want: "not a release version"},
		"make's VERSION":       {version: "1.2.0", opts: ImageOptions{Version: "4caabed-dirty"}, want: "make disk update-repo VERSION=1.2.3"},
		"other version":        {version: "1.2.0", opts: ImageOptions{Version: "1.2.1"}, want: "VERSION=1.2.1"},
		"no disk":              {version: "1.2.0", edit: func(m *manifest.Manifest) { m.Disk = nil }, want: "make disk"},
		"older builder":        {version: "1.2.0", edit: func(m *manifest.Manifest) { m.Disk.UKIFile = "" }, want: "berth.efi"},
		"unsigned":             {version: "1.2.0", edit: func(m *manifest.Manifest) { m.Disk.SignedBy = nil }, want: "not signed"},
		"root in initramfs":    {version: "1.2.0", edit: func(m *manifest.Manifest) { m.Root.Path = "/root.erofs" }, want: "-root-in-initramfs"},
		"root hash differs": {version: "1.2.0", edit: func(m *manifest.Manifest) { m.Root.RootHash = strings.Repeat("0", 64) },
			want: "different builds"},
		"uki changed": {version: "1.2.0", files: func(dir string) {
			os.WriteFile(filepath.Join(dir, "berth.efi"), []byte("another UKI"), 0o644)
		}, want: "not this build's"},
		"root truncated": {version: "1.2.0", files: func(dir string) {
			os.Truncate(filepath.Join(dir, ImageRoot), 8*verity.BlockSize)
		}, want: "truncated"},
		"root changed":  {version: "1.2.0", files: func(dir string) { flip(t, filepath.Join(dir, ImageRoot), 100) }, want: "hashes to root hash"},
		"tree changed":  {version: "1.2.0", files: func(dir string) { flip(t, filepath.Join(dir, ImageRoot), 8*verity.BlockSize+5) }, want: "hash tree is not"},
		"no root image": {version: "1.2.0", files: func(dir string) { os.Remove(filepath.Join(dir, ImageRoot)) }, want: "make disk writes root.erofs"},
	} {
		dir := fakeImage(t, tc.version, 8, tc.edit)
		if tc.files != nil {
			tc.files(dir)
		}
		_, err := ReleaseFromImage(dir, tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), dir) {
			t.Errorf("%s: error %v, want one naming %q and the directory", name, err, tc.want)
		}
	}
	// Unsigned is taken when asked for.
	dir := fakeImage(t, "1.2.0", 8, func(m *manifest.Manifest) { m.Disk.SignedBy = nil })
	if _, err := ReleaseFromImage(dir, ImageOptions{AllowUnsigned: true}); err != nil {
		t.Errorf("unsigned, allowed: %v", err)
	}
}

// flip inverts one byte of the file at path.
func flip(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
