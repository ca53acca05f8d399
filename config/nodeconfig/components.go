package nodeconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/berth-node/berth/config/accepts"
	"github.com/berth-node/berth/internal/ctrdv2"
	"github.com/berth-node/berth/internal/flagwords"
	"github.com/berth-node/berth/internal/syntax"
)

// Options are what validation knows beyond the NodeConfig itself.
type Options struct {
	// Accepts is what the image's kubelet and containerd accept (the image
	// manifest's). Nil, or a half missing, leaves out the checks that need
	// it, and one warning names them (NotChecked).
	Accepts *accepts.Accepts
}

// NotChecked names the checks that need what the image's components
// accept, or "" when opts has it all.
func (opts Options) NotChecked() string {
	var missing []string
	if opts.Accepts == nil || opts.Accepts.Kubelet == nil {
		missing = append(missing, "kubelet flag names and value types, feature gates, the kubelet config's apiVersion and field types, TLS cipher suites and versions, eviction signals, reservable resources")
	}
	if opts.Accepts == nil || opts.Accepts.Containerd == nil {
		missing = append(missing, "containerd config versions and key types, the base runtime spec's field types")
	}
	if len(missing) == 0 {
		return ""
	}
	return "not checked without what the image's components accept (its manifest: berth check --manifest FILE; the node has it): " + strings.Join(missing, "; ")
}

// kubeletConfigKind is the only kind a kubelet config file or drop-in
// may have.
const kubeletConfigKind = "KubeletConfiguration"

// componentProblems checks what one document gives kubelet and
// containerd: the rules of kubelet's that hold whatever its version
// (kubeletRules), and with opts.Accepts, every flag, field and key
// against what the image's kubelet and containerd accept.
func componentProblems(ps *problems, s *NodeConfigSpec, opts Options) {
	kubeletRules(ps, s.Kubelet.Config)
	if a := opts.Accepts; a != nil && a.Kubelet != nil {
		k := a.Kubelet
		kubeletFlagsAccepted(ps, s.Kubelet.Flags, k)
		kubeletConfigAccepted(ps, s.Kubelet.Config, k)
	}
	if a := opts.Accepts; a != nil && a.Containerd != nil {
		if cc := s.Containerd.Config; cc != "" {
			var m map[string]any
			if toml.Unmarshal([]byte(cc), &m) == nil {
				containerdAccepted(ps, m, a.Containerd)
			}
		}
		if len(s.Containerd.BaseRuntimeSpec) > 0 && a.Containerd.RuntimeSpec != nil {
			for _, k := range slices.Sorted(maps.Keys(s.Containerd.BaseRuntimeSpec)) {
				path := "spec.containerd.baseRuntimeSpec." + k
				f := a.Containerd.RuntimeSpec.Field(k)
				if f == nil {
					ps.warnf(path, "the OCI runtime spec has no such field; containerd ignores it")
					continue
				}
				if v, ok := decodeJSON(ps, path, s.Containerd.BaseRuntimeSpec[k]); ok {
					checkJSONValue(ps, path, v, f, "containerd")
				}
			}
		}
	}
}

func decodeJSON(ps *problems, path string, raw json.RawMessage) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		ps.errorf(path, "%v", err)
		return nil, false
	}
	return v, true
}

