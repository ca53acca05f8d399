// Package spec reads the image builder's spec file: which kernel modules,
// programs, files and directories go into the initramfs and the root image,
// and per-variant additions (the test image adds busybox and helpers).
// The file is YAML or JSON (sigs.k8s.io/yaml); unknown fields are errors so
// a typo cannot silently drop something from the image.
package spec

import (
	"fmt"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// Spec is the whole file.
type Spec struct {
	// Modules are kernel modules to ship, by name; their dependency closure
	// is added automatically. A trailing "?" marks a module that may be
	// built in or absent from this kernel.
	Modules []string `json:"modules"`
	// Preload are loaded at boot whatever the hardware, in order.
	Preload []string `json:"preload"`
	// Early are the modules, besides the preload list and the device
	// drivers (modules with a bus alias, which coldplug may load), that
	// berth loads before the root is mounted: what it takes to reach the
	// root. Only these closures go into the initramfs; every module goes
	// into the root image, which the rest of boot and the node's life
	// load from.
	Early []string `json:"early"`
	// KernelArgs are kernel command-line words every boot of the image
	// gets: the disk's UKI carries them after its console, and a
	// direct-kernel boot (QEMU) passes them from the manifest.
	KernelArgs []string `json:"kernelArgs,omitempty"`
	// Root is the root image (erofs) content.
	Root Layer `json:"root"`
	// Initramfs is extra initramfs content (berth, modules, the manifest and
	// the root image are added by the builder).
	Initramfs Layer `json:"initramfs"`
	// SandboxImage is the pause image reference containerd is configured
	// with; an image of that name must be among the layers' Images.
	SandboxImage string `json:"sandboxImage,omitempty"`
	// Variants add to the base, by variant name.
	Variants map[string]Variant `json:"variants,omitempty"`
}

// Variant is what a named variant adds to the base spec.
type Variant struct {
	Modules []string `json:"modules,omitempty"`
	Preload []string `json:"preload,omitempty"`
	Early   []string `json:"early,omitempty"`
	// KernelArgs come after the base's.
	KernelArgs []string `json:"kernelArgs,omitempty"`
	Root       Layer    `json:"root"`
	Initramfs  Layer    `json:"initramfs"`
}

// Layer is content for one file tree.
type Layer struct {
	Dirs     []Dir     `json:"dirs,omitempty"`
	Files    []File    `json:"files,omitempty"`
	Symlinks []Symlink `json:"symlinks,omitempty"`
	Binaries []Binary  `json:"binaries,omitempty"`
	GoBuild  []GoBuild `json:"goBuild,omitempty"`
	Busybox  *Busybox  `json:"busybox,omitempty"`
	// Plugins are directories of shared objects that programs dlopen
	// (iptables' extensions): no ELF walk from a binary finds them, so
	// they are named here and copied with the libraries they need.
	Plugins []Plugins `json:"plugins,omitempty"`
	// Images are OCI image tarballs that berth imports into containerd
	// after it is ready (no registry is needed for them).
	Images []Image `json:"images,omitempty"`
}

// Image is an OCI image-layout tarball and the reference it is imported
// under.
type Image struct {
	Name string `json:"name"`
	Src  string `json:"src"`
	Dst  string `json:"dst"`
}

// Dir is an empty directory (a mount point, usually).
type Dir struct {
	Path string `json:"path"`
	Mode Mode   `json:"mode"`
}

// File is a file copied from the build host (Src, relative to the repository
// root or absolute) or given inline (Content).
type File struct {
	Dst     string `json:"dst"`
	Src     string `json:"src,omitempty"`
	Content string `json:"content,omitempty"`
	Mode    Mode   `json:"mode"`
	// Optional files are skipped when Src does not exist on the build host.
	Optional bool `json:"optional,omitempty"`
}

// Symlink is a symbolic link.
type Symlink struct {
	Path   string `json:"path"`
	Target string `json:"target"`
}

// Binary is a host program copied with the shared libraries it needs.
type Binary struct {
	// Name is looked up in PATH plus the sbin directories when Src is empty.
	Name string `json:"name"`
	Src  string `json:"src,omitempty"`
	// Dst defaults to /usr/sbin/NAME.
	Dst string `json:"dst,omitempty"`
	// Tool records the program in the manifest's tools (name → Dst).
	Tool bool `json:"tool,omitempty"`
	// Links are symlinks to the program beside Dst, by name: a multi-call
	// program's names (iptables, iptables-save... for xtables-nft-multi).
	Links []string `json:"links,omitempty"`
}

// Plugins is every file in Dir whose name matches Glob, copied to the same
// path, with the shared libraries the files need. A symlink to a file
// beside it stays a link, and its target is shipped with it.
type Plugins struct {
	// Dir is absolute, on the build host (or sysroot) and in the image
	// alike: programs find their plugins by a compiled-in path, which
	// holds the architecture's multiarch tuple. MultiarchVar in it stands
	// for the image's (x86_64-linux-gnu, aarch64-linux-gnu), so one spec
	// serves every architecture.
	Dir string `json:"dir"`
	// Glob is a path.Match pattern for file names in Dir; "*.so" when empty.
	Glob string `json:"glob,omitempty"`
}

// MultiarchVar in a plugins dir is replaced by the image architecture's
// Debian multiarch tuple.
const MultiarchVar = "${MULTIARCH}"

// GoBuild is a Go main package of this module built static and copied in.
type GoBuild struct {
	Package string `json:"package"`
	Dst     string `json:"dst"`
}

// Busybox is a static busybox with applet symlinks beside it.
type Busybox struct {
	Src     string   `json:"src"`
	Dst     string   `json:"dst"`
	Applets []string `json:"applets"`
}

// Mode is an octal permission string such as "0755" in the file.
type Mode uint32

// UnmarshalJSON reads "0755" (a string, so YAML cannot misread it as decimal).
func (m *Mode) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	v, err := strconv.ParseUint(s, 8, 32)
	if err != nil || v > 0o7777 {
		return fmt.Errorf("mode %s: want an octal string like \"0755\"", b)
	}
	*m = Mode(v)
	return nil
}

// MarshalJSON writes the octal string form.
func (m Mode) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf(`"%04o"`, uint32(m))), nil
}

// Parse decodes a spec strictly.
func Parse(data []byte) (*Spec, error) {
	var s Spec
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		return nil, fmt.Errorf("decoding image spec: %w", err)
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Expand replaces ${NAME} in a spec's text by vars[NAME]: build outputs
// whose place depends on the build (NODE_COMPONENTS: the node components of
// the image's architecture). MultiarchVar is left for the builder, which
// knows the architecture. A name with no value is an error, so a typo
// cannot turn into a path.
func Expand(data []byte, vars map[string]string) ([]byte, error) {
	var missing []string
	out := os.Expand(string(data), func(name string) string {
		if "${"+name+"}" == MultiarchVar {
			return MultiarchVar
		}
		v, ok := vars[name]
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("image spec uses variables with no value: %s (mkimage -var NAME=VALUE)", strings.Join(missing, ", "))
	}
	return []byte(out), nil
}

// Load reads the spec at path, expands vars in it and parses it.
func Load(path string, vars map[string]string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading image spec: %w", err)
	}
	data, err = Expand(data, vars)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

func (s *Spec) validate() error {
	check := func(where string, l Layer) error {
		for i, f := range l.Files {
			if !strings.HasPrefix(f.Dst, "/") {
				return fmt.Errorf("%s.files[%d].dst %q: must be absolute", where, i, f.Dst)
			}
			if (f.Src == "") == (f.Content == "") {
				return fmt.Errorf("%s.files[%d] (%s): set exactly one of src and content", where, i, f.Dst)
			}
		}
		for i, d := range l.Dirs {
			if !strings.HasPrefix(d.Path, "/") {
				return fmt.Errorf("%s.dirs[%d].path %q: must be absolute", where, i, d.Path)
			}
		}
		for i, b := range l.Binaries {
			if b.Name == "" {
				return fmt.Errorf("%s.binaries[%d]: name is required", where, i)
			}
			for _, ln := range b.Links {
				if ln == "" || strings.Contains(ln, "/") {
					return fmt.Errorf("%s.binaries[%d] (%s).links: %q must be a plain file name", where, i, b.Name, ln)
				}
			}
		}
		for i, p := range l.Plugins {
			if !strings.HasPrefix(p.Dir, "/") {
				return fmt.Errorf("%s.plugins[%d].dir %q: must be absolute", where, i, p.Dir)
			}
			if _, err := path.Match(p.Glob, ""); err != nil {
				return fmt.Errorf("%s.plugins[%d].glob %q: %w", where, i, p.Glob, err)
			}
		}
		for i, im := range l.Images {
			if im.Name == "" || im.Src == "" || !strings.HasPrefix(im.Dst, "/") {
				return fmt.Errorf("%s.images[%d]: name and src are required and dst must be absolute", where, i)
			}
		}
		for i, g := range l.GoBuild {
			if !strings.HasPrefix(g.Package, "./") || !strings.HasPrefix(g.Dst, "/") {
				return fmt.Errorf("%s.goBuild[%d]: package must start with ./ and dst be absolute", where, i)
			}
		}
		if bb := l.Busybox; bb != nil {
			// A repeat is most often YAML 1.1 at work: an unquoted yes
			// (or on, y) in the list decodes as true, so the yes applet
			// silently went missing beside true.
			seen := map[string]int{}
			for i, a := range bb.Applets {
				if j, ok := seen[a]; ok {
					return fmt.Errorf("%s.busybox.applets[%d] and [%d] are both %q (quote yes, no, on, off, y and n: YAML reads them as booleans)", where, j, i, a)
				}
				seen[a] = i
			}
		}
		return nil
	}
	if err := check("root", s.Root); err != nil {
		return err
	}
	if err := check("initramfs", s.Initramfs); err != nil {
		return err
	}
	if err := checkKernelArgs("kernelArgs", s.KernelArgs); err != nil {
		return err
	}
	names := make([]string, 0, len(s.Variants))
	for n := range s.Variants {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		v := s.Variants[n]
		if err := check("variants."+n+".root", v.Root); err != nil {
			return err
		}
		if err := check("variants."+n+".initramfs", v.Initramfs); err != nil {
			return err
		}
		if err := checkKernelArgs("variants."+n+".kernelArgs", v.KernelArgs); err != nil {
			return err
		}
	}
	return nil
}

// checkKernelArgs refuses words the command line cannot carry as one word,
// and the ones the builders and boots set themselves: console= is the
// platform's (EC2's ttyS0, QEMU's), berth.verity= the disk builder's.
func checkKernelArgs(where string, args []string) error {
	for i, a := range args {
		switch {
		case a == "" || strings.ContainsAny(a, " \t\n\"'"):
			return fmt.Errorf("%s[%d] %q: must be one word, without spaces or quotes", where, i, a)
		case strings.HasPrefix(a, "console="), strings.HasPrefix(a, "berth.verity="):
			return fmt.Errorf("%s[%d] %q: %s is set by whatever boots the image, not by the image", where, i, a, strings.SplitN(a, "=", 2)[0])
		}
	}
	return nil
}

// Resolve returns the base spec with variant added ("" or "default" for the
// base alone), without Variants.
func (s *Spec) Resolve(variant string) (*Spec, error) {
	out := &Spec{
		Modules:      append([]string(nil), s.Modules...),
		Preload:      append([]string(nil), s.Preload...),
		Early:        append([]string(nil), s.Early...),
		KernelArgs:   append([]string(nil), s.KernelArgs...),
		Root:         s.Root,
		Initramfs:    s.Initramfs,
		SandboxImage: s.SandboxImage,
	}
	if variant == "" || variant == "default" {
		return out, nil
	}
	v, ok := s.Variants[variant]
	if !ok {
		return nil, fmt.Errorf("image spec has no variant %q", variant)
	}
	out.Modules = append(out.Modules, v.Modules...)
	out.Preload = append(out.Preload, v.Preload...)
	out.Early = append(out.Early, v.Early...)
	out.KernelArgs = append(out.KernelArgs, v.KernelArgs...)
	out.Root = merge(s.Root, v.Root)
	out.Initramfs = merge(s.Initramfs, v.Initramfs)
	return out, nil
}

func merge(a, b Layer) Layer {
	out := Layer{
		Dirs:     append(append([]Dir(nil), a.Dirs...), b.Dirs...),
		Files:    append(append([]File(nil), a.Files...), b.Files...),
		Symlinks: append(append([]Symlink(nil), a.Symlinks...), b.Symlinks...),
		Binaries: append(append([]Binary(nil), a.Binaries...), b.Binaries...),
		GoBuild:  append(append([]GoBuild(nil), a.GoBuild...), b.GoBuild...),
		Busybox:  a.Busybox,
		Plugins:  append(append([]Plugins(nil), a.Plugins...), b.Plugins...),
		Images:   append(append([]Image(nil), a.Images...), b.Images...),
	}
	if b.Busybox != nil {
		out.Busybox = b.Busybox
	}
	return out
}
