package nodeconfig

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// MaxDocumentSize caps one NodeConfig document; user data is at most
// 16 KiB on EC2, image files are small, and YAML expansion is bounded by it.
const MaxDocumentSize = 4 << 20

// Parse decodes one NodeConfig document (YAML or JSON) from source.
//
// Decoding is lenient so that newer nodeadm fields cannot brick a node: an
// unknown field is dropped and reported as a warning with its full path,
// and a value of the wrong type is dropped and reported as an error, so one
// pass finds every problem. The returned error is non-nil only when the
// document cannot be read at all (bad syntax, not a mapping); it is then a
// Problem. apiVersion and kind are checked here; field values are checked
// by Validate.
func Parse(source string, data []byte) (*NodeConfig, []Problem, error) {
	ps := &problems{source: source}
	fail := func(format string, args ...any) (*NodeConfig, []Problem, error) {
		return nil, nil, Problem{Severity: SeverityError, Source: source, Message: fmt.Sprintf(format, args...)}
	}
	if len(data) > MaxDocumentSize {
		return fail("document is %d bytes, over the %d-byte limit", len(data), MaxDocumentSize)
	}
	if n := countYAMLDocuments(data); n > 1 {
		return fail("holds %d YAML documents; put one NodeConfig in each file or MIME part", n)
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return fail("invalid YAML or JSON: %s", strings.TrimPrefix(err.Error(), "error converting YAML to JSON: "))
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber() // keep kubelet.config numbers exactly as written
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return fail("invalid YAML or JSON: %v", err)
	}
	obj, ok := generic.(map[string]any)
	if !ok {
		return fail("want a NodeConfig mapping, got %s", jsonKind(generic))
	}

	checkTypeMeta(ps, obj)
	pruned := walkStruct(ps, reflect.TypeFor[NodeConfig](), obj, "")
	clean, err := json.Marshal(pruned)
	if err != nil {
		return fail("re-encoding after checks: %v", err)
	}
	cfg := &NodeConfig{}
	if err := json.Unmarshal(clean, cfg); err != nil {
		// walk checks every typed value, so this means walk and the
		// types disagree: a bug, but still reported, never a panic.
		return fail("decoding: %v", err)
	}
	return cfg, ps.list, nil
}

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*(#.*)?$`)

// countYAMLDocuments counts documents with content, because YAMLToJSON
// silently reads only the first and a second NodeConfig would be lost.
func countYAMLDocuments(data []byte) int {
	n := 0
	for _, part := range docSeparator.Split(string(data), -1) {
		for line := range strings.SplitSeq(part, "\n") {
			line = strings.TrimSpace(line)
			if line != "" && !strings.HasPrefix(line, "#") && line != "..." {
				n++
				break
			}
		}
	}
	return n
}

func checkTypeMeta(ps *problems, obj map[string]any) {
	for _, f := range []struct{ key, want string }{{"apiVersion", APIVersion}, {"kind", Kind}} {
		v, present := obj[f.key]
		switch s, isString := v.(string); {
		case present && v != nil && !isString:
			// walkStruct reports the type error.
		case s == "":
			ps.errorf(f.key, "missing; want %q", f.want)
		case s != f.want:
			ps.errorf(f.key, "%q is not supported; want %q", s, f.want)
		}
	}
}

// freeForm lists types whose contents are the user's own (kubelet config,
// OCI spec, object metadata) and are never checked for unknown fields.
var freeForm = map[reflect.Type]bool{
	reflect.TypeFor[InlineDocument]():             true,
	reflect.TypeFor[map[string]json.RawMessage](): true,
}

// walkStruct checks obj against struct type t and returns obj without the
// keys that are unknown, null or of the wrong type, reporting each.
func walkStruct(ps *problems, t reflect.Type, obj map[string]any, path string) map[string]any {
	fields := map[string]reflect.StructField{}
	lower := map[string]string{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		fields[name] = f
		lower[strings.ToLower(name)] = name
	}
	out := make(map[string]any, len(obj))
	for _, key := range sortedKeys(obj) {
		val := obj[key]
		p := join(path, key)
		f, known := fields[key]
		if !known {
			msg := "unknown field"
			if want, ok := lower[strings.ToLower(key)]; ok {
				msg += fmt.Sprintf(" (did you mean %q? names are case-sensitive)", want)
			}
			ps.list = append(ps.list, Problem{Severity: SeverityWarning, Source: ps.source, Path: p, Message: msg, Unknown: true})
			continue
		}
		if val == nil {
			continue
		}
		if v, ok := walkValue(ps, f.Type, val, p); ok && v != nil {
			out[key] = v
		}
	}
	return out
}

// walkValue checks one value against type t; ok is false when it has the
// wrong type (reported) and must be dropped. A nil result with ok true is
// an empty list or mapping, dropped silently because empty means unset.
func walkValue(ps *problems, t reflect.Type, val any, path string) (any, bool) {
	if freeForm[t] {
		m, ok := val.(map[string]any)
		if !ok {
			ps.errorf(path, "want a mapping, got %s", jsonKind(val))
			return nil, false
		}
		if len(m) == 0 {
			return nil, true // empty is unset, as in nodeadm's merge
		}
		return val, true
	}
	switch t.Kind() {
	case reflect.Pointer:
		return walkValue(ps, t.Elem(), val, path)
	case reflect.String:
		if _, ok := val.(string); !ok {
			ps.errorf(path, "want a string, got %s", jsonKind(val))
			return nil, false
		}
	case reflect.Bool:
		if _, ok := val.(bool); !ok {
			ps.errorf(path, "want true or false, got %s", jsonKind(val))
			return nil, false
		}
	case reflect.Struct:
		obj, ok := val.(map[string]any)
		if !ok {
			ps.errorf(path, "want a mapping, got %s", jsonKind(val))
			return nil, false
		}
		return walkStruct(ps, t, obj, path), true
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			s, ok := val.(string)
			if !ok {
				ps.errorf(path, "want a base64 string, got %s", jsonKind(val))
				return nil, false
			}
			if _, err := base64.StdEncoding.DecodeString(s); err != nil {
				ps.errorf(path, "not valid base64: %v", err)
				return nil, false
			}
			return val, true
		}
		arr, ok := val.([]any)
		if !ok {
			ps.errorf(path, "want a list, got %s", jsonKind(val))
			return nil, false
		}
		out := make([]any, 0, len(arr))
		good := true
		for i, el := range arr {
			if v, ok := walkValue(ps, t.Elem(), el, fmt.Sprintf("%s[%d]", path, i)); ok {
				out = append(out, v)
			} else {
				good = false
			}
		}
		// A list with a bad element is dropped whole: a shortened list
		// would shift indexes and silently change meaning.
		if !good {
			return nil, false
		}
		if len(out) == 0 {
			// [] means unset, as for nodeadm's merge; keeping it would
			// make an empty list and a missing one encode differently.
			return nil, true
		}
		return out, true
	case reflect.Map:
		obj, ok := val.(map[string]any)
		if !ok {
			ps.errorf(path, "want a mapping, got %s", jsonKind(val))
			return nil, false
		}
		out := make(map[string]any, len(obj))
		for _, k := range sortedKeys(obj) {
			if obj[k] == nil {
				continue
			}
			if v, ok := walkValue(ps, t.Elem(), obj[k], join(path, k)); ok && v != nil {
				out[k] = v
			}
		}
		if len(out) == 0 {
			return nil, true
		}
		return out, true
	default:
		ps.errorf(path, "unsupported field type %s", t)
		return nil, false
	}
	return val, true
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func sortedKeys[K ~string, V any](m map[K]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	return keys
}

func jsonKind(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("string %q", truncate(v))
	case bool:
		return fmt.Sprintf("boolean %t", v)
	case json.Number:
		return "number " + v.String()
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%T", v)
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
