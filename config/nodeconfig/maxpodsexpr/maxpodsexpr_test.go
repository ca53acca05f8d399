package maxpodsexpr

import (
	"strings"
	"testing"
)

func TestEval(t *testing.T) {
	v := Vars{DefaultENIs: 3, IPsPerENI: 10, MaxPods: 29}
	cases := map[string]int{
		"max_pods":                                  29,
		"default_enis * (ips_per_eni - 1) + 2":      29,
		"max_pods > 20 ? 20 : max_pods":             20,
		"default_enis * (ips_per_eni - 1) * 16 + 2": 434,
		"110": 110,
	}
	for expr, want := range cases {
		e, err := Compile(expr)
		if err != nil {
			t.Fatalf("Compile(%q): %v", expr, err)
		}
		got, err := e.Eval(v)
		if err != nil || got != want {
			t.Errorf("%q = %d, %v; want %d", expr, got, err, want)
		}
		if e.String() != expr {
			t.Errorf("String() = %q", e.String())
		}
	}
}

func TestCompileErrors(t *testing.T) {
	for expr, want := range map[string]string{
		"max_pods > 1":   `compiling "max_pods > 1": result is bool, want int`,
		"max_pods / 2.0": `found no matching overload for '_/_' applied to '(int, double)'`,
		"pods":           `undeclared reference to 'pods'`,
		"":               `Syntax error`,
	} {
		if _, err := Compile(expr); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Compile(%q) = %v, want it to contain %q", expr, err, want)
		}
	}
}

func TestEvalErrors(t *testing.T) {
	for expr, want := range map[string]string{
		"max_pods - 100":           `result -71, want at least 1`,
		"max_pods / 0":             `division by zero`,
		"max_pods * 1000000000000": `result too large`,
	} {
		e, err := Compile(expr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Eval(Vars{DefaultENIs: 3, IPsPerENI: 10, MaxPods: 29}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Eval(%q) = %v, want it to contain %q", expr, err, want)
		}
	}
}