// kubeletConfigAccepted checks the user's kubelet config against the
// kubelet's: its apiVersion, each field's type (as kubelet's decoder reads
// JSON), the feature gates, TLS names, eviction signals and the resources
// it reserves.
func kubeletConfigAccepted(ps *problems, cfg map[string]json.RawMessage, k *accepts.Kubelet) {
	const base = "spec.kubelet.config"
	for _, name := range slices.Sorted(maps.Keys(cfg)) {
		path := base + "." + name
		v, ok := decodeJSON(ps, path, cfg[name])
		if !ok {
			continue
		}
		switch name {
		case "apiVersion":
			if s, isStr := v.(string); isStr && !slices.Contains(k.ConfigAPIVersions, s) {
				ps.errorf(path, "kubelet %s has no kubelet config API %q; want %s", k.Version, s, strings.Join(k.ConfigAPIVersions, " or "))
			}
			continue
		case "kind":
			continue // kubeletRules
		}
		f := k.Config.Field(name)
		if f == nil {
			// kubelet decodes a drop-in leniently: the oracle test saw it
			// start with such a field.
			ps.unknownf(path, "KubeletConfiguration has no such field in kubelet %s; kubelet ignores it", k.Version)
			continue
		}
		if !checkJSONValue(ps, path, v, f, "kubelet") {
			continue
		}
		switch name {
		case "featureGates":
			gates := v.(map[string]any)
			for _, g := range slices.Sorted(maps.Keys(gates)) {
				if on, isBool := gates[g].(bool); isBool {
					gateProblem(ps, path+"."+g, g, on, k)
				}
			}
		case "tlsCipherSuites":
			for i, c := range v.([]any) {
				if s, _ := c.(string); !slices.Contains(k.TLSCipherSuites, s) {
					ps.errorf(fmt.Sprintf("%s[%d]", path, i), "kubelet %s does not support cipher suite %q", k.Version, s)
				}
			}
		case "tlsMinVersion":
			if s := v.(string); s != "" && !slices.Contains(k.TLSVersions, s) {
				ps.errorf(path, "unknown TLS version %q; want one of %s", s, strings.Join(k.TLSVersions, ", "))
			}
		case "evictionHard", "evictionSoft", "evictionSoftGracePeriod", "evictionMinimumReclaim":
			for _, sig := range slices.Sorted(maps.Keys(v.(map[string]any))) {
				if !slices.Contains(k.EvictionSignals, sig) {
					ps.errorf(path+"."+sig, "kubelet %s has no eviction signal %q; want one of %s", k.Version, sig, strings.Join(k.EvictionSignals, ", "))
				}
			}
		case "kubeReserved", "systemReserved":
			for _, r := range slices.Sorted(maps.Keys(v.(map[string]any))) {
				if !slices.Contains(k.ReservableResources, r) {
					ps.errorf(path+"."+r, "kubelet reserves only %s, not %q", strings.Join(k.ReservableResources, ", "), r)
				}
			}
		}
	}
}

func gateProblem(ps *problems, path, name string, on bool, k *accepts.Kubelet) {
	g, ok := k.FeatureGates[name]
	switch {
	case !ok:
		ps.errorf(path, "kubelet %s has no feature gate %q (it refuses to start on one it does not know)", k.Version, name)
	case g.LockToDefault && on != g.Default:
		ps.errorf(path, "feature gate %s is locked to %v in kubelet %s", name, g.Default, k.Version)
	}
}

// checkJSONValue reports where v, decoded with UseNumber, is not what t
// says, as encoding/json would refuse to decode it into the component's
// type; it returns whether v has t's shape at its top.
func checkJSONValue(ps *problems, path string, v any, t *accepts.Type, component string) bool {
	if v == nil {
		return true // null leaves the field at its default
	}
	bad := func(want string) bool {
		ps.errorf(path, "want %s, got %s (%s refuses the file)", want, jsonKind(v), component)
		return false
	}
	switch t.Kind {
	case accepts.KindAny:
		return true
	case accepts.KindBool:
		if _, ok := v.(bool); !ok {
			return bad("true or false")
		}
	case accepts.KindString:
		if _, ok := v.(string); !ok {
			return bad("a string")
		}
	case accepts.KindFloat:
		if _, ok := v.(json.Number); !ok {
			return bad("a number")
		}
	case accepts.KindDuration:
		s, ok := v.(string)
		if !ok {
			return bad(`a duration string such as "30s"`)
		}
		if _, err := time.ParseDuration(s); err != nil {
			ps.errorf(path, "%q is not a duration (for example 30s, 5m, 1h30m)", s)
			return false
		}
	case accepts.KindQuantity:
		s := fmt.Sprint(v)
		if _, isStr := v.(string); !isStr {
			if _, isNum := v.(json.Number); !isNum {
				return bad("a quantity such as 100Mi")
			}
		}
		if _, err := ParseQuantity(s); err != nil {
			ps.errorf(path, "%v", err)
			return false
		}
	case accepts.KindObject, accepts.KindMap:
		m, ok := v.(map[string]any)
		if !ok {
			return bad("an object")
		}
		for _, key := range slices.Sorted(maps.Keys(m)) {
			ft := t.Elem
			if t.Kind == accepts.KindObject {
				if ft = t.Field(key); ft == nil {
					ps.unknownf(path+"."+key, "%s ignores it: no such field", component)
					continue
				}
			}
			if ft != nil {
				checkJSONValue(ps, path+"."+key, m[key], ft, component)
			}
		}
	case accepts.KindList:
		l, ok := v.([]any)
		if !ok {
			return bad("a list")
		}
		for i, e := range l {
			if t.Elem != nil {
				checkJSONValue(ps, fmt.Sprintf("%s[%d]", path, i), e, t.Elem, component)
			}
		}
	default:
		bits, signed, ok := t.IntBits()
		if !ok {
			return true // a kind this berth does not know: newer generator
		}
		n, isNum := v.(json.Number)
		if !isNum {
			return bad("an integer")
		}
		if err := intInRange(string(n), bits, signed); err != nil {
			ps.errorf(path, "%v", err)
			return false
		}
	}
	return true
}

