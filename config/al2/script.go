// Package al2 reads the user data of Amazon Linux 2 EKS nodes: a shell
// script that runs /etc/eks/bootstrap.sh with the cluster's name and
// options. berth runs no shell, so the script is read, never run: this
// package finds the one top-level bootstrap.sh invocation, expands the
// simple variables earlier lines assigned (as the EKS user guide's and
// Karpenter's scripts do), and reads its arguments the way AL2's
// bootstrap.sh read them. Every other command is listed, with its line,
// as not run, so that the operator sees what to move into a NodeConfig.
// What cannot be known without running the script (a command
// substitution, a variable no earlier line set, an invocation inside an
// if or a function) is an error that names the line.
//
// This package decides; turning the options into a NodeConfig is
// nodeconfig's job.
package al2

import (
	"bytes"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Limits on what a script may make this package do. User data is at most
// 16 KiB raw on EC2 (4 MiB decoded, userdata.MaxDecodedSize), so these
// bound the work on hostile input, not real scripts.
const (
	// MaxCommands caps the commands read from one script.
	MaxCommands = 4096
	// MaxVars caps the variables a script may assign.
	MaxVars = 512
	// MaxExpanded caps the bytes one word may expand to: a variable
	// assigned from itself twice per line doubles each time.
	MaxExpanded = 64 << 10
)

// Line is a command of the script that berth did not run.
type Line struct {
	// N is the 1-based line the command starts on.
	N int `json:"line"`
	// Text is the command as written, continuation lines joined.
	Text string `json:"text"`
}

// Invocation is the script's bootstrap.sh command.
type Invocation struct {
	// Line is the 1-based line the command starts on.
	Line int
	// Program is the command word as written (/etc/eks/bootstrap.sh).
	Program string
	// Args are its arguments, quotes removed and variables expanded.
	Args []string
	// NotRun lists the script's other commands, in order, assignments
	// included (the invocation's Args hold what it took from them).
	NotRun []Line
	// Env holds the variables bootstrap.sh reads from its environment
	// (EnvVars) that the script exported earlier or set on the
	// invocation's own line (NAME=value /etc/eks/bootstrap.sh ...).
	Env map[string]string
}

// Error is a script berth cannot read; it names the line.
type Error struct {
	Line int
	Msg  string
}

func (e *Error) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// command is one simple command of the script, split at unquoted ;, &, |,
// && , || and newlines (not inside parentheses, a heredoc or quotes).
type command struct {
	line int
	text string
}

// IsBootstrapScript reports whether script runs bootstrap.sh, by a cheap
// look: callers use it to tell an AL2 script from any other script part.
func IsBootstrapScript(script []byte) bool {
	return bootstrapWord.Match(script)
}

var bootstrapWord = regexp.MustCompile(`(?m)(^|[\s;&|'"/])bootstrap\.sh(\s|$|['";&|])`)

// Read reads script and returns its bootstrap.sh invocation.
func Read(script []byte) (*Invocation, error) {
	cmds, err := split(script)
	if err != nil {
		return nil, err
	}
	vars := map[string]variable{}
	var inv *Invocation
	var notRun []Line
	depth := 0
	for _, c := range cmds {
		words := rawWords(c)
		if len(words) == 0 {
			continue
		}
		depth = nesting(depth, words)
		if assigns, ok := assignments(words); ok {
			if len(vars)+len(assigns) > MaxVars {
				return nil, &Error{c.line, fmt.Sprintf("more than %d variable assignments (al2.MaxVars)", MaxVars)}
			}
			exported := words[0].raw == "export" || words[0].raw == "declare" && slices.ContainsFunc(words[1:], func(w word) bool {
				return strings.HasPrefix(w.raw, "-") && strings.Contains(w.raw, "x")
			})
			for _, a := range assigns {
				v, err := expand(a.value, vars, c.line)
				exp := exported || vars[a.name].exported
				if err != nil {
					// Only an error if the invocation uses it.
					vars[a.name] = variable{err: err, exported: exp}
				} else {
					vars[a.name] = variable{value: v, set: true, exported: exp}
				}
			}
			notRun = append(notRun, Line{c.line, c.text})
			continue
		}
		if words[0].raw == "export" && len(words) > 1 {
			// export NAME [NAME...]: names assigned before (or later).
			for _, w := range words[1:] {
				if v := vars[w.raw]; assignRE.MatchString(w.raw + "=") {
					v.exported = true
					vars[w.raw] = v
				}
			}
			notRun = append(notRun, Line{c.line, c.text})
			continue
		}
		prefix, prog, args, ok := bootstrapCommand(words)
		if !ok {
			notRun = append(notRun, Line{c.line, c.text})
			continue
		}
		if inv != nil {
			return nil, &Error{c.line, fmt.Sprintf("a second bootstrap.sh invocation (the first is on line %d): berth reads one", inv.Line)}
		}
		if depth > 0 {
			return nil, &Error{c.line, "bootstrap.sh runs inside an if, a loop, a case or a function: berth runs no shell and reads only a top-level invocation"}
		}
		inv = &Invocation{Line: c.line, Program: prog, Env: map[string]string{}}
		for _, w := range args {
			v, err := expand(w.raw, vars, c.line)
			if err != nil {
				return nil, err
			}
			inv.Args = append(inv.Args, v)
		}
		for _, name := range slices.Sorted(maps.Keys(vars)) {
			v := vars[name]
			if _, read := EnvVars[name]; !read || !v.exported {
				continue
			}
			if v.err != nil {
				return nil, v.err
			}
			inv.Env[name] = v.value
		}
		for _, a := range prefix {
			v, err := expand(a.value, vars, c.line)
			if err != nil {
				return nil, err
			}
			if _, read := EnvVars[a.name]; read {
				inv.Env[a.name] = v
			}
		}
	}
	if inv == nil {
		return nil, &Error{1, "no bootstrap.sh invocation in the script"}
	}
	inv.NotRun = notRun
	return inv, nil
}

type variable struct {
	value string
	set   bool
	err   error
	// exported: bootstrap.sh, a child process, sees it.
	exported bool
}

// EnvVars are the variables AL2's bootstrap.sh read from its environment
// when no option set them ("${VAR:-default}" after its option loop), each
// with the option it stands for; SERVICE_IPV4_CIDR and
// PAUSE_CONTAINER_IMAGE have no option (terraform-aws-eks exports the
// first).
var EnvVars = map[string]string{
	"USE_MAX_PODS":            "--use-max-pods",
	"B64_CLUSTER_CA":          "--b64-cluster-ca",
	"APISERVER_ENDPOINT":      "--apiserver-endpoint",
	"SERVICE_IPV4_CIDR":       "",
	"DNS_CLUSTER_IP":          "--dns-cluster-ip",
	"KUBELET_EXTRA_ARGS":      "--kubelet-extra-args",
	"API_RETRY_ATTEMPTS":      "--aws-api-retry-attempts",
	"CONTAINERD_CONFIG_FILE":  "--containerd-config-file",
	"PAUSE_CONTAINER_VERSION": "--pause-container-version",
	"PAUSE_CONTAINER_ACCOUNT": "--pause-container-account",
	"PAUSE_CONTAINER_IMAGE":   "",
	"IP_FAMILY":               "--ip-family",
	"SERVICE_IPV6_CIDR":       "--service-ipv6-cidr",
	"ENABLE_LOCAL_OUTPOST":    "--enable-local-outpost",
	"CLUSTER_ID":              "--cluster-id",
	"LOCAL_DISKS":             "--local-disks",
	"MOUNT_BPF_FS":            "--mount-bpf-fs",
	"DOCKER_CONFIG_JSON":      "--docker-config-json",
	"ENABLE_DOCKER_BRIDGE":    "--enable-docker-bridge",
	"CONTAINER_RUNTIME":       "--container-runtime",
}

// split cuts the script into simple commands. Heredoc bodies stay with
// the command that opened them; parentheses keep what is inside together
// (a process substitution such as `exec > >(tee log | logger) 2>&1`).
func split(script []byte) ([]command, error) {
	s := string(bytes.ReplaceAll(script, []byte("\r\n"), []byte("\n")))
	var (
		cmds      []command
		cur       strings.Builder
		line      = 1
		start     = 1
		quote     byte
		parens    int
		heredocs  []string
		atWordBeg = true
	)
	flush := func() error {
		text := strings.TrimSpace(cur.String())
		cur.Reset()
		if text != "" {
			if len(cmds) == MaxCommands {
				return &Error{start, fmt.Sprintf("more than %d commands (al2.MaxCommands)", MaxCommands)}
			}
			cmds = append(cmds, command{line: start, text: text})
		}
		return nil
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\n' {
			line++
		}
		switch {
		case quote == '\'':
			cur.WriteByte(c)
			if c == '\'' {
				quote = 0
			}
			continue
		case quote == '"':
			cur.WriteByte(c)
			if c == '\\' && i+1 < len(s) {
				i++
				if s[i] == '\n' {
					line++
				}
				cur.WriteByte(s[i])
			} else if c == '"' {
				quote = 0
			}
			continue
		}
		switch c {
		case '\\':
			if i+1 < len(s) && s[i+1] == '\n' {
				// A continuation: the next line is this command's.
				i++
				line++
				cur.WriteByte(' ')
				continue
			}
			cur.WriteByte(c)
			if i+1 < len(s) {
				i++
				cur.WriteByte(s[i])
			}
			atWordBeg = false
			continue
		case '\'', '"':
			quote = c
			cur.WriteByte(c)
			atWordBeg = false
			continue
		case '#':
			if atWordBeg {
				// A comment runs to the end of the line.
				for i+1 < len(s) && s[i+1] != '\n' {
					i++
				}
				continue
			}
		case '(':
			parens++
		case ')':
			if parens > 0 {
				parens--
			}
		case '<':
			if strings.HasPrefix(s[i:], "<<") && !strings.HasPrefix(s[i:], "<<<") {
				if d := heredocDelimiter(s[i+2:]); d != "" {
					heredocs = append(heredocs, d)
				}
			}
		}
		if parens == 0 && (c == '\n' || c == ';' || c == '&' || c == '|') {
			if c == '&' && i > 0 && (s[i-1] == '>' || s[i-1] == '<') || c == '&' && i+1 < len(s) && s[i+1] == '>' {
				// A redirection (2>&1, &>file), not a separator.
				cur.WriteByte(c)
				continue
			}
			if c == '\n' && len(heredocs) > 0 {
				// The heredoc bodies follow the command's line.
				cur.WriteByte(c)
				for _, d := range heredocs {
					for i+1 < len(s) {
						end := strings.IndexByte(s[i+1:], '\n')
						var l string
						if end < 0 {
							l, i = s[i+1:], len(s)-1
						} else {
							l, i = s[i+1:i+1+end], i+1+end
							line++
						}
						cur.WriteString(l + "\n")
						if strings.TrimLeft(l, "\t") == d {
							break
						}
					}
				}
				heredocs = nil
			}
			if err := flush(); err != nil {
				return nil, err
			}
			start = line
			if c == '&' || c == '|' {
				if i+1 < len(s) && s[i+1] == c {
					i++
				}
			}
			atWordBeg = true
			continue
		}
		cur.WriteByte(c)
		atWordBeg = c == ' ' || c == '\t' || c == '(' || c == '\n'
	}
	if quote != 0 {
		return nil, &Error{start, fmt.Sprintf("unterminated %c quote", quote)}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return cmds, nil
}

// heredocDelimiter returns the word after <<, <<- with its quotes
// removed, or "" when there is none.
func heredocDelimiter(s string) string {
	s = strings.TrimPrefix(s, "-")
	s = strings.TrimLeft(s, " \t")
	end := strings.IndexAny(s, " \t\n;&|<>")
	if end < 0 {
		end = len(s)
	}
	return strings.NewReplacer("'", "", `"`, "", `\`, "").Replace(s[:end])
}

// word is one shell word as written, quotes kept, for expand.
type word struct {
	raw string
	// quotedName: a quote opens before any '=', so the word is a command
	// word even if it reads like an assignment ("A=b" or 'A'=b); A="b c"
	// is still an assignment.
	quotedName bool
}

// rawWords splits a command into its words, quotes kept.
func rawWords(c command) []word {
	var (
		out    []word
		cur    strings.Builder
		in     bool
		quote  byte
		qName  bool
		parens int
	)
	s := c.text
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case quote == '\'':
			if ch == '\'' {
				quote = 0
			}
			cur.WriteByte(ch)
			continue
		case quote == '"':
			if ch == '\\' && i+1 < len(s) {
				cur.WriteByte(ch)
				i++
				cur.WriteByte(s[i])
				continue
			}
			if ch == '"' {
				quote = 0
			}
			cur.WriteByte(ch)
			continue
		}
		switch ch {
		case ' ', '\t', '\n':
			if parens > 0 {
				cur.WriteByte(ch)
				continue
			}
			if in {
				out = append(out, word{raw: cur.String(), quotedName: qName})
				cur.Reset()
				in, qName = false, false
			}
			continue
		case '\'', '"':
			if !strings.Contains(cur.String(), "=") {
				qName = true
			}
			quote = ch
		case '\\':
			cur.WriteByte(ch)
			if i+1 < len(s) {
				i++
				ch = s[i]
			}
		case '(':
			parens++
		case ')':
			if parens > 0 {
				parens--
			}
		}
		cur.WriteByte(ch)
		in = true
	}
	if in {
		out = append(out, word{raw: cur.String(), quotedName: qName})
	}
	return out
}

type assignment struct{ name, value string }

var assignRE = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)=`)

// assignments reports whether the command only assigns variables
// (optionally after export), and returns them.
func assignments(words []word) ([]assignment, bool) {
	if words[0].raw == "export" || words[0].raw == "readonly" || words[0].raw == "declare" || words[0].raw == "local" {
		words = words[1:]
		for len(words) > 0 && strings.HasPrefix(words[0].raw, "-") {
			words = words[1:]
		}
	}
	if len(words) == 0 {
		return nil, false
	}
	var out []assignment
	for _, w := range words {
		m := assignRE.FindString(w.raw)
		if m == "" || w.quotedName {
			return nil, false
		}
		out = append(out, assignment{name: m[:len(m)-1], value: w.raw[len(m):]})
	}
	return out, true
}

// bootstrapCommand reports whether words run bootstrap.sh, directly or
// through exec, sudo, bash or sh, and returns the assignments before it
// (its environment), the program word and its arguments.
func bootstrapCommand(words []word) ([]assignment, string, []word, bool) {
	var prefix []assignment
	for len(words) > 0 {
		if m := assignRE.FindString(words[0].raw); m != "" && !words[0].quotedName {
			prefix = append(prefix, assignment{name: m[:len(m)-1], value: words[0].raw[len(m):]})
			words = words[1:]
			continue
		}
		switch w := words[0].raw; {
		case w == "exec" || w == "sudo" || w == "bash" || w == "sh" || w == "/bin/bash" || w == "/bin/sh" || w == "/usr/bin/env" || w == "env":
			words = words[1:]
			for len(words) > 0 && strings.HasPrefix(words[0].raw, "-") && !strings.Contains(words[0].raw, "bootstrap.sh") {
				words = words[1:]
			}
		case w == "bootstrap.sh" || strings.HasSuffix(w, "/bootstrap.sh") || unquote(w) == "bootstrap.sh" || strings.HasSuffix(unquote(w), "/bootstrap.sh"):
			return prefix, unquote(w), words[1:], true
		default:
			return nil, "", nil, false
		}
	}
	return nil, "", nil, false
}

// unquote removes quotes from a word with no expansions in it.
func unquote(w string) string {
	return strings.NewReplacer("'", "", `"`, "").Replace(w)
}

// nesting follows if/fi, case/esac, loops and braces, so that an
// invocation inside one is refused.
func nesting(depth int, words []word) int {
	for _, w := range words {
		switch w.raw {
		case "if", "case", "for", "while", "until", "{", "function":
			depth++
		case "fi", "esac", "done", "}":
			if depth > 0 {
				depth--
			}
		}
		if strings.HasSuffix(w.raw, "()") {
			depth++ // name() { ... }: the brace that follows closes it
		}
	}
	return depth
}

// expand removes quotes and expands $NAME, ${NAME} and ${NAME:-default}
// from vars, as the shell would for one word (no field splitting: the
// word stays one argument, as it does inside double quotes; unquoted
// values with spaces are refused).
func expand(raw string, vars map[string]variable, line int) (string, error) {
	var out strings.Builder
	var quote byte
	for i := 0; i < len(raw); i++ {
		if out.Len() > MaxExpanded {
			return "", &Error{line, fmt.Sprintf("a word expands to more than %d bytes (al2.MaxExpanded)", MaxExpanded)}
		}
		c := raw[i]
		if quote == '\'' {
			if c == '\'' {
				quote = 0
			} else {
				out.WriteByte(c)
			}
			continue
		}
		switch c {
		case '\'':
			if quote == '"' {
				out.WriteByte(c)
			} else {
				quote = '\''
			}
		case '"':
			if quote == '"' {
				quote = 0
			} else {
				quote = '"'
			}
		case '\\':
			if i+1 < len(raw) {
				i++
				n := raw[i]
				if quote == '"' && !strings.ContainsRune("$`\"\\", rune(n)) {
					out.WriteByte('\\')
				}
				out.WriteByte(n)
			}
		case '`':
			return "", &Error{line, "a `command` substitution: berth runs no shell; write the value itself"}
		case '$':
			rest := raw[i+1:]
			name, def, hasDef, n, err := varRef(rest, line)
			if err != nil {
				return "", err
			}
			if n == 0 {
				out.WriteByte('$')
				continue
			}
			i += n
			v, ok := vars[name]
			switch {
			case v.err != nil:
				return "", &Error{line, fmt.Sprintf("$%s comes from a line berth cannot evaluate (%v)", name, v.err)}
			case ok && v.set && (v.value != "" || !hasDef):
				if quote == 0 && strings.ContainsAny(v.value, " \t\n") {
					return "", &Error{line, fmt.Sprintf("$%s is unquoted and its value has spaces: the shell would split it into several arguments; quote it", name)}
				}
				out.WriteString(v.value)
			case hasDef:
				d, err := expand(def, vars, line)
				if err != nil {
					return "", err
				}
				out.WriteString(d)
			default:
				return "", &Error{line, fmt.Sprintf("$%s is not set by an earlier line of the script (berth runs no shell and knows no other variables)", name)}
			}
		default:
			out.WriteByte(c)
		}
	}
	return out.String(), nil
}

// clip bounds a piece of the script before it goes into a message.
func clip(s string) string {
	if len(s) > 64 {
		return strings.ToValidUTF8(s[:64], "") + "..."
	}
	return s
}

// quoteClipped is clip, quoted.
func quoteClipped(s string) string { return strconv.Quote(clip(s)) }

var (
	plainVar = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*`)
	braceVar = regexp.MustCompile(`^\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}`)
)

// varRef reads the variable reference after a '$': its name, default,
// and how many bytes it took (0: a lone '$').
func varRef(s string, line int) (name, def string, hasDef bool, n int, err error) {
	switch {
	case strings.HasPrefix(s, "(("):
		return "", "", false, 0, &Error{line, "a $((...)) arithmetic expansion: berth runs no shell; write the value itself"}
	case strings.HasPrefix(s, "("):
		return "", "", false, 0, &Error{line, "a $(...) command substitution: berth runs no shell; write the value itself"}
	case strings.HasPrefix(s, "{"):
		m := braceVar.FindStringSubmatchIndex(s)
		if m == nil {
			end := strings.IndexByte(s, '}')
			if end < 0 {
				return "", "", false, 0, &Error{line, "a ${ with no closing }"}
			}
			return "", "", false, 0, &Error{line, fmt.Sprintf("${%s}: berth expands only ${NAME} and ${NAME:-default}", clip(s[1:end]))}
		}
		name = s[m[2]:m[3]]
		if m[4] >= 0 {
			def, hasDef = s[m[4]:m[5]], true
		}
		return name, def, hasDef, m[1], nil
	case len(s) > 0 && (s[0] >= '0' && s[0] <= '9' || strings.ContainsRune("@*#?!$-", rune(s[0]))):
		return "", "", false, 0, &Error{line, fmt.Sprintf("$%c: the script's own arguments and the shell's special variables do not exist outside a shell", s[0])}
	}
	if m := plainVar.FindString(s); m != "" {
		return m, "", false, len(m), nil
	}
	return "", "", false, 0, nil
}
