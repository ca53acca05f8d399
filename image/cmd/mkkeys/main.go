// Command mkkeys makes the UEFI Secure Boot key set a berth disk is signed
// with (`make keys`), or completes a user's own:
//
//	go run ./image/cmd/mkkeys -out build/keys              # new set; an existing one is kept
//	go run ./image/cmd/mkkeys -out build/keys -force       # new set replacing the old
//	go run ./image/cmd/mkkeys -from ~/my-keys -out build/keys
//
// The set is PK, KEK and db (RSA-2048 keys, PEM .key and .crt), their EFI
// signature lists (.esl), the signed variables that enroll them (.auth: PK
// and KEK signed by PK, db by KEK), EC2's UefiData (uefi-data, what
// `aws ec2 register-image --uefi-data` takes) and keys.json (owner GUID,
// certificate subjects and SHA-256 fingerprints). -from reads a directory
// holding at least the six .key and .crt files and writes the complete set
// to -out (the same directory: only the missing files are added).
//
// Beside them, in -out/update/, the update repository's keys (one ed25519
// key per TUF role, tuf-<role>.pem) and the trusted root.json signed with
// them, which node images carry and `make update-repo` starts a repository
// from (update/repo.SetUpKeys): made once and kept like the Secure Boot
// set, replaced by -force too.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/berth-node/berth/image/secureboot"
	"github.com/berth-node/berth/update/repo"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(context.Background(), log, os.Args[1:]); err != nil {
		log.Error("mkkeys failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger, args []string) error {
	fl := flag.NewFlagSet("mkkeys", flag.ContinueOnError)
	out := fl.String("out", "build/keys", "key directory to write")
	from := fl.String("from", "", "a directory with your own PK, KEK and db keys (.key, .crt PEM) to take instead of making new ones")
	force := fl.Bool("force", false, "replace an existing key set in -out")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() != 0 {
		return fmt.Errorf("unexpected arguments %q", fl.Args())
	}
	if *out == "" {
		return errors.New("-out is empty")
	}
	exists, err := dirExists(*out)
	if err != nil {
		return err
	}
	if err := secureBootKeys(ctx, log, *out, *from, exists, *force); err != nil {
		return err
	}
	return updateKeys(log, filepath.Join(*out, UpdateDir), *force)
}

// UpdateDir is the update repository's key directory inside -out.
const UpdateDir = "update"

// updateKeys makes or keeps the update repository's keys and trusted root.
func updateKeys(log *slog.Logger, dir string, force bool) error {
	ks, err := repo.SetUpKeys(dir, force, repo.Options{})
	if err != nil {
		return fmt.Errorf("update repository keys: %w", err)
	}
	msg := "kept"
	switch {
	case ks.Created:
		msg = "new set written; keep its tuf-*.pem files secret"
	case ks.Completed:
		msg = "kept; trusted root.json made from them"
	}
	log.Info("update repository keys: "+msg, "dir", dir, "trusted_root", filepath.Join(dir, repo.TrustedRootFile))
	return nil
}

// secureBootKeys makes, takes (from) or keeps the Secure Boot key set in
// out.
func secureBootKeys(ctx context.Context, log *slog.Logger, out, from string, exists, force bool) error {
	if from != "" {
		keys, err := secureboot.LoadKeys(ctx, log, from)
		if err != nil {
			return err
		}
		if same, err := sameDir(from, out); err != nil {
			return err
		} else if same {
			if err := keys.WriteMissing(log); err != nil {
				return err
			}
			report(log, "key set complete", keys)
			return nil
		}
		if exists && !force {
			if have, err := secureboot.LoadKeys(ctx, log, out); err == nil && have.DB.Fingerprint() == keys.DB.Fingerprint() &&
				have.KEK.Fingerprint() == keys.KEK.Fingerprint() && have.PK.Fingerprint() == keys.PK.Fingerprint() {
				log.Info("secure boot keys: -out already holds these keys; kept", "dir", out)
				return nil
			}
		}
		if err := keys.Write(log, out, force); err != nil {
			return err
		}
		report(log, "key set written from "+from, keys)
		return nil
	}

	if exists && !force {
		keys, err := secureboot.LoadKeys(ctx, log, out)
		if err != nil {
			return fmt.Errorf("%w; -force replaces %s with a new set", err, out)
		}
		if err := keys.WriteMissing(log); err != nil {
			return err
		}
		report(log, "key set exists; kept (-force makes a new one)", keys)
		return nil
	}
	keys, err := secureboot.Generate(secureboot.GenerateOptions{})
	if err != nil {
		return err
	}
	if err := keys.Write(log, out, force); err != nil {
		return err
	}
	report(log, "new key set written; keep its .key files secret", keys)
	return nil
}

func report(log *slog.Logger, msg string, k *secureboot.Keys) {
	log.Info("secure boot keys: "+msg, "dir", k.Dir, "owner", k.Owner.String(),
		"db", k.DB.Cert.Subject.String(), "db_sha256", k.DB.Fingerprint(), "uefi_data", k.Path(secureboot.FileUEFIData))
}

func dirExists(p string) (bool, error) {
	st, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !st.IsDir() {
		return false, fmt.Errorf("%s: not a directory", p)
	}
	return true, nil
}

func sameDir(a, b string) (bool, error) {
	sa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	sb, err := os.Stat(b)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if os.SameFile(sa, sb) {
		return true, nil
	}
	aa, _ := filepath.Abs(a)
	ab, _ := filepath.Abs(b)
	return aa == ab, nil
}
