package kmod

import (
	"strings"
	"testing"
)

// FuzzParseDep: modules.dep comes from the image; whatever it holds, parsing
// and resolving must not panic or loop, and what resolves is each module once.
func FuzzParseDep(f *testing.F) {
	f.Add("kernel/a.ko: kernel/b.ko kernel/c.ko\nkernel/b.ko:\nkernel/c.ko: kernel/b.ko\n")
	f.Fuzz(func(t *testing.T, data string) {
		deps, err := ParseDep(strings.NewReader(data))
		if err != nil {
			return
		}
		ix := NewIndex("/m", deps, nil, nil)
		var names []string
		for _, e := range deps {
			names = append(names, e.Path)
		}
		order, _ := ix.Resolve(names...)
		seen := map[string]bool{}
		for _, m := range order {
			if seen[m] {
				t.Fatalf("module %s resolved twice: %v", m, order)
			}
			seen[m] = true
		}
	})
}

// FuzzParseAlias: modules.alias comes from the image; parsing and matching
// its patterns must not panic.
func FuzzParseAlias(f *testing.F) {
	f.Add("alias pci:v00001AF4d*sv*sd*bc*sc*i* virtio_pci\n", "pci:v00001AF4d00001000sv00001AF4sd00000001bc02sc00i00")
	f.Fuzz(func(t *testing.T, data, modalias string) {
		aliases, err := ParseAlias(strings.NewReader(data))
		if err != nil {
			return
		}
		ix := NewIndex("/m", nil, aliases, nil)
		_ = ix.Match(modalias)
		for _, a := range aliases {
			if strings.ContainsAny(a.Module, "-") {
				t.Fatalf("module name %q not normalised", a.Module)
			}
		}
	})
}

// FuzzGlob: a pattern without special bytes matches exactly itself, and no
// pattern panics.
func FuzzGlob(f *testing.F) {
	f.Add("pci:v*d*sv*sd*bc01sc08i02*", "pci:v00001B36d00000010sv00001AF4sd00001100bc01sc08i02")
	f.Add("x[!0-9]", "xa")
	f.Fuzz(func(t *testing.T, pattern, s string) {
		got := Glob(pattern, s)
		if !strings.ContainsAny(pattern, `*?[\`) && got != (pattern == s) {
			t.Fatalf("Glob(%q, %q) = %v for a literal pattern", pattern, s, got)
		}
		if Glob(pattern+"*", s+pattern) == false && Glob(pattern, s) && !strings.ContainsAny(pattern, `\[`) {
			t.Fatalf("Glob(%q*, %q) false but Glob(%q, %q) true", pattern, s+pattern, pattern, s)
		}
	})
}

// FuzzParseSoftdep: modules.softdep comes from the image; whatever it
// holds, parsing must not panic, and resolving with what it parsed must
// terminate with each module once, even with soft dependency cycles.
func FuzzParseSoftdep(f *testing.F) {
	f.Add("softdep libcrc32c pre: crc32c\nsoftdep a pre: b post: c\nsoftdep b pre: a\n")
	f.Fuzz(func(t *testing.T, data string) {
		sds, err := ParseSoftdep(strings.NewReader(data))
		if err != nil {
			return
		}
		var deps []DepEntry
		var names []string
		for _, sd := range sds {
			if sd.Module == "" || strings.ContainsAny(sd.Module, ":/") {
				return
			}
			deps = append(deps, DepEntry{Path: "kernel/" + sd.Module + ".ko"})
			names = append(names, sd.Module)
		}
		ix := NewIndex("/m", deps, nil, nil).WithSoftdeps(sds)
		order, _ := ix.Resolve(names...)
		seen := map[string]bool{}
		for _, m := range order {
			if seen[m] {
				t.Fatalf("module %s resolved twice: %v", m, order)
			}
			seen[m] = true
		}
	})
}