// intInRange says whether s is an integer literal that fits the type.
func intInRange(s string, bits int, signed bool) error {
	var err error
	if signed {
		_, err = strconv.ParseInt(s, 10, bits)
	} else {
		_, err = strconv.ParseUint(s, 10, bits)
	}
	if err == nil {
		return nil
	}
	kind := fmt.Sprintf("int%d", bits)
	if !signed {
		kind = "u" + kind
	}
	if ne := (*strconv.NumError)(nil); errors.As(err, &ne) && ne.Err == strconv.ErrRange {
		return fmt.Errorf("%s is out of range for an %s", s, kind)
	}
	// ParseUint calls a negative integer a syntax error.
	if _, nerr := strconv.ParseInt(s, 10, 64); !signed && nerr == nil {
		return fmt.Errorf("%s is out of range for an %s", s, kind)
	}
	return fmt.Errorf("%s is not an integer (an %s)", s, kind)
}

// kubeletFlagsAccepted reads the user's flags as kubelet's flag parser
// (pflag) will, with kubelet's own flag set: every word must be a flag
// kubelet has (kubelet exits on an unknown flag, and on a word that is no
// flag: "unknown command"), a flag that needs a value must get one, and
// the value must parse as the flag's type. berth's flags come before the
// user's and all carry their values inline, so the user's words are read
// from a clean state. berth-owned flags are checkKubeletFlags' and are
// skipped here with their values.
func kubeletFlagsAccepted(ps *problems, flags []string, k *accepts.Kubelet) {
	type word struct {
		elem int
		text string
	}
	var words []word
	for i, f := range flags {
		if syntaxProblem(f) {
			return // checkKubeletFlags reports it
		}
		for _, w := range flagwords.Split(f) {
			words = append(words, word{i, w})
		}
	}
	path := func(i int) string { return fmt.Sprintf("spec.kubelet.flags[%d]", i) }
	shorthands := map[string]string{}
	for name, f := range k.Flags {
		if f.Shorthand != "" {
			shorthands[f.Shorthand] = name
		}
	}
	for j := 0; j < len(words); j++ {
		w := words[j]
		var name, value string
		var hasValue bool
		switch {
		case w.text == "--":
			if j+1 < len(words) {
				ps.errorf(path(words[j+1].elem), "%q follows \"--\": kubelet takes no arguments (\"unknown command\")", words[j+1].text)
			}
			return
		case strings.HasPrefix(w.text, "--"):
			n, v, inline := strings.Cut(w.text[2:], "=")
			if n == "" || strings.HasPrefix(n, "-") || strings.HasPrefix(n, "=") {
				ps.errorf(path(w.elem), "%q: bad flag syntax", w.text)
				continue
			}
			name, value, hasValue = strings.ReplaceAll(n, "_", "-"), v, inline
		case strings.HasPrefix(w.text, "-") && len(w.text) > 1:
			sh := w.text[1:2]
			long, ok := shorthands[sh]
			if !ok {
				ps.errorf(path(w.elem), "%q: kubelet has no flag -%s", w.text, sh)
				continue
			}
			name = long
			if rest := w.text[2:]; rest != "" {
				value, hasValue = strings.TrimPrefix(rest, "="), true
			}
		default:
			ps.errorf(path(w.elem), "%q is not a flag: kubelet takes no arguments and exits on it (\"unknown command\")", w.text)
			continue
		}
		f, ok := k.Flags[name]
		if !ok {
			ps.errorf(path(w.elem), "kubelet %s has no flag --%s", k.Version, name)
			continue
		}
		if _, owned := ownedKubeletFlags["--"+name]; owned {
			if !hasValue && f.NoOptDefVal == "" {
				j++ // its value; checkKubeletFlags names the flag
			}
			continue
		}
		if name == "help" || name == "version" {
			ps.errorf(path(w.elem), "--%s makes kubelet print and exit instead of running", name)
			continue
		}
		elem := w.elem
		if !hasValue {
			if f.NoOptDefVal != "" {
				value = f.NoOptDefVal
			} else if j+1 < len(words) {
				j++
				value, elem = words[j].text, words[j].elem
			} else {
				ps.errorf(path(w.elem), "--%s needs a value", name)
				continue
			}
		}
		if err := flagValue(name, value, f, k); err != nil {
			ps.errorf(path(elem), "--%s: %v", name, err)
		}
	}
}

