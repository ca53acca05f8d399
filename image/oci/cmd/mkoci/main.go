// Command mkoci packs files into a reproducible OCI image-layout tarball that
// `ctr images import` accepts, with no registry:
//
//	mkoci -name registry.k8s.io/pause:3.10 -entrypoint /pause -file pause=build/pause -out pause.tar
//
// -file DEST=SRC may repeat; DEST is the path inside the image, and the file
// keeps SRC's permission bits. -entrypoint, -cmd and -env may repeat, one
// argument or variable each.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/berth-node/berth/fsutil"
	"github.com/berth-node/berth/image/oci"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mkoci:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("mkoci", flag.ContinueOnError)
	var img oci.Image
	var files, entry, cmd, env list
	fs.StringVar(&img.Name, "name", "", "image reference to import as, e.g. registry.k8s.io/pause:3.10")
	fs.Var(&entry, "entrypoint", "entrypoint argument (repeatable)")
	fs.Var(&cmd, "cmd", "cmd argument (repeatable)")
	fs.Var(&env, "env", "KEY=VALUE environment variable (repeatable)")
	fs.Var(&files, "file", "DEST=SRC: put file SRC at DEST in the image (repeatable)")
	fs.StringVar(&img.WorkingDir, "workdir", "", "working directory")
	fs.StringVar(&img.Architecture, "arch", "amd64", "architecture")
	out := fs.String("out", "", "output tarball")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("-out is required")
	}
	img.Entrypoint, img.Cmd, img.Env = entry, cmd, env
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
		img.Files = append(img.Files, oci.File{Path: dest, Mode: st.Mode().Perm(), Data: data})
	}
	var buf strings.Builder
	res, err := oci.Write(&buf, img)
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(*out, []byte(buf.String()), 0o644); err != nil {
		return err
	}
	fmt.Printf("%s: %s %s\n", *out, img.Name, res.ManifestDigest)
	return nil
}
