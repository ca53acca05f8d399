package bottlerocket

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/pelletier/go-toml/v2/unstable"
)

// index walks the document's syntax and returns the line each key path
// (see Problem.Path) and each list element first appears on, so that a
// problem found in the decoded values can name its line. go-toml's decoded
// maps keep no positions; its syntax tree does. The walk is also where
// the limits on nesting, keys and key length are enforced (an *Error),
// before the values are decoded. It does not judge what the syntax means
// (a key given twice): go-toml's decoding does. Bad syntax stops it with
// a *syntaxError.
func index(data []byte) (map[string]int, error) {
	x := &indexer{
		lines:  map[string]int{},
		arrays: map[string]int{},
	}
	for i, c := range data {
		if c == '\n' {
			x.newlines = append(x.newlines, i)
		}
	}
	var p unstable.Parser
	p.Reset(data)
	cur, depth := "", 0
	for p.NextExpression() {
		e := p.Expression()
		var err error
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			cur, depth, err = x.header(e)
		case unstable.KeyValue:
			err = x.keyValue(cur, depth, e)
		}
		if err != nil {
			return nil, err
		}
	}
	if err := p.Error(); err != nil {
		return nil, &syntaxError{err}
	}
	return x.lines, nil
}

// syntaxError is the parser's error, for Read to replace with go-toml's
// decoding error, which names the line.
type syntaxError struct{ err error }

func (e *syntaxError) Error() string { return e.err.Error() }
func (e *syntaxError) Unwrap() error { return e.err }

type indexer struct {
	// newlines are the offsets of the document's '\n's, for line numbers.
	newlines []int
	lines    map[string]int
	// arrays holds, for each array of tables ([[name]]), the index of its
	// last element so far: a later [name.sub] header or [[name.sub]] is
	// inside that element.
	arrays map[string]int
}

// line is the 1-based line of a byte offset.
func (x *indexer) line(offset uint32) int {
	n, _ := slices.BinarySearch(x.newlines, int(offset))
	return n + 1
}

// record notes path's line, once, checking the limits.
func (x *indexer) record(path string, depth int, offset uint32) error {
	if depth > MaxDepth {
		return &Error{Line: x.line(offset), Path: clipPath(path), Msg: fmt.Sprintf("nested more than %d deep (bottlerocket.MaxDepth)", MaxDepth)}
	}
	if _, seen := x.lines[path]; seen {
		return nil
	}
	if len(x.lines) == MaxKeys {
		return &Error{Line: x.line(offset), Path: clipPath(path), Msg: fmt.Sprintf("more than %d keys and list elements (bottlerocket.MaxKeys)", MaxKeys)}
	}
	x.lines[path] = x.line(offset)
	return nil
}

// key appends one key of a dotted key or header to path.
func (x *indexer) key(path string, k *unstable.Node) (string, error) {
	if len(k.Data) > MaxKeyLength {
		return "", &Error{Line: x.line(k.Raw.Offset), Path: clipPath(path), Msg: fmt.Sprintf("a key of %d bytes, more than %d (bottlerocket.MaxKeyLength)", len(k.Data), MaxKeyLength)}
	}
	return join(path, string(k.Data)), nil
}

// header reads a [table] or [[array table]] header and returns the path
// of the table that the key/values after it go into.
func (x *indexer) header(e *unstable.Node) (string, int, error) {
	path, depth := "", 0
	it := e.Key()
	for it.Next() {
		k := it.Node()
		var err error
		if path, err = x.key(path, k); err != nil {
			return "", 0, err
		}
		depth++
		if err := x.record(path, depth, k.Raw.Offset); err != nil {
			return "", 0, err
		}
		last, isArray := x.arrays[path]
		switch {
		case it.IsLast() && e.Kind == unstable.ArrayTable:
			// A new element.
			i := 0
			if isArray {
				i = last + 1
			}
			x.arrays[path] = i
			path, depth = indexed(path, i), depth+1
			if err := x.record(path, depth, k.Raw.Offset); err != nil {
				return "", 0, err
			}
		case isArray:
			// [a.b] after [[a]] is in a's last element.
			path, depth = indexed(path, last), depth+1
		}
	}
	return path, depth, nil
}

// keyValue indexes a key = value under the table at path.
func (x *indexer) keyValue(path string, depth int, e *unstable.Node) error {
	offset := e.Raw.Offset
	it := e.Key()
	for it.Next() {
		k := it.Node()
		var err error
		if path, err = x.key(path, k); err != nil {
			return err
		}
		depth++
		offset = k.Raw.Offset
		if err := x.record(path, depth, offset); err != nil {
			return err
		}
	}
	return x.value(path, depth, e.Value(), offset)
}

// value indexes the elements of a list and the keys of an inline table;
// offset is where the value's key is, for elements that carry no position
// of their own (lists).
func (x *indexer) value(path string, depth int, v *unstable.Node, offset uint32) error {
	if v.Raw.Length > 0 {
		offset = v.Raw.Offset
	}
	switch v.Kind {
	case unstable.Array:
		i := 0
		for it := v.Children(); it.Next(); i++ {
			c := it.Node()
			at := offset
			if c.Raw.Length > 0 {
				at = c.Raw.Offset
			}
			p := indexed(path, i)
			if err := x.record(p, depth+1, at); err != nil {
				return err
			}
			if err := x.value(p, depth+1, c, at); err != nil {
				return err
			}
		}
	case unstable.InlineTable:
		for it := v.Children(); it.Next(); {
			if kv := it.Node(); kv.Kind == unstable.KeyValue {
				if err := x.keyValue(path, depth, kv); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// join is the path of key under parent: a bare TOML key as it is, any
// other quoted (which also escapes control characters, so a path is
// always safe to print).
func join(parent, key string) string {
	if !bareKey(key) {
		key = strconv.Quote(key)
	}
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// indexed is the path of list element i.
func indexed(parent string, i int) string { return parent + "[" + strconv.Itoa(i) + "]" }

// bareKey reports whether k is a TOML bare key: A-Za-z0-9_-, not empty.
func bareKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
