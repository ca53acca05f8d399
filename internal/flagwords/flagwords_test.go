package flagwords

import (
	"slices"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{`--v=2 --max-pods=20`, []string{"--v=2", "--max-pods=20"}},
		{`--node-labels="a=b,c=d"`, []string{"--node-labels=a=b,c=d"}},
		{`'--kubeconfig=/tmp/x'`, []string{"--kubeconfig=/tmp/x"}},
		{`"--kubeconfig=/tmp/x"`, []string{"--kubeconfig=/tmp/x"}},
		{`--kube\config=x`, []string{"--kubeconfig=x"}},
		{`"a\"b" 'c\d'`, []string{`a"b`, `c\d`}},
		{"  \t--a\n--b  ", []string{"--a", "--b"}},
		{`--x="unterminated value`, []string{"--x=unterminated value"}},
		{`""`, []string{""}},
		{``, nil},
	} {
		if got := Split(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("Split(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestName(t *testing.T) {
	for _, tc := range []struct {
		word, name string
		inline, ok bool
	}{
		{"--kubeconfig=/x", "--kubeconfig", true, true},
		{"--kubeconfig", "--kubeconfig", false, true},
		{"--container_runtime_endpoint=unix:///x", "--container-runtime-endpoint", true, true},
		{"--config_dir", "--config-dir", false, true},
		{"--node-labels=a=b", "--node-labels", true, true},
		{"-v", "", false, false},
		{"--", "", false, false},
		{"---config", "", false, false},
		{"/tmp/x", "", false, false},
		{"", "", false, false},
	} {
		name, inline, ok := Name(tc.word)
		if name != tc.name || inline != tc.inline || ok != tc.ok {
			t.Errorf("Name(%q) = %q, %t, %t; want %q, %t, %t", tc.word, name, inline, ok, tc.name, tc.inline, tc.ok)
		}
	}
}

// FuzzSplit: flags are user data. Splitting never panics, words hold no
// unquoted whitespace split point, and a flag name is always "--" and a
// name without '_' or '='.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{`--a="b c" 'd'`, `--x\ y`, `"`, `\`, `--a_b=c`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, w := range Split(s) {
			if name, _, ok := Name(w); ok {
				if !strings.HasPrefix(name, "--") || strings.ContainsAny(name, "_=") {
					t.Fatalf("Name(%q) = %q", w, name)
				}
			}
		}
		// Splitting is what systemd does once: a word with no quote,
		// backslash or space splits to itself.
		if s != "" && !strings.ContainsAny(s, "'\"\\ \t\n\r") {
			if got := Split(s); len(got) != 1 || got[0] != s {
				t.Fatalf("Split(%q) = %q", s, got)
			}
		}
	})
}
