// Command containerdaccepts writes what containerd accepts in the files
// berth writes for it, as JSON (config/accepts's Containerd, under
// "containerd"): the config versions it reads, config.toml's keys with
// their types (the main config and the CRI plugins' sections, whose types
// live in containerd's internal packages), the OCI runtime spec's fields
// that the base runtime spec is decoded into, and runc's options, which a
// CRI runtime's options table is decoded into when containerd starts a
// container. It reads the Go types
// of the containerd module version this module requires (components.mk's
// CONTAINERD_VERSION) with go/packages: it never runs containerd, so it
// works on the amd64 build host for an arm64 image too.
//
//	go run . -out FILE
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"go/constant"
	"go/types"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"golang.org/x/tools/go/packages"
)

const (
	modulePath   = "github.com/containerd/containerd/v2"
	serverConfig = modulePath + "/cmd/containerd/server/config"
	criConfig    = modulePath + "/internal/cri/config"
	versionPkg   = modulePath + "/version"
	pluginsPkg   = modulePath + "/plugins"
	specsPkg     = "github.com/opencontainers/runtime-spec/specs-go"
	// runcOptionsPkg holds the type containerd decodes the options of a
	// runtime of type plugins.RuntimeRuncV2 into (internal/cri/config's
	// getRuntimeOptionsType).
	runcOptionsPkg = "github.com/containerd/containerd/api/types/runc/options"
)

// criPlugins are the plugin sections berth's config.toml has, by the
// plugin IDs containerd registers them under (plugins/cri/images,
// plugins/cri/runtime, plugins/cri), and the config type of each.
var criPlugins = map[string]string{
	"io.containerd.cri.v1.images":  "ImageConfig",
	"io.containerd.cri.v1.runtime": "RuntimeConfig",
	"io.containerd.grpc.v1.cri":    "ServerConfig",
}

// The types below are config/accepts's, field for field (this module does
// not require berth's); berth decodes the file strictly.
type output struct {
	Containerd *ctrd `json:"containerd"`
}

type ctrd struct {
	Version        string `json:"version"`
	ConfigVersions []int  `json:"configVersions"`
	Config         *typ   `json:"config"`
	RuntimeSpec    *typ   `json:"runtimeSpec"`
	// RuntimeOptions by runtime_type.
	RuntimeOptions map[string]*typ `json:"runtimeOptions,omitempty"`
}

type typ struct {
	Kind   string          `json:"kind"`
	Fields map[string]*typ `json:"fields,omitempty"`
	Elem   *typ            `json:"elem,omitempty"`
}

func main() {
	out := flag.String("out", "", "file to write (atomically)")
	flag.Parse()
	if *out == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: containerdaccepts -out FILE")
		os.Exit(2)
	}
	c, err := describe()
	if err != nil {
		fmt.Fprintf(os.Stderr, "containerdaccepts: %v\n", err)
		os.Exit(1)
	}
	if err := writeJSON(*out, output{Containerd: c}); err != nil {
		fmt.Fprintf(os.Stderr, "containerdaccepts: %v\n", err)
		os.Exit(1)
	}
}

func describe() (*ctrd, error) {
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedTypes | packages.NeedModule, Env: append(os.Environ(), "GOOS=linux", "CGO_ENABLED=0")}
	pkgs, err := packages.Load(cfg, serverConfig, criConfig, versionPkg, pluginsPkg, specsPkg, runcOptionsPkg)
	if err != nil {
		return nil, fmt.Errorf("loading containerd's packages: %w", err)
	}
	byPath := map[string]*packages.Package{}
	for _, p := range pkgs {
		if len(p.Errors) > 0 {
			return nil, fmt.Errorf("loading %s: %v", p.PkgPath, p.Errors[0])
		}
		byPath[p.PkgPath] = p
	}
	lookup := func(pkg, name string) (types.Type, error) {
		p := byPath[pkg]
		if p == nil || p.Types == nil {
			return nil, fmt.Errorf("package %s not loaded", pkg)
		}
		o := p.Types.Scope().Lookup(name)
		if o == nil {
			return nil, fmt.Errorf("%s.%s not found", pkg, name)
		}
		return o.Type(), nil
	}
	c := &ctrd{}
	if m := byPath[serverConfig].Module; m != nil {
		c.Version = m.Version
	}
	if c.Version == "" {
		return nil, fmt.Errorf("cannot tell the containerd module version")
	}

	// version.ConfigVersion is the newest version; the server migrates
	// every older one from 1 (cmd/containerd/server/config's migrations).
	cv := byPath[versionPkg].Types.Scope().Lookup("ConfigVersion")
	k, ok := cv.(*types.Const)
	if !ok {
		return nil, fmt.Errorf("%s.ConfigVersion is not a constant", versionPkg)
	}
	newest, _ := constant.Int64Val(k.Val())
	for v := 1; v <= int(newest); v++ {
		c.ConfigVersions = append(c.ConfigVersions, v)
	}

	main, err := lookup(serverConfig, "Config")
	if err != nil {
		return nil, err
	}
	c.Config = typeOf(main, "toml", 0)
	plugins := &typ{Kind: "map", Elem: &typ{Kind: "any"}, Fields: map[string]*typ{}}
	for id, name := range criPlugins {
		t, err := lookup(criConfig, name)
		if err != nil {
			return nil, err
		}
		plugins.Fields[id] = typeOf(t, "toml", 0)
	}
	// plugins is a map of plugin ID to anything; the CRI sections are
	// typed: an object whose other keys are any.
	plugins.Kind = "object"
	plugins.Fields["*"] = &typ{Kind: "any"}
	c.Config.Fields["plugins"] = plugins

	spec, err := lookup(specsPkg, "Spec")
	if err != nil {
		return nil, err
	}
	c.RuntimeSpec = typeOf(spec, "json", 0)

	// runc's options are a protobuf message without toml tags: go-toml
	// reads its keys by Go field name (SystemdCgroup, BinaryName), which
	// typeOf gives for a field without a tag.
	runc, ok := byPath[pluginsPkg].Types.Scope().Lookup("RuntimeRuncV2").(*types.Const)
	if !ok || runc.Val().Kind() != constant.String {
		return nil, fmt.Errorf("%s.RuntimeRuncV2 is not a string constant", pluginsPkg)
	}
	opts, err := lookup(runcOptionsPkg, "Options")
	if err != nil {
		return nil, err
	}
	c.RuntimeOptions = map[string]*typ{constant.StringVal(runc.Val()): typeOf(opts, "toml", 0)}
	return c, nil
}