// syntaxProblem says whether checkKubeletFlags refuses the element
// before its words can be read.
func syntaxProblem(f string) bool {
	for _, r := range f {
		if r < 0x20 && r != '\t' || r == 0x7f {
			return true
		}
	}
	return false
}

// flagValue checks value as the flag's Go value type parses it (pflag's
// and component-base's Set methods); types it does not know pass.
func flagValue(name, value string, f accepts.Flag, k *accepts.Kubelet) error {
	switch f.Value {
	case "*pflag.boolValue":
		_, err := strconv.ParseBool(value)
		return err
	case "*pflag.int32Value":
		_, err := strconv.ParseInt(value, 0, 32)
		return err
	case "*pflag.int64Value":
		_, err := strconv.ParseInt(value, 0, 64)
		return err
	case "*pflag.durationValue":
		_, err := time.ParseDuration(value)
		return err
	case "*flag.IPVar":
		if syntax.IPNoZone(value) != nil {
			return fmt.Errorf("%q is not an IP address", value)
		}
		return nil
	case "*resource.QuantityValue":
		_, err := ParseQuantity(value)
		return err
	case "*flag.MapStringBool":
		return eachPair(value, "=", func(key, v string) error {
			on, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%s=%s: %w", key, v, err)
			}
			if name == "feature-gates" {
				ps := &problems{}
				gateProblem(ps, "", key, on, k)
				if len(ps.list) > 0 {
					return fmt.Errorf("%s", ps.list[0].Message)
				}
			}
			return nil
		})
	case "*flag.MapStringString":
		return eachPair(value, "=", func(key, v string) error { return mapFlagEntry(name, key, v, k) })
	case "*flag.LangleSeparatedMapStringString":
		return eachPair(value, "<", func(key, v string) error { return mapFlagEntry(name, key, v, k) })
	}
	if f.Type == "Level" {
		if _, err := strconv.ParseUint(value, 10, 32); err != nil {
			return fmt.Errorf("%q is not a log level (0 or more)", value)
		}
	}
	return nil
}

// eachPair splits a map flag's value as component-base's map flags do:
// comma-separated pairs, each KEY SEP VALUE.
func eachPair(value, sep string, fn func(key, v string) error) error {
	for _, pair := range strings.Split(value, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, sep)
		if !ok {
			return fmt.Errorf("%q: want KEY%sVALUE", pair, sep)
		}
		if err := fn(strings.TrimSpace(k), strings.TrimSpace(v)); err != nil {
			return err
		}
	}
	return nil
}

// mapFlagEntry checks one entry of the map flags whose entries kubelet
// parses further at start.
func mapFlagEntry(flag, key, v string, k *accepts.Kubelet) error {
	switch flag {
	case "kube-reserved", "system-reserved":
		if !slices.Contains(k.ReservableResources, key) {
			return fmt.Errorf("kubelet reserves only %s, not %q", strings.Join(k.ReservableResources, ", "), key)
		}
		return reservedQuantity(v)
	case "eviction-hard", "eviction-soft", "eviction-minimum-reclaim", "eviction-soft-grace-period":
		if !slices.Contains(k.EvictionSignals, key) {
			return fmt.Errorf("kubelet %s has no eviction signal %q", k.Version, key)
		}
		if flag == "eviction-soft-grace-period" {
			_, err := time.ParseDuration(v)
			return err
		}
		return evictionThreshold(v)
	}
	return nil
}

