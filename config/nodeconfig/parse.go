package nodeconfig

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"github.com/berth-node/berth/internal/redact"
	yaml3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// Bounds on one NodeConfig document. Decoding YAML costs a few hundred
// bytes of memory per node (4 MiB of "1," made `berth check` use 420 MB),
// and real NodeConfigs are a few KiB (EC2 user data is at most 16 KiB
// before gzip), so a document is held well below what userdata may decode
// (userdata.MaxDecodedSize).
const (
	// MaxDocumentSize caps one document's bytes, as written.
	MaxDocumentSize = 512 << 10
	// MaxExpandedSize caps a document with its YAML aliases expanded,
	// measured as the bytes of its scalars plus one per node (about what
	// the JSON it becomes takes). Without aliases no document within
	// MaxDocumentSize comes near it.
	MaxExpandedSize = 2 * MaxDocumentSize
	// maxExpandedDepth caps nesting through aliases, as go-yaml caps it
	// within a document, so that measuring cannot exhaust the stack.
	maxExpandedDepth = 10000
	// MaxNesting caps how deep maps and lists nest in a document. berth
	// re-encodes user values (kubelet.config, containerd.baseRuntimeSpec)
	// indented, which costs the square of the depth: 9,000 empty lists
	// inside each other, 1.3 KB gzipped, made `berth render` use 1 GB and
	// write 310 MB. NodeConfig's own fields nest 4 deep and the deepest
	// kubelet or runtime-spec values about 8 more.
	MaxNesting = 64
)

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
		return fail("document is %d bytes, over the %d-byte limit (nodeconfig.MaxDocumentSize)", len(data), MaxDocumentSize)
	}
	if n := countYAMLDocuments(data); n > 1 {
		return fail("holds %d YAML documents; put one NodeConfig in each file or MIME part", n)
	}
	// go-yaml v3's node tree is read first, and once: aliases and nesting
	// are bounded on it before anything builds values from the document
	// (the conversion below, and every check that walks with a path: a
	// path built at each of 9,900 levels cost `berth check` 175 MB), and
	// the strict checks read its keys' lines.
	tree := yaml3.NewDecoder(bytes.NewReader(data))
	var root yaml3.Node
	treeErr := tree.Decode(&root)
	empty := errors.Is(treeErr, io.EOF)
	if empty {
		treeErr = nil // the caller says it is no mapping
	}
	switch {
	case treeErr == nil:
		if err := checkAliases(data, &root); err != nil {
			return fail("%v", err)
		}
		if path, ok := nodeNestedPast(&root, "", MaxNesting); ok {
			return fail("%s: maps and lists nest more than %d deep (nodeconfig.MaxNesting)", path, MaxNesting)
		}
	case mayHoldAlias(data):
		// Unmeasured aliases must not reach the conversion.
		return fail("invalid YAML or JSON: %s", treeErr)
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return fail("invalid YAML or JSON: %s", strings.TrimPrefix(err.Error(), "error converting YAML to JSON: "))
	}
	if treeErr != nil {
		return fail("invalid YAML or JSON: %s", treeErr)
	}
	if !empty {
		if err := checkStrict(tree, &root); err != nil {
			return fail("%v", err)
		}
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
	// Aliases can nest what the tree's check saw as shallow.
	if path, ok := nestedPast(generic, "", MaxNesting); ok {
		return fail("%s: maps and lists nest more than %d deep (nodeconfig.MaxNesting)", path, MaxNesting)
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
	return cfg, ps.problems(), nil
}

// checkStrict refuses what the YAML-to-JSON conversion lets through
// silently: a key repeated in one mapping (both YAML and JSON decoders keep
// the last, so the first is lost without a word: a second top-level spec:
// drops the whole cluster section), and anything after the document (a
// JSON document followed by more text). It reads go-yaml v3's node tree
// of the document (root, from dec), whose nodes keep their lines, once
// the conversion has accepted the document, so syntax errors keep the
// conversion's wording.
func checkStrict(dec *yaml3.Decoder, root *yaml3.Node) error {
	for {
		// An empty document after it ("---" and comments) adds nothing.
		var more yaml3.Node
		err := dec.Decode(&more)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("invalid YAML or JSON: text after the document (%s)", err)
		}
		if len(more.Content) > 0 && !(more.Content[0].Kind == yaml3.ScalarNode && more.Content[0].Tag == "!!null") {
			return fmt.Errorf("text after the document, at line %d: one NodeConfig per file or MIME part", more.Content[0].Line)
		}
	}
	return duplicateKeys(root, "")
}

