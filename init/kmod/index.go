// Package kmod loads Linux kernel modules: the ones the image manifest lists,
// and the ones that match present devices by modalias (what udev's coldplug
// does on other systems), each with its dependencies first.
//
// It reads the standard depmod text files under /lib/modules/<kver>/
// (modules.dep, modules.alias, optionally modules.builtin and
// modules.softdep), which the image builder generates because Debian's
// kernel package ships none. Soft dependencies matter because there is no
// modprobe for the kernel to call: libcrc32c, for one, fails its init
// unless a crc32c implementation (named by alias) is loaded first.
//
// u-root's pkg/kmodule was considered: it has no modules.alias support, looks
// a name up by scanning its whole dependency map, loads dependencies in
// parallel goroutines without bounding them, ignores soft dependencies, and
// does not expose its resolver for unit tests. Only its finit_module wrapper
// would fit, and that would pull in xz and zstd decoders for compressed
// modules our image never ships. So this package keeps a small resolver and
// a bounded dependency-ordered parallel loader of its own (the boot report
// still lists modules in a deterministic order), and calls
// unix.FinitModule directly.
//
// Deciding (parsing, resolving, matching, planning a coldplug pass) is pure
// and tested with fixtures; acting (finit_module, reading sysfs) is thin.
package kmod

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Index is the parsed module database of one kernel. It is read-only after
// it is built, so it can be shared.
type Index struct {
	// Dir is the directory relative paths in modules.dep are relative to.
	Dir string
	// paths maps a module name (normalised, see Name) to its file path as
	// written in modules.dep.
	paths map[string]string
	// deps maps a module name to the names of the modules it depends on, in
	// the order modules.dep lists them.
	deps map[string][]string
	// builtin modules are part of the kernel image: they count as loaded.
	builtin map[string]bool
	// aliases by the part of the pattern before its first ':' when that part
	// has no wildcard ("pci", "virtio"...), so a modalias is only matched
	// against its own bus's patterns; wild holds the rest.
	aliases map[string][]Alias
	wild    []Alias
	// soft maps a module name to its modules.softdep entry.
	soft map[string]Softdep
}

// Softdep is one line of modules.softdep: modules (names or aliases) to
// load before (Pre) and after (Post) Module, as modprobe would. Unlike
// modules.dep entries they are wishes: one that is missing or fails to load
// does not stop Module.
type Softdep struct {
	Module    string
	Pre, Post []string
}

// Alias is one line of modules.alias.
type Alias struct {
	Pattern string
	Module  string
}

// Name turns a module file name or a module name as people write it into
// the kernel's form: no directory, no .ko(.xz|.gz|.zst) suffix, '-' as '_'.
func Name(s string) string {
	s = filepath.Base(s)
	if i := strings.Index(s, ".ko"); i >= 0 {
		s = s[:i]
	}
	return strings.ReplaceAll(s, "-", "_")
}

// DepEntry is one line of modules.dep.
type DepEntry struct {
	Path string
	Deps []string // paths
}

// ParseDep parses modules.dep ("kernel/a/b.ko: kernel/c.ko kernel/d.ko").
func ParseDep(r io.Reader) ([]DepEntry, error) {
	var out []DepEntry
	err := eachLine(r, "modules.dep", func(n int, line string) error {
		path, rest, ok := strings.Cut(line, ":")
		path = strings.TrimSpace(path)
		if !ok || path == "" {
			return fmt.Errorf("modules.dep line %d: want \"path.ko: deps...\", got %q", n, line)
		}
		if !strings.Contains(filepath.Base(path), ".ko") {
			return fmt.Errorf("modules.dep line %d: %q is not a .ko file", n, path)
		}
		e := DepEntry{Path: path}
		for _, d := range strings.Fields(rest) {
			if !strings.Contains(filepath.Base(d), ".ko") {
				return fmt.Errorf("modules.dep line %d: dependency %q of %s is not a .ko file", n, d, path)
			}
			e.Deps = append(e.Deps, d)
		}
		out = append(out, e)
		return nil
	})
	return out, err
}

// ParseAlias parses modules.alias ("alias PATTERN module").
func ParseAlias(r io.Reader) ([]Alias, error) {
	var out []Alias
	err := eachLine(r, "modules.alias", func(n int, line string) error {
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "alias" {
			return fmt.Errorf("modules.alias line %d: want \"alias PATTERN module\", got %q", n, line)
		}
		out = append(out, Alias{Pattern: f[1], Module: Name(f[2])})
		return nil
	})
	return out, err
}

