// Package moddeps computes, at image build time, the kernel module data that
// depmod would: which modules each one depends on (modules.dep) and which
// device aliases each one serves (modules.alias). Debian's kernel package
// ships neither, and the image has no kmod tools, so the builder derives them
// from each module's own .modinfo ELF section (depends=, alias=, name=).
//
// Reading (.modinfo) is separate from deciding (the closure and the text
// formats), so the deciding half is tested on synthetic data.
package moddeps

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Module is one loadable module as its .modinfo describes it.
type Module struct {
	// Name is the module name with '-' folded to '_' (as the kernel does).
	Name string
	// Path is relative to /lib/modules/<kver>, e.g. "kernel/fs/xfs/xfs.ko".
	Path string
	// Depends are the names of the modules it needs (folded).
	Depends []string
	// Aliases are the alias= patterns, e.g. "pci:v00001AF4d00001000sv*sd*bc*sc*i*".
	Aliases []string
	// SoftPre are modules or aliases named by "softdep=pre: ..." (folded),
	// written to modules.softdep, which berth's loader follows.
	SoftPre []string
}

// Normalize folds a module name or file name to the kernel's module name:
// no directory, no .ko suffix, '-' as '_'.
func Normalize(name string) string {
	name = filepath.Base(name)
	name = strings.TrimSuffix(name, ".ko")
	return strings.ReplaceAll(name, "-", "_")
}

// ParseModinfo decodes the contents of a .modinfo section: NUL-separated
// key=value strings. path is only used for the Module and for errors.
func ParseModinfo(path string, data []byte) (Module, error) {
	m := Module{Path: path}
	for _, field := range bytes.Split(data, []byte{0}) {
		if len(field) == 0 {
			continue
		}
		key, val, ok := strings.Cut(string(field), "=")
		if !ok {
			return Module{}, fmt.Errorf("%s: .modinfo field %q has no '='", path, field)
		}
		switch key {
		case "name":
			m.Name = Normalize(val)
		case "depends":
			for _, d := range strings.Split(val, ",") {
				if d = strings.TrimSpace(d); d != "" {
					m.Depends = append(m.Depends, Normalize(d))
				}
			}
		case "alias":
			m.Aliases = append(m.Aliases, val)
		case "softdep":
			m.SoftPre = append(m.SoftPre, parseSoftPre(val)...)
		}
	}
	if m.Name == "" {
		m.Name = Normalize(path)
	}
	return m, nil
}

// parseSoftPre reads "pre: a b post: c" and returns the pre modules.
func parseSoftPre(val string) []string {
	var out []string
	pre := false
	for _, w := range strings.Fields(val) {
		switch w {
		case "pre:":
			pre = true
		case "post:":
			pre = false
		default:
			if pre {
				out = append(out, Normalize(w))
			}
		}
	}
	return out
}

// ReadModule reads the .modinfo section of the module file at
// filepath.Join(dir, rel).
func ReadModule(dir, rel string) (Module, error) {
	full := filepath.Join(dir, rel)
	f, err := elf.Open(full)
	if err != nil {
		return Module{}, fmt.Errorf("reading module %s: %w", full, err)
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return Module{}, fmt.Errorf("module %s has no .modinfo section", full)
	}
	data, err := sec.Data()
	if err != nil {
		return Module{}, fmt.Errorf("reading .modinfo of %s: %w", full, err)
	}
	return ParseModinfo(rel, data)
}

// Tree is the set of module files under one /lib/modules/<kver> directory,
// indexed by name without reading them.
type Tree struct {
	Dir     string
	paths   map[string]string // name → rel path
	builtin map[string]bool
}

// Scan indexes every .ko under dir/kernel and the names in dir/modules.builtin.
func Scan(dir string) (*Tree, error) {
	t := &Tree{Dir: dir, paths: map[string]string{}, builtin: map[string]bool{}}
	err := filepath.WalkDir(filepath.Join(dir, "kernel"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, ".ko") {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		name := Normalize(rel)
		if prev, dup := t.paths[name]; dup {
			return fmt.Errorf("module %s found twice: %s and %s", name, prev, rel)
		}
		t.paths[name] = rel
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("scanning modules under %s: %w", dir, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "modules.builtin"))
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("reading modules.builtin: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			t.builtin[Normalize(line)] = true
		}
	}
	return t, nil
}

// Builtin reports whether name is compiled into the kernel.
func (t *Tree) Builtin(name string) bool { return t.builtin[Normalize(name)] }

// Path returns the rel path of the module file for name.
func (t *Tree) Path(name string) (string, bool) {
	p, ok := t.paths[Normalize(name)]
	return p, ok
}

// Request is one module the image asks for.
type Request struct {
	Name string
	// Optional modules may be built in or absent; others must be loadable
	// or built in.
	Optional bool
}