// duplicateKeys finds the first mapping, in document order, that holds a
// key twice, and names the key's path and both lines.
func duplicateKeys(n *yaml3.Node, path string) error {
	switch n.Kind {
	case yaml3.DocumentNode:
		for _, c := range n.Content {
			if err := duplicateKeys(c, path); err != nil {
				return err
			}
		}
	case yaml3.MappingNode:
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			// "<<" merges another mapping in; YAML lets it repeat.
			if k.Kind == yaml3.ScalarNode && k.Value != "<<" {
				if line, dup := seen[k.Value]; dup {
					return fmt.Errorf("%s: key repeated at lines %d and %d; YAML and JSON keep only the last, so the first would be lost", join(path, k.Value), line, k.Line)
				}
				seen[k.Value] = k.Line
			}
			if err := duplicateKeys(v, join(path, k.Value)); err != nil {
				return err
			}
		}
	case yaml3.SequenceNode:
		for i, c := range n.Content {
			if err := duplicateKeys(c, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkAliases bounds what YAML aliases expand to before the document is
// converted. go-yaml v2 (under sigs.k8s.io/yaml) refuses a document whose
// decoding is mostly alias expansion, but it counts nodes, not bytes: an
// anchor on a 1 MiB string referenced a few thousand times, diluted with
// enough plain nodes to pass its ratio, made YAMLToJSON write gigabytes
// (1.2 KB of gzip user data ran `berth check` out of memory). So a
// document that may hold an alias is first parsed into go-yaml v3's node
// tree, where an alias is a pointer, and measured expanded, each anchor
// once.
func checkAliases(data []byte, root *yaml3.Node) error {
	if !mayHoldAlias(data) {
		return nil // no anchor or no alias: nothing to expand
	}
	m := aliasMeasure{sizes: map[*yaml3.Node]int{}, open: map[*yaml3.Node]bool{}}
	_, err := m.size(root, 0)
	return err
}

// mayHoldAlias says whether data has the characters of an anchor and an
// alias.
func mayHoldAlias(data []byte) bool {
	return bytes.Contains(data, []byte("&")) && bytes.Contains(data, []byte("*"))
}

// nodeNestedPast is nestedPast on go-yaml v3's node tree, before the
// document becomes values: the same limit and path, with keys in the same
// (sorted) order. An alias is not followed here (checkAliases bounds what
// aliases expand to, and nestedPast sees them expanded).
func nodeNestedPast(n *yaml3.Node, path string, limit int) (string, bool) {
	if limit < 0 {
		return abbreviate(path), true
	}
	switch n.Kind {
	case yaml3.DocumentNode:
		for _, c := range n.Content {
			if p, ok := nodeNestedPast(c, path, limit); ok {
				return p, true
			}
		}
	case yaml3.MappingNode:
		pairs := make([]int, 0, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			pairs = append(pairs, i)
		}
		sort.SliceStable(pairs, func(a, b int) bool { return n.Content[pairs[a]].Value < n.Content[pairs[b]].Value })
		for _, i := range pairs {
			if p, ok := nodeNestedPast(n.Content[i+1], join(path, n.Content[i].Value), limit-1); ok {
				return p, true
			}
		}
	case yaml3.SequenceNode:
		for i, c := range n.Content {
			if p, ok := nodeNestedPast(c, fmt.Sprintf("%s[%d]", path, i), limit-1); ok {
				return p, true
			}
		}
	}
	return "", false
}

type aliasMeasure struct {
	sizes map[*yaml3.Node]int  // expanded size of each node measured
	open  map[*yaml3.Node]bool // nodes being measured, to catch cycles
}

// size returns n's expanded size, or an error once it passes
// MaxExpandedSize; every size returned is within it, so sums cannot
// overflow however often anchors are referenced.
func (m *aliasMeasure) size(n *yaml3.Node, depth int) (int, error) {
	if n == nil {
		return 0, nil
	}
	if s, ok := m.sizes[n]; ok {
		return s, nil
	}
	if depth > maxExpandedDepth {
		return 0, fmt.Errorf("YAML aliases nest the document more than %d deep (line %d)", maxExpandedDepth, n.Line)
	}
	if m.open[n] {
		return 0, fmt.Errorf("YAML anchor &%s (line %d) contains an alias to itself", n.Anchor, n.Line)
	}
	m.open[n] = true
	defer delete(m.open, n)
	total := 1 + len(n.Value)
	if n.Kind == yaml3.AliasNode {
		s, err := m.size(n.Alias, depth+1)
		if err != nil {
			return 0, err
		}
		total = s
	}
	for _, c := range n.Content {
		s, err := m.size(c, depth+1)
		if err != nil {
			return 0, err
		}
		total += s
		if total > MaxExpandedSize {
			break
		}
	}
	if total > MaxExpandedSize {
		// The innermost node over the limit: where the aliases pile up.
		return 0, fmt.Errorf("YAML aliases expand the document past the %d-byte limit (nodeconfig.MaxExpandedSize): %s at line %d expands to more than that", MaxExpandedSize, yamlKind(n), n.Line)
	}
	m.sizes[n] = total
	return total, nil
}

func yamlKind(n *yaml3.Node) string {
	switch n.Kind {
	case yaml3.DocumentNode:
		return "the document"
	case yaml3.SequenceNode:
		return "the list"
	case yaml3.MappingNode:
		return "the mapping"
	case yaml3.AliasNode:
		return "the alias *" + n.Value
	}
	return "the value"
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
			if want, ok := lower[strings.ToLower(key)]; ok {
				ps.unknownf(p, "unknown field (did you mean %q? names are case-sensitive)", want)
			} else {
				ps.unknownf(p, "unknown field")
			}
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
			ps.errorf(path, "want a mapping, got %s", kindAt(path, val))
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
			ps.errorf(path, "want a string, got %s", kindAt(path, val))
			return nil, false
		}
	case reflect.Bool:
		if _, ok := val.(bool); !ok {
			ps.errorf(path, "want true or false, got %s", kindAt(path, val))
			return nil, false
		}
	case reflect.Struct:
		obj, ok := val.(map[string]any)
		if !ok {
			ps.errorf(path, "want a mapping, got %s", kindAt(path, val))
			return nil, false
		}
		return walkStruct(ps, t, obj, path), true
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			s, ok := val.(string)
			if !ok {
				ps.errorf(path, "want a base64 string, got %s", kindAt(path, val))
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
			ps.errorf(path, "want a list, got %s", kindAt(path, val))
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
			ps.errorf(path, "want a mapping, got %s", kindAt(path, val))
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

// kindAt is jsonKind for the value at path, without the value itself when
// the field's name looks like it holds a secret: problems go to the console
// and the boot report.
func kindAt(path string, v any) string {
	name := path
	if i := strings.LastIndexAny(path, ".["); i >= 0 {
		name = strings.Trim(path[i+1:], "]\"")
	}
	if redact.Name(name) {
		switch v.(type) {
		case string:
			return "a string"
		case json.Number:
			return "a number"
		case bool:
			return "a boolean"
		}
	}
	return jsonKind(v)
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

// nestedPast finds a value nested more than limit maps or lists deep in v
// and gives its path (abbreviated when long), the first one in document
// order.
func nestedPast(v any, path string, limit int) (string, bool) {
	if limit < 0 {
		return abbreviate(path), true
	}
	switch t := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(t) {
			if p, ok := nestedPast(t[k], join(path, k), limit-1); ok {
				return p, true
			}
		}
	case []any:
		for i, e := range t {
			if p, ok := nestedPast(e, fmt.Sprintf("%s[%d]", path, i), limit-1); ok {
				return p, true
			}
		}
	}
	return "", false
}

// abbreviate shortens a long path for a problem's line.
func abbreviate(path string) string {
	if len(path) > 100 {
		return strings.ToValidUTF8(path[:100], "") + "…"
	}
	return path
}