// ParseBuiltin parses modules.builtin (one module path per line) into names.
func ParseBuiltin(r io.Reader) ([]string, error) {
	var out []string
	err := eachLine(r, "modules.builtin", func(n int, line string) error {
		out = append(out, Name(strings.TrimSpace(line)))
		return nil
	})
	return out, err
}

// ParseSoftdep parses modules.softdep ("softdep NAME pre: A B post: C";
// either part may be missing).
func ParseSoftdep(r io.Reader) ([]Softdep, error) {
	var out []Softdep
	err := eachLine(r, "modules.softdep", func(n int, line string) error {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "softdep" || strings.HasSuffix(f[1], ":") {
			return fmt.Errorf("modules.softdep line %d: want \"softdep NAME pre: A... post: B...\", got %q", n, line)
		}
		sd := Softdep{Module: Name(f[1])}
		var dst *[]string
		for _, w := range f[2:] {
			switch w {
			case "pre:":
				dst = &sd.Pre
			case "post:":
				dst = &sd.Post
			default:
				if dst == nil {
					return fmt.Errorf("modules.softdep line %d: %q comes before \"pre:\" or \"post:\"", n, w)
				}
				*dst = append(*dst, w)
			}
		}
		out = append(out, sd)
		return nil
	})
	return out, err
}

// eachLine calls fn for every line that is neither blank nor a # comment.
func eachLine(r io.Reader, what string, fn func(n int, line string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		if err := fn(n, line); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading %s after line %d: %w", what, n, err)
	}
	return nil
}

