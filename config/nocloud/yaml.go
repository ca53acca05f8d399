package nocloud

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// maxNodes caps the YAML nodes one file may visit, aliases followed. The
// files are small (MaxFileSize), but an alias to a long list, referenced
// from every entry of another, multiplies; real seeds have a few hundred
// nodes.
const maxNodes = 20000

// errBudget stops a walk that passed maxNodes.
var errBudget = errors.New("budget")

// walker reads a go-yaml v3 node tree, keeping every node's line, and
// collects problems for one file.
type walker struct {
	problemList
	nodes int
}

// decode reads data as one YAML document. It returns nil for a document
// with no content (empty, or only comments), which cloud-init takes as
// no data.
func (w *walker) decode(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, Problems{{File: w.file, Message: "invalid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}}
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		line := 0
		if err == nil && len(more.Content) > 0 {
			line = more.Content[0].Line
		}
		return nil, Problems{{File: w.file, Line: line, Message: "a second YAML document: the file holds one"}}
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil, nil
	}
	return root, nil
}

// resolve follows aliases and counts the node against the budget.
func (w *walker) resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
		w.nodes++
	}
	w.nodes++
	if w.nodes > maxNodes {
		panic(errBudget)
	}
	return n
}

// run calls fn, turning a blown budget into a problem.
func (w *walker) run(fn func()) {
	defer func() {
		if r := recover(); r != nil {
			if r != errBudget {
				panic(r)
			}
			// What the walk found before it stopped is beside the point.
			w.list, w.omitted = nil, 0
			w.add(0, "", "more than %d YAML nodes once aliases are expanded; a seed file is a few hundred", maxNodes)
		}
	}()
	fn()
}

// pair is one key of a mapping with its value.
type pair struct {
	key  string
	line int // the key's line
	val  *yaml.Node
}

// mapping returns n's keys in order, or reports a problem and returns
// false when n is not a mapping or repeats a key (YAML readers keep the
// last silently; the first would be lost).
func (w *walker) mapping(n *yaml.Node, path, want string) ([]pair, bool) {
	n = w.resolve(n)
	if n.Kind != yaml.MappingNode {
		w.add(n.Line, path, "want %s, got %s", want, kind(n))
		return nil, false
	}
	var pairs []pair
	seen := map[string]int{}
	ok := true
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := w.resolve(n.Content[i])
		if k.Kind != yaml.ScalarNode {
			w.add(k.Line, path, "a key that is %s; keys are names", kind(k))
			ok = false
			continue
		}
		if first, dup := seen[k.Value]; dup {
			w.add(k.Line, join(path, k.Value), "key repeated (first at line %d); YAML keeps only the last, so the first would be lost", first)
			ok = false
			continue
		}
		seen[k.Value] = k.Line
		pairs = append(pairs, pair{key: k.Value, line: k.Line, val: n.Content[i+1]})
	}
	return pairs, ok
}

// sequence returns n's entries, or reports a problem.
func (w *walker) sequence(n *yaml.Node, path, want string) ([]*yaml.Node, bool) {
	n = w.resolve(n)
	if n.Kind != yaml.SequenceNode {
		w.add(n.Line, path, "want %s, got %s", want, kind(n))
		return nil, false
	}
	return n.Content, true
}

// scalar returns n's text when it is a scalar other than null.
func (w *walker) scalar(n *yaml.Node, path, want string) (string, int, bool) {
	n = w.resolve(n)
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		w.add(n.Line, path, "want %s, got %s", want, kind(n))
		return "", n.Line, false
	}
	return n.Value, n.Line, true
}

// boolean reads true/false as netplan does (YAML 1.1's yes/no, on/off,
// y/n too, in any case), whether quoted or not.
func (w *walker) boolean(n *yaml.Node, path string) (bool, bool) {
	s, line, ok := w.scalar(n, path, "true or false")
	if !ok {
		return false, false
	}
	switch strings.ToLower(s) {
	case "true", "yes", "on", "y":
		return true, true
	case "false", "no", "off", "n":
		return false, true
	}
	w.add(line, path, "want true or false, got %q", s)
	return false, false
}

// integer reads an integer within [lo, hi].
func (w *walker) integer(n *yaml.Node, path string, lo, hi int64) (int64, bool) {
	r := w.resolve(n)
	if r.Kind != yaml.ScalarNode || r.Tag != "!!int" {
		what := kind(r)
		if r.Kind == yaml.ScalarNode && r.Tag != "!!null" {
			what = strconv.Quote(r.Value)
		}
		w.add(r.Line, path, "want an integer from %d to %d, got %s", lo, hi, what)
		return 0, false
	}
	var v int64
	if err := r.Decode(&v); err != nil || v < lo || v > hi {
		w.add(r.Line, path, "want an integer from %d to %d, got %s", lo, hi, r.Value)
		return 0, false
	}
	return v, true
}

// item is one scalar of a list, with where it is.
type item struct {
	val  string
	line int
	path string
}

// stringList reads a list of scalars; a single scalar is not a list.
func (w *walker) stringList(n *yaml.Node, path, want string) []item {
	entries, ok := w.sequence(n, path, "a list of "+want)
	if !ok {
		return nil
	}
	var out []item
	for i, e := range entries {
		ip := index(path, i)
		if s, line, ok := w.scalar(e, ip, want); ok {
			out = append(out, item{s, line, ip})
		}
	}
	return out
}

// kind names a node's type for messages.
func kind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return "nothing (null)"
		case "!!bool":
			return "a boolean (" + n.Value + ")"
		case "!!int", "!!float":
			return "a number (" + n.Value + ")"
		}
		return fmt.Sprintf("the string %q", n.Value)
	}
	return "an alias"
}

// join adds key to path, quoted when it is not a plain name so that a
// key cannot forge another path or a line break in a message.
func join(path, key string) string {
	if !plainKey(key) {
		key = strconv.Quote(key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func plainKey(k string) bool {
	if k == "" || len(k) > 64 {
		return false
	}
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == ':') {
			return false
		}
	}
	return true
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }
