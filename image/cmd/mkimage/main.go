// Command mkimage builds a berth node image (vmlinuz, initramfs.img,
// root.erofs for a read-only root disk, manifest.json) from image/spec.yaml,
// and with -disk a bootable GPT disk image (UEFI, dm-verity root) from the
// same spec. -root-in-initramfs puts the root image in the initramfs
// instead, for a launcher that attaches no disk.
//
//	go run ./image/cmd/mkimage -spec image/spec.yaml -variant test \
//	    -berth build/berth -version v0.1 -kernel build/kernel/<ver> -out build/image-test
//
// -arch arm64 builds an arm64 image (every ELF file placed in it must be
// for aarch64; the manifest records the architecture), with -sysroot
// build/arm64/sysroot: the spec's absolute host paths (programs, their
// libraries, plugins, files) are read there, from arm64 packages.
//
// -keys DIR signs the disk's systemd-boot and UKI with the key set's db
// key for UEFI Secure Boot (make keys writes one) and, with -enroll, puts
// its PK, KEK and db .auth files on the ESP for systemd-boot to enroll on
// a machine in setup mode; without -keys the disk is unsigned and the
// manifest says so.
//
// -update-root FILE puts the update repository's trusted root.json (make
// keys writes KEYS_DIR/update/root.json) in the root filesystem at
// /usr/share/berth/update/root.json, and -update-url URL records a default
// repository; the manifest's "update" says both. With -disk, the signed UKI
// is also written beside disk.raw as berth.efi, for make update-repo.
//
// -host-files prints those paths (for the variant, read from -sysroot or
// /) one a line and builds nothing: make sysroot maps them to packages.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/berth-node/berth/config/accepts"
	"github.com/berth-node/berth/config/manifest"
	"github.com/berth-node/berth/image/assemble"
	"github.com/berth-node/berth/image/disk/esp"
	"github.com/berth-node/berth/image/secureboot"
	"github.com/berth-node/berth/image/spec"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(log, os.Args[1:]); err != nil {
		log.Error("mkimage failed", "err", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger, args []string) error {
	fs := flag.NewFlagSet("mkimage", flag.ContinueOnError)
	specPath := fs.String("spec", "image/spec.yaml", "image spec file")
	variant := fs.String("variant", "default", "spec variant (default, test)")
	berth := fs.String("berth", "build/berth", "static berth binary")
	version := fs.String("version", "dev", "berth version for the manifest")
	kernel := fs.String("kernel", "", "unpacked kernel package directory (boot/, lib/modules/)")
	arch := fs.String("arch", "amd64", "architecture the image is for (amd64, arm64): every ELF file in it is checked against it")
	out := fs.String("out", "build/image", "output directory")
	repo := fs.String("repo", ".", "repository root (relative spec paths, goBuild packages)")
	diskOut := fs.String("disk", "", "also write a bootable GPT disk image here (e.g. build/image/disk.raw)")
	rootInInitramfs := fs.Bool("root-in-initramfs", false, "put the root image in the initramfs (/root.erofs) instead of root.erofs for a root disk")
	sysroot := fs.String("sysroot", "", "read the spec's absolute host paths under this directory (another architecture's packages unpacked); / when empty")
	hostFiles := fs.Bool("host-files", false, "print the host files the spec's layers copy, one a line, and build nothing")
	diskCmdline := fs.String("disk-cmdline", assemble.DefaultDiskCmdline, "the disk's kernel command line (berth.verity= is appended)")
	keysDir := fs.String("keys", "", "sign the disk's EFI binaries with this Secure Boot key set's db key (make keys); unsigned when empty")
	updateRoot := fs.String("update-root", "", "the update repository's trusted root.json (make keys writes KEYS_DIR/update/root.json): placed in the root filesystem at "+manifest.TrustedRootPath+"; without it the image cannot update in place")
	updateURL := fs.String("update-url", "", "the default update repository's URL (http or https), recorded in the manifest; needs -update-root. User data may name another")
	enroll := fs.Bool("enroll", true, "with -keys: put the key set's .auth files on the ESP for systemd-boot to enroll on a machine in setup mode")
	components := map[string]string{}
	fs.Func("component", "NAME=VERSION of a component the image ships, for the manifest (repeatable)", func(v string) error {
		name, ver, ok := strings.Cut(v, "=")
		if !ok || name == "" || ver == "" {
			return fmt.Errorf("want NAME=VERSION, got %q", v)
		}
		components[name] = ver
		return nil
	})
	var accepted *accepts.Accepts
	fs.Func("accepts", "FILE of what a component accepts (components/kubeaccepts, components/containerdaccepts' output), for the manifest (repeatable)", func(v string) error {
		a, err := accepts.Load(v)
		if err != nil {
			return err
		}
		if accepted == nil {
			accepted = &accepts.Accepts{}
		}
		return accepted.Merge(a)
	})
	vars := map[string]string{}
	fs.Func("var", "NAME=VALUE for ${NAME} in the spec (NODE_COMPONENTS: the node components' directory; repeatable)", func(v string) error {
		name, val, ok := strings.Cut(v, "=")
		if !ok || name == "" {
			return fmt.Errorf("want NAME=VALUE, got %q", v)
		}
		vars[name] = val
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *hostFiles {
		s, err := spec.Load(*specPath, vars)
		if err != nil {
			return err
		}
		rs, err := s.Resolve(*variant)
		if err != nil {
			return err
		}
		files, err := assemble.HostFiles(context.Background(), assemble.Inputs{Spec: rs, RepoRoot: *repo, Arch: *arch, Sysroot: *sysroot})
		if err != nil {
			return err
		}
		for _, f := range files {
			fmt.Println(f)
		}
		return nil
	}
	if *kernel == "" {
		return fmt.Errorf("-kernel is required (make kernel unpacks one under build/kernel/)")
	}
	var mtime int64
	if e := os.Getenv("SOURCE_DATE_EPOCH"); e != "" {
		v, err := strconv.ParseInt(e, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", e, err)
		}
		mtime = v
	}
	s, err := spec.Load(*specPath, vars)
	if err != nil {
		return err
	}
	rs, err := s.Resolve(*variant)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	in := assemble.Inputs{
		Spec: rs, Berth: *berth, BerthVersion: *version, KernelDir: *kernel,
		RepoRoot: *repo, MTime: mtime, Out: *out, Components: components, Accepts: accepted, Arch: *arch,
		Disk: *diskOut, DiskCmdline: *diskCmdline, RootInInitramfs: *rootInInitramfs, Sysroot: *sysroot,
		UpdateRoot: *updateRoot, UpdateRepository: *updateURL,
	}
	if *keysDir != "" && *diskOut != "" {
		if err := signing(ctx, log, &in, *keysDir, *enroll); err != nil {
			return err
		}
	}
	res, err := assemble.Build(ctx, log, in)
	if err != nil {
		return err
	}
	if d := res.Manifest.Disk; d != nil {
		if d.SignedBy != nil {
			log.Info("disk signed for UEFI Secure Boot", "disk", *diskOut, "uki", d.UKI, "cert", d.SignedBy.Subject,
				"cert_sha256", d.SignedBy.CertSHA256, "enroll_keys_on_esp", d.EnrollKeys)
		} else {
			log.Warn("disk NOT signed: it boots only with Secure Boot off (make keys, then make disk, signs it)", "disk", *diskOut)
		}
	}
	return nil
}

// signing loads the key set in dir and sets in's disk signing from its db
// key.
func signing(ctx context.Context, log *slog.Logger, in *assemble.Inputs, dir string, enroll bool) error {
	k, err := secureboot.LoadKeys(ctx, log, dir)
	if err != nil {
		return fmt.Errorf("loading the Secure Boot keys to sign the disk: %w", err)
	}
	in.DiskSign = func(pe []byte) ([]byte, error) {
		start := time.Now()
		b, err := secureboot.SignPE(pe, k.DB.Signer, k.DB.Cert)
		log.Debug("signed", "bytes", len(pe), "ms", time.Since(start).Milliseconds())
		return b, err
	}
	in.DiskSigner = &manifest.DiskSigner{Subject: k.DB.Cert.Subject.String(), CertSHA256: k.DB.Fingerprint()}
	if enroll {
		for _, n := range secureboot.AuthFiles() {
			in.DiskEnrollKeys = append(in.DiskEnrollKeys, esp.File{Path: n, Src: k.Path(n)})
		}
	}
	return nil
}
