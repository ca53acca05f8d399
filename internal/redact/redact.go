// Package redact is berth's one list of what is secret in what it prints:
// plan.txt, `berth render`'s output, problems found in a NodeConfig. The
// files a node gets are never redacted (kubelet and containerd need the
// real bytes); what is shown to a person is, unless they ask otherwise
// (`berth render --show-secrets`).
//
// Three kinds of rule, all here so that every printer agrees:
//
//   - Names (Name): a field or variable whose name says it holds a secret
//     has its value replaced: words containing TOKEN, SECRET, PASSWORD,
//     PASSWD or CREDENTIAL; the word PASS; words ending in KEY or KEYS
//     (API_KEY, accessKey, APIKEY, but not KEYBOARD); words starting or
//     ending with AUTH (auth, AUTH_HEADER, OAUTH, BASICAUTH,
//     Authorization, but not AUTHOR or AUTHORITY, as in
//     certificateAuthority). A name whose last word is FILE, PATH or DIR
//     names where a secret is kept, not the secret, and is shown.
//   - Shapes (Value): whatever the name, an Authorization or
//     Proxy-Authorization header's credentials, a URL's user information
//     (http://user:<redacted>@proxy) and the secret half of a Kubernetes
//     bootstrap token (abcdef.<redacted>).
//   - Free text (Text): the shapes, plus key/value pairs in the syntaxes
//     berth's inputs use, whose key is a secret name: TOML and env
//     (password = "x", API_KEY=x), JSON ("auth": "x", as in a
//     .dockerconfigjson) and YAML (token: x, to the end of the line).
//
// Redaction fails closed: a name that merely looks secret (MONKEY,
// AUTHN_MODE) is hidden too, and --show-secrets shows it.
package redact

import (
	"regexp"
	"strings"
	"unicode"
)

// Placeholder replaces every secret value.
const Placeholder = "<redacted>"

// Rules compiled once; read-only after init.
var (
	// authHeaderRE is an Authorization header in any syntax berth prints
	// ("Authorization: Bearer x", "authorization=Basic x", the JSON
	// "Authorization": "Bearer x", kubelet's --manifest-url-header
	// "Authorization:Bearer x,Other:y"): the scheme is kept, the
	// credentials go, up to a quote, comma, semicolon or the line's end.
	authHeaderRE = regexp.MustCompile(`(?i)\b((?:proxy-)?authorization"?\s*[:=]\s*"?)((?:basic|bearer|token|digest|negotiate|aws4-hmac-sha256)\s+)?[^\s",;][^\n",;]*`)
	// userinfoRE is a URL's user information: user:password@, or a lone
	// user@, which is as often a token (https://ghp_x@github.com).
	userinfoRE = regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.\-]*://)([^/\s:@"'<>]*)(:[^/\s@"'<>]*)?@`)
	// bootstrapTokenRE is a Kubernetes bootstrap token: the ID before the
	// dot is public (it names the token's Secret), the rest is not.
	bootstrapTokenRE = regexp.MustCompile(`\b([a-z0-9]{6})\.[a-z0-9]{16}\b`)
	// keySepRE is a key and its separator: key=, key = (TOML, env,
	// flags), "key": (JSON), key: (YAML). The value is read by valueLen.
	keySepRE = regexp.MustCompile(`(?i)([a-z_][a-z0-9_.\-/]*)"?[ \t]*([:=])[ \t]*`)
)

// Name reports whether a field or variable called name holds a secret,
// by the rules in the package doc. Case does not matter; words are split
// at anything not a letter or digit and at camelCase humps.
func Name(name string) bool {
	words := splitWords(name)
	if len(words) == 0 {
		return false
	}
	switch words[len(words)-1] {
	case "FILE", "FILES", "FILENAME", "PATH", "PATHS", "DIR", "DIRS":
		return false
	}
	for _, w := range words {
		if secretWord(w) {
			return true
		}
	}
	return false
}