// containerdAccepted checks the user's containerd TOML against
// containerd's config types: each value must decode into its key's type
// (go-toml's rules), or containerd refuses the file or a CRI plugin's
// section at start. A version 2 document's keys are checked where
// containerd's migration puts them in version 3's layout, which the types
// describe (internal/ctrdv2, the mapping runtime/containerd converts
// with), and named where the user wrote them. runc's options, which
// containerd decodes only when it starts a container, are checked against
// runc's options type: a wrong one would fail every pod.
func containerdAccepted(ps *problems, user map[string]any, c *accepts.Containerd) {
	v, _ := user["version"].(int64)
	if _, ok := user["version"].(int64); ok && !slices.Contains(c.ConfigVersions, int(v)) {
		ps.errorf("spec.containerd.config: version", "containerd %s reads config versions %v, not %d", c.Version, c.ConfigVersions, v)
	}
	tc := tomlChecker{ps: ps, prefix: "spec.containerd.config: ", c: c, runtimeTypes: runtimeTypes(user, v == 2)}
	tc.where = func(at []string) ([]string, bool) { return at, false }
	if v == 2 {
		tc.where = ctrdv2.Where
	}
	tc.table(nil, user)
}

// tomlChecker walks a containerd config document, finding each key's
// type by its place in version 3's layout.
type tomlChecker struct {
	ps     *problems
	prefix string
	c      *accepts.Containerd
	// where is a key's place in version 3's layout, and whether it
	// becomes an element of the list there (ctrdv2.Where's answer).
	where func(at []string) ([]string, bool)
	// runtimeTypes are the CRI runtimes' runtime_type values, by name.
	runtimeTypes map[string]string
}

// table checks the keys of the table at at. A table is walked into
// where its own place is a table or unknown: the keys of a version 2
// table that containerd splits are typed one by one.
func (tc *tomlChecker) table(at []string, m map[string]any) {
	for _, key := range slices.Sorted(maps.Keys(m)) {
		p := append(slices.Clone(at), key)
		t, refusal := tc.typeAt(p)
		if sub, isTable := m[key].(map[string]any); isTable && (t == nil || t.Kind == accepts.KindObject || t.Kind == accepts.KindMap) {
			tc.table(p, sub)
			continue
		}
		if t == nil {
			continue // containerd warns and ignores a key it does not know
		}
		checkTOMLValue(tc.ps, tc.prefix, p, m[key], t, refusal)
	}
}

// typeAt is the type of the key at at, or nil where it has none, and what
// containerd does with a value of another type.
func (tc *tomlChecker) typeAt(at []string) (*accepts.Type, string) {
	v3, elem := tc.where(at)
	if v3 == nil {
		return nil, ""
	}
	// A key inside a CRI runtime's options table: runtime_type decides
	// the type containerd decodes the table into.
	if len(v3) > 6 && v3[0] == "plugins" && v3[1] == ctrdv2.PluginCRIRuntime && v3[2] == "containerd" && v3[3] == "runtimes" && v3[5] == "options" {
		typ := tc.runtimeTypes[v3[4]]
		if o := tc.c.RuntimeOptions[typ]; o != nil {
			return typeAtPath(o, v3[6:], elem), fmt.Sprintf("containerd %s decodes runtime %s's options (%s) when it starts a container, and would fail every pod on it", tc.c.Version, v3[4], typ)
		}
	}
	return typeAtPath(tc.c.Config, v3, elem), fmt.Sprintf("containerd %s refuses it", tc.c.Version)
}

// typeAtPath is the type at path under t, or nil where t has none; with
// elem, the type of the list's elements there.
func typeAtPath(t *accepts.Type, path []string, elem bool) *accepts.Type {
	for _, k := range path {
		switch {
		case t == nil:
			return nil
		case t.Kind == accepts.KindMap:
			t = t.Elem
		case t.Kind == accepts.KindObject:
			t = tomlField(t, k)
		default:
			return nil
		}
	}
	if elem {
		if t == nil || t.Kind != accepts.KindList {
			return nil
		}
		return t.Elem
	}
	return t
}

// tomlField is the field of object type t that go-toml decodes key into:
// the field of that name, or any key's ("*", as plugins has), or else the
// field whose name matches it but for case, as go-toml falls back to.
func tomlField(t *accepts.Type, key string) *accepts.Type {
	if f := t.Field(key); f != nil {
		return f
	}
	if f := t.Field("*"); f != nil {
		return f
	}
	for _, name := range slices.Sorted(maps.Keys(t.Fields)) {
		if strings.EqualFold(name, key) {
			return t.Fields[name]
		}
	}
	return nil
}

