// Package imagespec reads the spec of one container image (its name,
// version, entrypoint, and its content as an image-builder layer) and builds
// it into an oci.Image with the node image builder's own layer code: ELF
// binaries with the libraries they need, dlopened plugins, multi-call links,
// busybox applets. Every ELF file in the image must be for the image's
// architecture: a host binary of another machine would only fail at exec,
// on a node, as "exec format error".
//
// A spec names build outputs whose paths carry versions, so ${NAME} (and
// $NAME: write $$ for a dollar sign) in it is replaced by the variables the
// caller gives (components.mk's versions and directories); a name with no
// value is an error, never an empty string. ${MULTIARCH} in a plugins dir
// is left to the builder, which knows the image's architecture, as in the
// node image spec.
//
// An absolute host path in a spec (a program, its libraries and plugins, a
// file) is read under a sysroot when one is given: for another
// architecture's image, that architecture's Debian packages unpacked
// (make sysroot), never the builder's own files.
package imagespec

import (
	"context"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/berth-node/berth/image/assemble"
	"github.com/berth-node/berth/image/elfarch"
	"github.com/berth-node/berth/image/fstree"
	"github.com/berth-node/berth/image/oci"
	"github.com/berth-node/berth/image/spec"
)

// Spec is one image's spec file.
type Spec struct {
	// Name is the reference the tarball is imported or served under.
	Name string `json:"name"`
	// Title and Version become the manifest's OCI annotations.
	Title      string   `json:"title"`
	Version    string   `json:"version"`
	Entrypoint []string `json:"entrypoint"`
	Cmd        []string `json:"cmd,omitempty"`
	// Command is for an image that, like its upstream one, names no
	// program in its config (the e2e suite's etcd: a distroless base and
	// no ENTRYPOINT or CMD), because the pods that run it give their own
	// command: the program, by absolute path, those pods run. It is not
	// written into the image; the build checks it is in the image, as it
	// checks an entrypoint.
	Command    []string `json:"command,omitempty"`
	Env        []string `json:"env,omitempty"`
	WorkingDir string   `json:"workingDir,omitempty"`
	// User is the config's user ("1234", "65535:65535"); empty runs as
	// root. Upstream images that run as another user by default (the e2e
	// suite's nonroot, pause) say so here.
	User string `json:"user,omitempty"`
	// Architecture is the OCI one (amd64, arm64); amd64 when empty.
	Architecture string `json:"architecture,omitempty"`
	// Root is the image's content, in the node image spec's layer format.
	Root spec.Layer `json:"root"`
	// Registry adds images laid out for agnhost's fake registry server.
	Registry *Registry `json:"registry,omitempty"`
}