func secretWord(w string) bool {
	for _, s := range []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"} {
		if strings.Contains(w, s) {
			return true
		}
	}
	switch {
	case w == "PASS":
		return true
	case strings.HasSuffix(w, "KEY"), strings.HasSuffix(w, "KEYS"):
		return true
	case strings.HasSuffix(w, "AUTH"):
		return true
	case strings.HasPrefix(w, "AUTH"):
		// Authorship and certificate authorities are not credentials.
		switch w {
		case "AUTHOR", "AUTHORS", "AUTHORED", "AUTHORITY", "AUTHORITIES":
			return false
		}
		return true
	}
	return false
}

// splitWords upper-cases name and splits it into words: at every rune
// that is not a letter or digit, and before an upper-case letter that
// follows a lower-case one (apiKey is API, KEY).
func splitWords(name string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToUpper(string(cur)))
			cur = cur[:0]
		}
	}
	var prev rune
	for _, r := range name {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
		case unicode.IsUpper(r) && unicode.IsLower(prev):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
		prev = r
	}
	flush()
	return words
}

// Value redacts the secret shapes in a value whose name is not itself
// secret: Authorization credentials, URL user information, bootstrap
// tokens. For argv and environment values.
func Value(s string) string {
	if s == "" {
		return s
	}
	s = authHeaderRE.ReplaceAllString(s, "${1}${2}"+Placeholder)
	s = userinfoRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := userinfoRE.FindStringSubmatch(m)
		if sub[3] != "" {
			return sub[1] + sub[2] + ":" + Placeholder + "@"
		}
		return sub[1] + Placeholder + "@"
	})
	return bootstrapTokenRE.ReplaceAllString(s, "${1}."+Placeholder)
}

// Env redacts one KEY=VALUE environment entry: the whole value when the
// name is secret (an empty value stays empty: it hides nothing), else the
// secret shapes in it.
func Env(entry string) string {
	k, v, ok := strings.Cut(entry, "=")
	if !ok {
		return Value(entry)
	}
	if Name(k) {
		if v == "" {
			return entry
		}
		return k + "=" + Placeholder
	}
	return k + "=" + Value(v)
}

// Text redacts free text: error messages, problems, warnings, config
// snippets. See the package doc for what it finds.
func Text(s string) string {
	if s == "" {
		return s
	}
	s = Value(s)
	var b strings.Builder
	i := 0
	for i < len(s) {
		loc := keySepRE.FindStringSubmatchIndex(s[i:])
		if loc == nil {
			break
		}
		key, sep, end := s[i+loc[2]:i+loc[3]], s[i+loc[4]], i+loc[1]
		b.WriteString(s[i:end])
		i = end
		// Authorization values are the header rule's: it kept the scheme
		// and already hid the credentials. A key that is not secret is
		// passed over but its value is not: "error: spec.x.API_KEY: ..."
		// must still find the second key.
		if !Name(key) || strings.HasSuffix(strings.ToLower(key), "authorization") {
			continue
		}
		n := valueLen(s[i:], sep)
		if n == 0 {
			continue
		}
		if v := s[i : i+n]; v[0] == '"' || v[0] == '\'' {
			b.WriteString(v[:1] + Placeholder + v[:1])
		} else {
			b.WriteString(Placeholder)
		}
		i += n
	}
	b.WriteString(s[i:])
	return b.String()
}

// valueLen is the length of the value at the start of s: a quoted string
// (quotes included), or a bare word after "=", or the rest of the line
// after ":" (a YAML scalar). Zero for no value or a structured one ({ or
// [), whose own keys are examined one by one.
func valueLen(s string, sep byte) int {
	if s == "" {
		return 0
	}
	switch q := s[0]; q {
	case '"', '\'':
		for i := 1; i < len(s); i++ {
			switch s[i] {
			case '\\':
				if q == '"' {
					i++
				}
			case q:
				return i + 1
			case '\n':
				return i
			}
		}
		return len(s)
	case '{', '[', '\n', '\r':
		return 0
	}
	if sep == ':' {
		if n := strings.IndexAny(s, "\r\n"); n >= 0 {
			return n
		}
		return len(s)
	}
	if n := strings.IndexAny(s, " \t\r\n\",;}]'"); n >= 0 {
		return n
	}
	return len(s)
}
