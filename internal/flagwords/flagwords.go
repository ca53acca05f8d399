// Package flagwords reads kubelet's flags as user data gives them. On an
// AL2023 node nodeadm joins its flags and the user's spec.kubelet.flags with
// spaces into NODEADM_KUBELET_ARGS, and systemd expands $NODEADM_KUBELET_ARGS
// in ExecStart by splitting at whitespace and removing quotes
// (EXTRACT_UNQUOTE|EXTRACT_RELAX). User data in the wild (Karpenter's
// `--node-labels="a=b,c=d"`, or two flags in one list item) relies on that.
// berth execs kubelet itself, so it splits the same way, once, and the
// validation that refuses the flags berth owns reads the very words kubelet
// will get, under the names kubelet's flag set will give them.
package flagwords

import "strings"

// Split splits one spec.kubelet.flags element into argv words.
//
// Rules: whitespace separates words; '...' is literal; "..." is literal
// except that a backslash escapes the next character; outside quotes a
// backslash escapes the next character; quotes may sit anywhere in a word
// and are removed; an unterminated quote runs to the end (RELAX).
func Split(s string) []string {
	var (
		words  []string
		cur    strings.Builder
		inWord bool
	)
	const (
		plain = iota
		single
		double
	)
	state := plain
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch state {
		case single:
			if c == '\'' {
				state = plain
			} else {
				cur.WriteByte(c)
			}
		case double:
			switch c {
			case '"':
				state = plain
			case '\\':
				if i+1 < len(s) {
					i++
					cur.WriteByte(s[i])
				}
			default:
				cur.WriteByte(c)
			}
		default:
			switch c {
			case ' ', '\t', '\n', '\r':
				if inWord {
					words = append(words, cur.String())
					cur.Reset()
					inWord = false
				}
				continue
			case '\'':
				state = single
			case '"':
				state = double
			case '\\':
				if i+1 < len(s) {
					i++
					cur.WriteByte(s[i])
				}
			default:
				cur.WriteByte(c)
			}
		}
		inWord = true
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// Name is the flag a word names, as kubelet's flag set reads it: for a
// long flag ("--name" or "--name=value") the name with "--", with '_'
// turned into '-' as kubelet's word-separator normalization does
// (--container_runtime_endpoint is --container-runtime-endpoint), and
// whether the value came in the same word. ok is false for anything else
// (a value, a shorthand such as -v, or "--" itself).
func Name(word string) (name string, inline bool, ok bool) {
	rest, long := strings.CutPrefix(word, "--")
	if !long || rest == "" || strings.HasPrefix(rest, "-") {
		return "", false, false
	}
	n, _, inline := strings.Cut(rest, "=")
	return "--" + strings.ReplaceAll(n, "_", "-"), inline, true
}