// Selection is the outcome of Select.
type Selection struct {
	// Modules is the dependency closure, sorted by name.
	Modules []Module
	// Builtin are requested names compiled into the kernel (nothing to ship).
	Builtin []string
	// Missing are optional requests that are neither a module nor built in.
	Missing []string
}

// Select reads the requested modules and, transitively, what they depend on.
func (t *Tree) Select(reqs []Request) (*Selection, error) {
	sel := &Selection{}
	got := map[string]Module{}
	var queue []string
	for _, r := range reqs {
		name := Normalize(r.Name)
		if _, ok := t.paths[name]; ok {
			queue = append(queue, name)
			continue
		}
		switch {
		case t.builtin[name]:
			sel.Builtin = append(sel.Builtin, name)
		case r.Optional:
			sel.Missing = append(sel.Missing, name)
		default:
			return nil, fmt.Errorf("module %q: no %s.ko under %s/kernel and not in modules.builtin", r.Name, name, t.Dir)
		}
	}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if _, done := got[name]; done {
			continue
		}
		rel := t.paths[name]
		m, err := ReadModule(t.Dir, rel)
		if err != nil {
			return nil, err
		}
		got[name] = m
		for _, d := range m.Depends {
			if _, ok := t.paths[d]; !ok {
				if t.builtin[d] {
					continue
				}
				return nil, fmt.Errorf("module %s depends on %s, which is neither a module nor built in", name, d)
			}
			queue = append(queue, d)
		}
	}
	for _, m := range got {
		sel.Modules = append(sel.Modules, m)
	}
	sort.Slice(sel.Modules, func(i, j int) bool { return sel.Modules[i].Name < sel.Modules[j].Name })
	sort.Strings(sel.Builtin)
	sort.Strings(sel.Missing)
	return sel, nil
}

// Closure returns, for module name, every module it needs, ordered as
// depmod does: the direct dependencies first and the deepest last, so that
// loading the list from its end to its start satisfies each module's needs.
// Dependencies not in mods (built-in ones) are left out.
func Closure(mods map[string]Module, name string) ([]string, error) {
	var post []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(n string, chain []string) error
	visit = func(n string, chain []string) error {
		switch state[n] {
		case 1:
			return fmt.Errorf("module dependency cycle: %s", strings.Join(append(chain, n), " -> "))
		case 2:
			return nil
		}
		state[n] = 1
		m, ok := mods[n]
		if !ok {
			state[n] = 2
			return nil
		}
		for _, d := range m.Depends {
			if err := visit(d, append(chain, n)); err != nil {
				return err
			}
		}
		state[n] = 2
		post = append(post, n)
		return nil
	}
	if err := visit(name, nil); err != nil {
		return nil, err
	}
	// post is deps-first and ends with name itself.
	post = post[:len(post)-1]
	out := make([]string, 0, len(post))
	for i := len(post) - 1; i >= 0; i-- {
		if _, ok := mods[post[i]]; ok {
			out = append(out, post[i])
		}
	}
	return out, nil
}

// DepFile renders modules.dep for mods: one line per module, sorted by path,
// "PATH: DEP_PATH DEP_PATH...".
func DepFile(mods []Module) ([]byte, error) {
	byName := make(map[string]Module, len(mods))
	for _, m := range mods {
		byName[m.Name] = m
	}
	sorted := append([]Module(nil), mods...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	var b bytes.Buffer
	for _, m := range sorted {
		deps, err := Closure(byName, m.Name)
		if err != nil {
			return nil, err
		}
		b.WriteString(m.Path)
		b.WriteString(":")
		for _, d := range deps {
			b.WriteString(" ")
			b.WriteString(byName[d].Path)
		}
		b.WriteString("\n")
	}
	return b.Bytes(), nil
}

// AliasFile renders modules.alias for mods: "alias PATTERN NAME", sorted by
// module name then in .modinfo order, as depmod writes it.
func AliasFile(mods []Module) []byte {
	sorted := append([]Module(nil), mods...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var b bytes.Buffer
	b.WriteString("# Aliases extracted from modules themselves.\n")
	for _, m := range sorted {
		for _, a := range m.Aliases {
			fmt.Fprintf(&b, "alias %s %s\n", a, m.Name)
		}
	}
	return b.Bytes()
}

// SoftdepFile renders modules.softdep for mods: "softdep NAME pre: A B" for
// each module whose .modinfo names soft pre-dependencies (e.g. libcrc32c
// needs a crc32c implementation, an alias, loaded first: with no modprobe
// for the kernel to call, the loader must do it).
func SoftdepFile(mods []Module) []byte {
	sorted := append([]Module(nil), mods...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var b bytes.Buffer
	b.WriteString("# Soft dependencies extracted from modules themselves.\n")
	for _, m := range sorted {
		if len(m.SoftPre) > 0 {
			fmt.Fprintf(&b, "softdep %s pre: %s\n", m.Name, strings.Join(m.SoftPre, " "))
		}
	}
	return b.Bytes()
}