// Parse expands ${NAME} from vars in data, then decodes and checks the spec
// strictly (an unknown field is an error).
func Parse(data []byte, vars map[string]string) (*Spec, error) {
	var missing []string
	expanded := os.Expand(string(data), func(name string) string {
		if name == "$" {
			return "$"
		}
		if "${"+name+"}" == spec.MultiarchVar {
			return spec.MultiarchVar
		}
		v, ok := vars[name]
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("image spec uses variables with no value: %s (pass -var NAME=VALUE)", strings.Join(missing, ", "))
	}
	var s Spec
	if err := yaml.UnmarshalStrict([]byte(expanded), &s); err != nil {
		return nil, fmt.Errorf("decoding image spec: %w", err)
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Load reads and parses the spec at file.
func Load(file string, vars map[string]string) (*Spec, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading image spec: %w", err)
	}
	s, err := Parse(data, vars)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return s, nil
}

func (s *Spec) validate() error {
	switch {
	case s.Name == "":
		return fmt.Errorf("name is required")
	case s.Title == "":
		return fmt.Errorf("title is required (the org.opencontainers.image.title annotation)")
	case s.Version == "":
		return fmt.Errorf("version is required (the org.opencontainers.image.version annotation)")
	case len(s.Command) > 0 && (len(s.Entrypoint) > 0 || len(s.Cmd) > 0):
		return fmt.Errorf("command %q with an entrypoint or cmd: command is only for an image that names no program", s.Command)
	case len(s.Command) > 0 && !strings.HasPrefix(s.Command[0], "/"):
		return fmt.Errorf("command %q: want an absolute program path first", s.Command)
	case len(s.Entrypoint) == 0 && len(s.Cmd) == 0 && len(s.Command) == 0:
		return fmt.Errorf("entrypoint and cmd are empty: want an absolute program path first in entrypoint, or a program in cmd (or, for an image that names none, the pods' program in command)")
	case len(s.Entrypoint) > 0 && !strings.HasPrefix(s.Entrypoint[0], "/"):
		return fmt.Errorf("entrypoint %q: want an absolute program path first", s.Entrypoint)
	case len(s.Entrypoint) == 0 && len(s.Cmd) > 0 && s.Cmd[0] == "":
		return fmt.Errorf("cmd %q: want a program first", s.Cmd)
	}
	if _, ok := elfarch.Machine(s.arch()); !ok {
		return fmt.Errorf("architecture %q: want one of %s", s.Architecture, elfarch.Names)
	}
	if len(s.Root.Images) > 0 {
		return fmt.Errorf("root.images: a container image holds no images (a registry's files go under registry)")
	}
	if s.Registry != nil {
		if err := s.Registry.validate(); err != nil {
			return err
		}
	}
	return s.Root.Validate()
}

func (s *Spec) arch() string {
	if s.Architecture == "" {
		return "amd64"
	}
	return s.Architecture
}

// Build assembles the image's content (relative paths in the spec are under
// repoRoot, absolute ones under sysroot: the builder's own / when empty)
// and checks it: every ELF file is for the image's architecture and the
// program it starts (the entrypoint's, or the cmd's along PATH) is in the
// image.
func Build(ctx context.Context, s *Spec, repoRoot, sysroot string) (oci.Image, error) {
	t, err := assemble.LayerTreeFrom(ctx, s.Root, s.inputs(repoRoot, sysroot))
	if err != nil {
		return oci.Image{}, fmt.Errorf("image %s: %w", s.Name, err)
	}
	img := oci.Image{
		Name:         s.Name,
		Entrypoint:   s.Entrypoint,
		Cmd:          s.Cmd,
		Env:          s.Env,
		WorkingDir:   s.WorkingDir,
		User:         s.User,
		Architecture: s.arch(),
		Annotations:  map[string]string{oci.AnnotationTitle: s.Title, oci.AnnotationVersion: s.Version},
	}
	want, _ := elfarch.Machine(s.arch())
	for _, e := range t.Entries() {
		if e.Path == "/" {
			continue
		}
		f := oci.File{Path: e.Path, Mode: fstree.GoMode(e.Perm)}
		switch e.Kind {
		case fstree.Dir:
			f.Dir = true
		case fstree.Symlink:
			f.Symlink = e.Target
		case fstree.File:
			if err := elfarch.Check(e.Path, e.Data, want); err != nil {
				return oci.Image{}, fmt.Errorf("image %s: %w", s.Name, err)
			}
			f.Data = e.Data
		}
		img.Files = append(img.Files, f)
	}
	if s.Registry != nil {
		reg, err := s.Registry.files(repoRoot, s.arch())
		if err != nil {
			return oci.Image{}, fmt.Errorf("image %s: %w", s.Name, err)
		}
		have := map[string]bool{}
		for _, f := range img.Files {
			have[path.Clean("/"+f.Path)] = true
		}
		for _, f := range reg {
			p := path.Clean("/" + f.Path)
			if have[p] && !f.Dir {
				return oci.Image{}, fmt.Errorf("image %s: registry file %s is also in root", s.Name, p)
			}
			if !have[p] {
				img.Files = append(img.Files, f)
			}
		}
	}
	prog, err := s.program(img.Files)
	if err != nil {
		return oci.Image{}, fmt.Errorf("image %s: %w", s.Name, err)
	}
	if err := checkEntrypoint(img.Files, prog); err != nil {
		return oci.Image{}, fmt.Errorf("image %s: %w", s.Name, err)
	}
	return img, nil
}

// program is the path the runtime execs: the entrypoint's first word, or
// with no entrypoint the cmd's, which upstream images (busybox's ["sh"],
// nonewprivs' ["nnp"]) often name bare, to be found along the image's
// PATH as the runtime finds it; for an image that names neither, the
// command its pods give.
func (s *Spec) program(files []oci.File) (string, error) {
	if len(s.Entrypoint) > 0 {
		return s.Entrypoint[0], nil
	}
	if len(s.Cmd) == 0 {
		return s.Command[0], nil
	}
	name := s.Cmd[0]
	if strings.Contains(name, "/") {
		return path.Join("/", name), nil
	}
	var dirs []string
	for _, e := range s.Env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			dirs = strings.Split(v, ":")
		}
	}
	if len(dirs) == 0 {
		return "", fmt.Errorf("cmd %q: a bare program name needs PATH in env to be found", s.Cmd)
	}
	have := map[string]bool{}
	for _, f := range files {
		have[path.Clean("/"+f.Path)] = !f.Dir
	}
	for _, d := range dirs {
		if p := path.Join("/", d, name); have[p] {
			return p, nil
		}
	}
	return "", fmt.Errorf("cmd %q: %s is in no directory of PATH %s", s.Cmd, name, strings.Join(dirs, ":"))
}

// HostFiles lists, sorted, the absolute host paths (the target's, read
// under sysroot) that the image copies: programs, the libraries they need,
// plugins, files, busybox; the repository's build outputs are not among
// them and need not exist yet. make sysroot maps them to the packages to
// unpack for another architecture.
func HostFiles(ctx context.Context, s *Spec, repoRoot, sysroot string) ([]string, error) {
	in := s.inputs(repoRoot, sysroot)
	in.Spec = &spec.Spec{Root: s.Root}
	files, err := assemble.HostFiles(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", s.Name, err)
	}
	return files, nil
}

func (s *Spec) inputs(repoRoot, sysroot string) assemble.Inputs {
	return assemble.Inputs{RepoRoot: repoRoot, Arch: s.arch(), Sysroot: sysroot}
}

// checkEntrypoint follows symlinks inside the image from prog to a regular
// executable file, as the runtime's exec would.
func checkEntrypoint(files []oci.File, prog string) error {
	byPath := map[string]oci.File{}
	for _, f := range files {
		byPath[path.Clean("/"+f.Path)] = f
	}
	p := path.Clean(prog)
	for range 16 {
		f, ok := byPath[p]
		switch {
		case !ok:
			return fmt.Errorf("entrypoint %s: %s is not in the image", prog, p)
		case f.Dir:
			return fmt.Errorf("entrypoint %s: %s is a directory", prog, p)
		case f.Symlink != "":
			if path.IsAbs(f.Symlink) {
				p = path.Clean(f.Symlink)
			} else {
				p = path.Join(path.Dir(p), f.Symlink)
			}
			continue
		case f.Mode&0o111 == 0:
			return fmt.Errorf("entrypoint %s: %s is not executable (mode %04o)", prog, p, f.Mode)
		}
		return nil
	}
	return fmt.Errorf("entrypoint %s: too many levels of symlinks", prog)
}
