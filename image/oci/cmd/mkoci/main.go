// Command mkoci packs files into a reproducible OCI image-layout tarball that
// `ctr images import` accepts, with no registry:
//
//	mkoci -name registry.k8s.io/pause:3.10 -entrypoint /pause -file pause=build/pause -out pause.tar
//
// -file DEST=SRC may repeat; DEST is the path inside the image, and the file
// keeps SRC's permission bits. -entrypoint, -cmd and -env may repeat, one
// argument or variable each. -arch (amd64 unless given) goes into the image
// config, and an ELF file for another machine is refused: it would fail only
// on the node, as "exec format error".
//
// An image with dynamically linked programs, links or busybox applets is
// described by a spec file instead (image/oci/imagespec), with ${NAME} in it
// set by -var NAME=VALUE:
//
//	mkoci -spec image/oci/images/kube-proxy.yaml -var KUBE_VERSION=v1.35.4 -var KUBE_PROXY_DIR=... -out kube-proxy.tar
//
// With -spec, -arch sets the architecture of a spec that names none (one
// spec serves both architectures, with -var pointing at that arch's builds);
// a spec naming another architecture is an error. -sysroot DIR reads the
// spec's absolute host paths (iptables and its libraries and extensions,
// busybox) under DIR, another architecture's packages unpacked (make
// sysroot ARCH=arm64), as mkimage -sysroot does; -host-files prints those
// paths one a line and builds nothing, for make sysroot to map to packages.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/berth-node/berth/image/elfarch"
	"github.com/berth-node/berth/image/oci"
	"github.com/berth-node/berth/image/oci/imagespec"
	"github.com/berth-node/berth/internal/fsutil"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mkoci:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("mkoci", flag.ContinueOnError)
	var img oci.Image
	var files, entry, cmd, env, vars list
	fs.StringVar(&img.Name, "name", "", "image reference to import as, e.g. registry.k8s.io/pause:3.10")
	fs.Var(&entry, "entrypoint", "entrypoint argument (repeatable)")
	fs.Var(&cmd, "cmd", "cmd argument (repeatable)")
	fs.Var(&env, "env", "KEY=VALUE environment variable (repeatable)")
	fs.Var(&files, "file", "DEST=SRC: put file SRC at DEST in the image (repeatable)")
	fs.StringVar(&img.WorkingDir, "workdir", "", "working directory")
	fs.StringVar(&img.Architecture, "arch", "amd64", "architecture: "+elfarch.Names)
	title := fs.String("title", "", "the org.opencontainers.image.title annotation")
	version := fs.String("version", "", "the org.opencontainers.image.version annotation")
	out := fs.String("out", "", "output tarball")
	specFile := fs.String("spec", "", "image spec file (image/oci/imagespec); replaces -name, -file, -entrypoint...")
	fs.Var(&vars, "var", "NAME=VALUE for ${NAME} in the -spec file (repeatable)")
	sysroot := fs.String("sysroot", "", "read the -spec file's absolute host paths under this directory (another architecture's packages unpacked); / when empty")
	hostFiles := fs.Bool("host-files", false, "print the host files the -spec file's image copies, one a line, and build nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *specFile == "" && (*sysroot != "" || *hostFiles) {
		return fmt.Errorf("-sysroot and -host-files are for -spec files only")
	}
	if *out == "" && !*hostFiles {
		return fmt.Errorf("-out is required")
	}
	machine, ok := elfarch.Machine(img.Architecture)
	if !ok {
		return fmt.Errorf("-arch %q: want one of %s", img.Architecture, elfarch.Names)
	}
	archSet := false
	fs.Visit(func(f *flag.Flag) { archSet = archSet || f.Name == "arch" })
	if *specFile != "" {
		if img.Name != "" || *title != "" || *version != "" || len(files)+len(entry)+len(cmd)+len(env) > 0 {
			return fmt.Errorf("-spec %s: the spec gives the name, title, version, files, entrypoint, cmd and env; drop those flags", *specFile)
		}
		values := map[string]string{}
		for _, v := range vars {
			name, value, ok := strings.Cut(v, "=")
			if !ok || name == "" {
				return fmt.Errorf("-var %q: want NAME=VALUE", v)
			}
			values[name] = value
		}
		s, err := imagespec.Load(*specFile, values)
		if err != nil {
			return err
		}
		if archSet {
			if s.Architecture != "" && s.Architecture != img.Architecture {
				return fmt.Errorf("-arch %s: %s is for %s", img.Architecture, *specFile, s.Architecture)
			}
			s.Architecture = img.Architecture
		}
		repo, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("finding the repository root for %s: %w", *specFile, err)
		}
		if *hostFiles {
			files, err := imagespec.HostFiles(ctx, s, repo, *sysroot)
			if err != nil {
				return fmt.Errorf("%s: %w", *specFile, err)
			}
			for _, f := range files {
				fmt.Println(f)
			}
			return nil
		}
		if img, err = imagespec.Build(ctx, s, repo, *sysroot); err != nil {
			return fmt.Errorf("%s: %w", *specFile, err)
		}
		return write(img, *out)
	}
	if len(vars) > 0 {
		return fmt.Errorf("-var is for -spec files only")
	}
	img.Entrypoint, img.Cmd, img.Env = entry, cmd, env
	for k, v := range map[string]string{oci.AnnotationTitle: *title, oci.AnnotationVersion: *version} {
		if v != "" {
			if img.Annotations == nil {
				img.Annotations = map[string]string{}
			}
			img.Annotations[k] = v
		}
	}
	for _, f := range files {
		dest, src, ok := strings.Cut(f, "=")
		if !ok || dest == "" || src == "" {
			return fmt.Errorf("-file %q: want DEST=SRC", f)
		}
		st, err := os.Stat(src)
		if err != nil {
			return fmt.Errorf("-file %s: %w", f, err)
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return fmt.Errorf("-file %s: %w", f, err)
		}
		if err := elfarch.Check(src, data, machine); err != nil {
			return fmt.Errorf("-file %s: %w", f, err)
		}
		img.Files = append(img.Files, oci.File{Path: dest, Mode: st.Mode().Perm(), Data: data})
	}
	return write(img, *out)
}

func write(img oci.Image, out string) error {
	var buf strings.Builder
	res, err := oci.Write(&buf, img)
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(out, []byte(buf.String()), 0o644); err != nil {
		return err
	}
	fmt.Printf("%s: %s %s (%d bytes)\n", out, img.Name, res.ManifestDigest, buf.Len())
	return nil
}
