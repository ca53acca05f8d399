// Command updaterepo adds the build in an image directory to an update
// repository (`make update-repo`): the signed UKI (berth.efi) and the root
// slot image (root.erofs, the root filesystem and its dm-verity tree) of
// the image's architecture and version, signed with the TUF keys `make
// keys` keeps in KEYS_DIR/update. A repository directory that does not
// exist yet is started from that key set's root.json, the one images
// built with the same keys carry (image/release.AddImage):
//
//	go run ./image/cmd/updaterepo -image build/image -keys build/keys/update -repo build/update-repo
//	go run ./image/cmd/updaterepo -refresh -keys build/keys/update -repo build/update-repo
//
// -refresh re-signs the repository's targets, snapshot and timestamp with
// new expiries and adds nothing: a repository must be refreshed before its
// timestamp expires (a week), or nodes stop taking updates from it.
//
// The repository is a static directory: serve it with any web server or
// bucket, uploading every file before timestamp.json (docs/images.md, "Update
// repositories").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/berth-node/berth/image/release"
	"github.com/berth-node/berth/update/repo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(ctx, log, os.Args[1:]); err != nil {
		log.Error("update-repo failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger, args []string) error {
	fl := flag.NewFlagSet("updaterepo", flag.ContinueOnError)
	image := fl.String("image", "build/image", "the image directory make disk built: manifest.json, berth.efi, root.erofs")
	keys := fl.String("keys", "build/keys/update", "the update repository's key set (make keys): tuf-<role>.pem and root.json")
	dir := fl.String("repo", "build/update-repo", "the repository directory; made from the key set's root.json when it does not exist")
	version := fl.String("version", "", "the version to release (make's VERSION): the image must have been built as it")
	unsigned := fl.Bool("allow-unsigned", false, "take an image whose UKI is not signed for Secure Boot (nodes with Secure Boot on would not start it)")
	refresh := fl.Bool("refresh", false, "re-sign the repository's metadata with new expiries and add nothing")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() != 0 {
		return fmt.Errorf("unexpected arguments %q", fl.Args())
	}
	if *dir == "" || *keys == "" {
		return errors.New("-repo and -keys must not be empty")
	}
	if *refresh {
		k, err := repo.LoadKeys(*keys)
		if err != nil {
			return fmt.Errorf("loading the repository keys (make keys makes them): %w", err)
		}
		if err := repo.Refresh(ctx, *dir, k, repo.Options{}); err != nil {
			return err
		}
		log.Info("update repository refreshed", "repo", *dir)
		return nil
	}
	rel, created, err := release.AddImage(ctx, *dir, *keys, *image, release.ImageOptions{Version: *version, AllowUnsigned: *unsigned}, repo.Options{})
	if err != nil {
		return err
	}
	if created {
		log.Info("update repository created from the key set's trusted root", "repo", *dir, "root", *keys+"/"+repo.TrustedRootFile)
	}
	log.Info("release added to the update repository", "repo", *dir, "arch", rel.Arch, "version", rel.Version,
		"root_hash", rel.RootHash, "uki", rel.UKI, "root", rel.Root)
	return nil
}
