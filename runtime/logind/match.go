package logind

import (
	"fmt"
	"strings"
)

// matchRule is a parsed AddMatch rule. The bus only ever emits one signal
// (login1's PrepareForShutdown), so a rule is kept to decide whether that
// signal goes to the connection, as dbus-daemon would decide.
type matchRule struct {
	raw  string
	keys map[string]string
}

// maxRuleLen and maxRules bound what one client can make the bus keep.
const (
	maxRuleLen = 1024
	maxRules   = 64
)

// parseMatchRule parses the D-Bus match rule syntax: comma-separated
// key='value' pairs, where a quote is ended only by another quote, and
// outside quotes \' is a literal quote.
func parseMatchRule(s string) (matchRule, error) {
	if len(s) > maxRuleLen {
		return matchRule{}, fmt.Errorf("match rule is %d bytes, more than %d", len(s), maxRuleLen)
	}
	r := matchRule{raw: s, keys: map[string]string{}}
	rest := strings.TrimSpace(s)
	for rest != "" {
		key, after, ok := strings.Cut(rest, "=")
		if !ok {
			return matchRule{}, fmt.Errorf("match rule %q: %q has no '='", s, rest)
		}
		key = strings.TrimSpace(key)
		if key == "" {
			return matchRule{}, fmt.Errorf("match rule %q: empty key", s)
		}
		var val strings.Builder
		i, quoted := 0, false
	value:
		for ; i < len(after); i++ {
			c := after[i]
			switch {
			case c == '\'':
				quoted = !quoted
			case !quoted && c == '\\' && i+1 < len(after) && after[i+1] == '\'':
				val.WriteByte('\'')
				i++
			case !quoted && c == ',':
				break value
			default:
				val.WriteByte(c)
			}
		}
		if quoted {
			return matchRule{}, fmt.Errorf("match rule %q: unterminated quote in %s", s, key)
		}
		if _, dup := r.keys[key]; dup {
			return matchRule{}, fmt.Errorf("match rule %q: %s given twice", s, key)
		}
		r.keys[key] = val.String()
		if i >= len(after) {
			break
		}
		rest = strings.TrimSpace(after[i+1:])
	}
	return r, nil
}

// signal is what a rule is matched against.
type signal struct {
	sender, path, iface, member string
}

// matches reports whether the rule selects sig. Keys this bus has no use
// for (argN, destination, eavesdrop) are conditions sig cannot meet, so
// such a rule matches nothing, which is what a real bus does for login1's
// signal, whose one argument is not a string.
func (r matchRule) matches(sig signal) bool {
	for k, v := range r.keys {
		switch k {
		case "type":
			if v != "signal" {
				return false
			}
		case "sender":
			if v != sig.sender {
				return false
			}
		case "interface":
			if v != sig.iface {
				return false
			}
		case "member":
			if v != sig.member {
				return false
			}
		case "path":
			if v != sig.path {
				return false
			}
		case "path_namespace":
			if sig.path != v && !strings.HasPrefix(sig.path, strings.TrimSuffix(v, "/")+"/") {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// prepareForShutdown is login1's one signal.
var prepareForShutdown = signal{sender: login1Name, path: string(login1Path), iface: login1Manager, member: "PrepareForShutdown"}