// typeOf is t's schema as a decoder using tag names reads it: pelletier
// go-toml for containerd's config, encoding/json for the runtime spec.
// Types with a decoder of their own are any, except time.Duration's
// wrappers, which read a duration string.
func typeOf(t types.Type, tag string, depth int) *typ {
	if depth > 32 {
		return &typ{Kind: "any"}
	}
	if p, ok := t.(*types.Pointer); ok {
		return typeOf(p.Elem(), tag, depth)
	}
	if n, ok := t.(*types.Named); ok {
		if n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "time" && n.Obj().Name() == "Duration" {
			return &typ{Kind: "int64"} // a number of nanoseconds in TOML
		}
		for _, m := range []string{"UnmarshalText", "UnmarshalTOML", "UnmarshalJSON"} {
			if obj, _, _ := types.LookupFieldOrMethod(types.NewPointer(n), true, n.Obj().Pkg(), m); obj != nil {
				if _, isFunc := obj.(*types.Func); isFunc {
					if strings.Contains(strings.ToLower(n.Obj().Name()), "duration") {
						return &typ{Kind: "duration"}
					}
					return &typ{Kind: "any"}
				}
			}
		}
	}
	switch u := t.Underlying().(type) {
	case *types.Basic:
		switch {
		case u.Info()&types.IsBoolean != 0:
			return &typ{Kind: "bool"}
		case u.Info()&types.IsString != 0:
			return &typ{Kind: "string"}
		case u.Info()&types.IsFloat != 0:
			return &typ{Kind: "float"}
		case u.Info()&types.IsInteger != 0:
			return &typ{Kind: intKind(u.Kind())}
		}
	case *types.Slice:
		if b, ok := u.Elem().Underlying().(*types.Basic); ok && b.Kind() == types.Byte && tag == "json" {
			return &typ{Kind: "string"}
		}
		return &typ{Kind: "list", Elem: typeOf(u.Elem(), tag, depth+1)}
	case *types.Array:
		return &typ{Kind: "list", Elem: typeOf(u.Elem(), tag, depth+1)}
	case *types.Map:
		return &typ{Kind: "map", Elem: typeOf(u.Elem(), tag, depth+1)}
	case *types.Struct:
		o := &typ{Kind: "object", Fields: map[string]*typ{}}
		addFields(o, u, tag, depth)
		return o
	}
	return &typ{Kind: "any"}
}

func addFields(o *typ, s *types.Struct, tag string, depth int) {
	for i := range s.NumFields() {
		f := s.Field(i)
		name, opts, _ := strings.Cut(reflect.StructTag(s.Tag(i)).Get(tag), ",")
		if name == "-" || !f.Exported() && !f.Embedded() {
			continue
		}
		ft := f.Type()
		if p, ok := ft.(*types.Pointer); ok {
			ft = p.Elem()
		}
		if st, ok := ft.Underlying().(*types.Struct); ok && (f.Embedded() && name == "" || strings.Contains(","+opts+",", ",inline,")) {
			addFields(o, st, tag, depth)
			continue
		}
		if name == "" {
			name = f.Name()
		}
		o.Fields[name] = typeOf(f.Type(), tag, depth+1)
	}
}

func intKind(k types.BasicKind) string {
	switch k {
	case types.Int8:
		return "int8"
	case types.Int16:
		return "int16"
	case types.Int32:
		return "int32"
	case types.Int64, types.Int:
		return "int64"
	case types.Uint8:
		return "uint8"
	case types.Uint16:
		return "uint16"
	case types.Uint32:
		return "uint32"
	default:
		return "uint64"
	}
}

// writeJSON writes v to path through a temporary file and a rename.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".containerdaccepts-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}
