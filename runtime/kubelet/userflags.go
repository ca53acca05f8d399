package kubelet

import "strings"

// SplitUserFlags turns the user's kubelet.flags into argv words the way an
// AL2023 node does. nodeadm joins berth's and the user's flags with spaces
// into NODEADM_KUBELET_ARGS and systemd expands $NODEADM_KUBELET_ARGS in
// ExecStart by splitting at whitespace and removing quotes
// (EXTRACT_UNQUOTE|EXTRACT_RELAX). So user data in the wild (Karpenter's
// `--node-labels="a=b,c=d"`, or two flags in one list item) relies on that;
// berth execs kubelet directly and must do the same splitting itself.
//
// Rules: whitespace separates words; '...' is literal; "..." is literal
// except that a backslash escapes the next character; outside quotes a
// backslash escapes the next character; quotes may sit anywhere in a word
// and are removed; an unterminated quote runs to the end (RELAX).
func SplitUserFlags(flags []string) []string {
	var out []string
	for _, f := range flags {
		out = append(out, splitWords(f)...)
	}
	return out
}

func splitWords(s string) []string {
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