// runtimeTypes are the CRI runtimes' runtime_type values by name, as
// containerd will read them: runc's is io.containerd.runc.v2 unless the
// user says otherwise (berth's base config, runtime/containerd's, sets it
// and the user's table merges over it); in a version 2 document, the
// version 2 CRI plugin's runtimes too, where the runtime plugin's own do
// not set them (containerd's migration keeps what that plugin sets).
func runtimeTypes(doc map[string]any, v2 bool) map[string]string {
	types := map[string]string{"runc": "io.containerd.runc.v2"}
	var from [][]string
	if v2 {
		from = append(from, []string{"plugins", ctrdv2.PluginCRIv2, "containerd", "runtimes"})
	}
	from = append(from, []string{"plugins", ctrdv2.PluginCRIRuntime, "containerd", "runtimes"})
	for _, path := range from {
		var v any = doc
		for _, k := range path {
			m, _ := v.(map[string]any)
			v = m[k]
		}
		runtimes, _ := v.(map[string]any)
		for name, r := range runtimes {
			rt, _ := r.(map[string]any)
			if typ, ok := rt["runtime_type"].(string); ok {
				types[name] = typ
			}
		}
	}
	return types
}

// checkTOMLTable checks a decoded TOML table against an object or map
// type; keys are named as TOML writes them ([a.b] c). refusal says what
// containerd does with a value of another type.
func checkTOMLTable(ps *problems, prefix string, at []string, m map[string]any, t *accepts.Type, refusal string) {
	for _, key := range slices.Sorted(maps.Keys(m)) {
		var ft *accepts.Type
		switch t.Kind {
		case accepts.KindMap:
			ft = t.Elem
		case accepts.KindObject:
			if ft = tomlField(t, key); ft == nil {
				continue // containerd warns and ignores a key it does not know
			}
		default:
			return
		}
		checkTOMLValue(ps, prefix, append(slices.Clone(at), key), m[key], ft, refusal)
	}
}

func checkTOMLValue(ps *problems, prefix string, at []string, v any, t *accepts.Type, refusal string) {
	if t == nil || t.Kind == accepts.KindAny {
		return
	}
	path := prefix + tomlKeyPath(at)
	bad := func(want string) {
		ps.errorf(path, "want %s, got %s (%s)", want, tomlKind(v), refusal)
	}
	switch t.Kind {
	case accepts.KindBool:
		if _, ok := v.(bool); !ok {
			bad("true or false")
		}
	case accepts.KindString:
		if _, ok := v.(string); !ok {
			bad("a string")
		}
	case accepts.KindFloat:
		switch v.(type) {
		case float64, int64:
		default:
			bad("a number")
		}
	case accepts.KindDuration:
		switch x := v.(type) {
		case int64:
		case string:
			if _, err := time.ParseDuration(x); err != nil {
				ps.errorf(path, "%q is not a duration (for example 30s, 5m)", x)
			}
		default:
			bad(`a duration string such as "30s"`)
		}
	case accepts.KindObject, accepts.KindMap:
		m, ok := v.(map[string]any)
		if !ok {
			bad("a table")
			return
		}
		checkTOMLTable(ps, prefix, at, m, t, refusal)
	case accepts.KindList:
		l, ok := v.([]any)
		if !ok {
			bad("an array")
			return
		}
		for i, e := range l {
			elemAt := append(slices.Clone(at[:len(at)-1]), fmt.Sprintf("%s[%d]", at[len(at)-1], i))
			checkTOMLValue(ps, prefix, elemAt, e, t.Elem, refusal)
		}
	default:
		bits, signed, ok := t.IntBits()
		if !ok {
			return
		}
		n, isInt := v.(int64)
		if !isInt {
			bad("an integer")
			return
		}
		if err := intInRange(strconv.FormatInt(n, 10), bits, signed); err != nil {
			ps.errorf(path, "%v", err)
		}
	}
}

// tomlKeyPath names a key as a TOML file does: [table] key.
func tomlKeyPath(at []string) string {
	q := make([]string, len(at))
	for i, k := range at {
		q[i] = tomlKey(k)
	}
	if len(q) == 1 {
		return q[0]
	}
	return "[" + strings.Join(q[:len(q)-1], ".") + "] " + q[len(q)-1]
}

func tomlKey(k string) string {
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '[' || r == ']') {
			return strconv.Quote(k)
		}
	}
	return k
}

func tomlKind(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case map[string]any:
		return "a table"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("%T", v)
}