// NewIndex builds an Index from parsed files. dir is what relative paths
// are relative to.
func NewIndex(dir string, deps []DepEntry, aliases []Alias, builtin []string) *Index {
	ix := &Index{
		Dir:     dir,
		paths:   make(map[string]string, len(deps)),
		deps:    make(map[string][]string, len(deps)),
		builtin: make(map[string]bool, len(builtin)),
		aliases: make(map[string][]Alias),
		soft:    map[string]Softdep{},
	}
	for _, e := range deps {
		name := Name(e.Path)
		ix.paths[name] = e.Path
		ds := make([]string, 0, len(e.Deps))
		for _, d := range e.Deps {
			ds = append(ds, Name(d))
		}
		ix.deps[name] = ds
	}
	for _, b := range builtin {
		ix.builtin[b] = true
	}
	for _, a := range aliases {
		bus, _, ok := strings.Cut(a.Pattern, ":")
		if ok && !strings.ContainsAny(bus, `*?[\`) {
			ix.aliases[bus] = append(ix.aliases[bus], a)
		} else {
			ix.wild = append(ix.wild, a)
		}
	}
	return ix
}

// LoadIndex reads modules.dep, modules.alias and (if present) modules.builtin
// from dir, normally /lib/modules/<uname -r>.
func LoadIndex(dir string) (*Index, error) {
	deps, err := parseFile(filepath.Join(dir, "modules.dep"), ParseDep)
	if err != nil {
		return nil, err
	}
	aliases, err := parseFile(filepath.Join(dir, "modules.alias"), ParseAlias)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	builtin, err := parseFile(filepath.Join(dir, "modules.builtin"), ParseBuiltin)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	soft, err := parseFile(filepath.Join(dir, "modules.softdep"), ParseSoftdep)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return NewIndex(dir, deps, aliases, builtin).WithSoftdeps(soft), nil
}

// WithSoftdeps adds soft dependencies to a new index (before it is shared)
// and returns it. A later entry for the same module adds to an earlier one.
func (ix *Index) WithSoftdeps(sds []Softdep) *Index {
	for _, sd := range sds {
		cur := ix.soft[sd.Module]
		cur.Module = sd.Module
		cur.Pre = append(cur.Pre, sd.Pre...)
		cur.Post = append(cur.Post, sd.Post...)
		ix.soft[sd.Module] = cur
	}
	return ix
}

func parseFile[T any](path string, parse func(io.Reader) ([]T, error)) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading module index: %w", err)
	}
	defer f.Close()
	v, err := parse(f)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	return v, nil
}

// Builtin reports whether the module is part of the kernel image.
func (ix *Index) Builtin(name string) bool { return ix.builtin[Name(name)] }

// Has reports whether the module is a loadable module in the index.
func (ix *Index) Has(name string) bool { _, ok := ix.paths[Name(name)]; return ok }

// Path is the absolute path of the module's file, "" if it is unknown.
func (ix *Index) Path(name string) string {
	p, ok := ix.paths[Name(name)]
	if !ok {
		return ""
	}
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(ix.Dir, p)
}

// Deps is the module's dependencies as modules.dep lists them.
func (ix *Index) Deps(name string) []string { return ix.deps[Name(name)] }

// Match returns the names of the modules whose alias patterns match a
// device's modalias, sorted and without duplicates.
func (ix *Index) Match(modalias string) []string {
	var out []string
	bus, _, _ := strings.Cut(modalias, ":")
	for _, list := range [][]Alias{ix.aliases[bus], ix.wild} {
		for _, a := range list {
			if Glob(a.Pattern, modalias) {
				out = append(out, a.Module)
			}
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// Known reports whether Load can do anything with name (a module name or
// an alias, as modprobe takes): it is builtin, a module in the index, or
// an alias that matches one. modprobe -q fails silently on a name that is
// not known.
func (ix *Index) Known(name string) bool {
	n := Name(name)
	if ix.builtin[n] || ix.paths[n] != "" {
		return true
	}
	for _, a := range ix.Match(name) {
		if ix.paths[a] != "" {
			return true
		}
	}
	return false
}

// Resolve orders the named modules and everything they depend on so that
// each comes after its dependencies, each once. Builtin modules are left
// out (they are loaded already). A name that is no module but an alias
// (as modprobe accepts) resolves to the modules it matches. Soft
// dependencies (modules.softdep) are followed too: "pre" ones come before
// the module, resolved through aliases like any name ("crc32c" is every
// crc32c implementation shipped), "post" ones after it. Dependency cycles,
// which a broken modules.dep could hold, are cut rather than followed. An
// unknown name is an error naming it; the others still resolve. A missing
// soft dependency is no error: modprobe ignores those too.
func (ix *Index) Resolve(names ...string) ([]string, error) {
	p, err := ix.plan(names)
	return p.order, err
}

// loadPlan is what a loader needs: the order to consider modules in (each
// after its dependencies), and for each module what it must wait for.
type loadPlan struct {
	order []string
	// after lists, for each module in order, the modules in order that must
	// be finished (loaded or failed) before it starts: its hard
	// dependencies and its soft "pre" dependencies.
	after map[string][]string
	// softOnly marks modules wanted only as soft dependencies: their
	// failure is logged but is no error (crc32c_intel on a CPU without
	// SSE4.2, say).
	softOnly map[string]bool
}

func (ix *Index) plan(names []string) (loadPlan, error) {
	p := loadPlan{after: map[string][]string{}, softOnly: map[string]bool{}}
	var (
		state   = map[string]int{} // 1 visiting, 2 done
		hard    = map[string]bool{}
		missing []string
	)
	// targets turns a name or alias into loadable module names.
	targets := func(raw string) []string {
		n := Name(raw)
		switch {
		case ix.builtin[n]:
			return nil
		case ix.paths[n] != "":
			return []string{n}
		}
		var out []string
		for _, a := range ix.Match(raw) {
			if ix.paths[a] != "" {
				out = append(out, a)
			}
		}
		return out
	}
	// markHard records that n (and so what it needs) is wanted for itself,
	// even if a soft dependency reached it first.
	var markHard func(n string)
	markHard = func(n string) {
		if hard[n] {
			return
		}
		hard[n] = true
		for _, d := range ix.deps[n] {
			markHard(d)
		}
	}
	var visit func(n string, soft bool)
	visit = func(n string, soft bool) {
		if !soft {
			markHard(n)
		}
		if state[n] != 0 || ix.builtin[n] {
			return
		}
		state[n] = 1
		var after []string
		for _, pre := range ix.soft[n].Pre {
			for _, t := range targets(pre) {
				if t == n {
					continue
				}
				visit(t, true)
				if state[t] == 2 {
					after = append(after, t)
				}
			}
		}
		for _, d := range ix.deps[n] {
			if _, known := ix.paths[d]; !known && !ix.builtin[d] {
				missing = append(missing, d+" (needed by "+n+")")
				continue
			}
			visit(d, soft)
			if state[d] == 2 {
				after = append(after, d)
			}
		}
		state[n] = 2
		p.order = append(p.order, n)
		p.after[n] = after
		for _, post := range ix.soft[n].Post {
			for _, t := range targets(post) {
				visit(t, true)
			}
		}
	}
	for _, raw := range names {
		ts := targets(raw)
		if len(ts) == 0 && !ix.builtin[Name(raw)] {
			missing = append(missing, raw)
		}
		for _, t := range ts {
			visit(t, false)
		}
	}
	for _, n := range p.order {
		if !hard[n] {
			p.softOnly[n] = true
		}
	}
	if len(missing) > 0 {
		return p, fmt.Errorf("modules not in %s/modules.dep: %s", ix.Dir, strings.Join(missing, ", "))
	}
	return p, nil
}
