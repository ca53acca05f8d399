package maxpodsexpr

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"cel.dev/cel-go/cel"
)

// outcome is what an expression came to: a compile error, an evaluation
// error, or a value of a type.
type outcome struct {
	compileErr, evalErr bool
	typ                 string
	val                 any
}

func (o outcome) String() string {
	switch {
	case o.compileErr:
		return "compile error"
	case o.evalErr:
		return o.typ + " evaluation error"
	}
	return fmt.Sprintf("%s %v", o.typ, o.val)
}

func (o outcome) same(p outcome) bool {
	if o.compileErr || p.compileErr {
		return o.compileErr == p.compileErr
	}
	if o.typ != p.typ || o.evalErr != p.evalErr {
		return false
	}
	if f, ok := o.val.(float64); ok {
		g, _ := p.val.(float64)
		return f == g || (math.IsNaN(f) && math.IsNaN(g))
	}
	return o.val == p.val
}

var testVars = Vars{DefaultENIs: 3, IPsPerENI: 10, MaxPods: 29}

// celOutcome runs the expression through cel-go as nodeadm does.
func celOutcome(t testing.TB, env *cel.Env, expr string) outcome {
	ast, iss := env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		return outcome{compileErr: true}
	}
	prg, err := env.Program(ast)
	if err != nil {
		t.Fatalf("cel-go program of %q: %v", expr, err)
	}
	o := outcome{typ: ast.OutputType().String()}
	out, _, err := prg.Eval(map[string]any{VarDefaultENIs: int64(testVars.DefaultENIs), VarIPsPerENI: int64(testVars.IPsPerENI), VarMaxPods: int64(testVars.MaxPods)})
	if err != nil {
		o.evalErr = true
		return o
	}
	o.val = out.Value()
	return o
}

// ourOutcome runs it through this package's parser, whatever its type.
func ourOutcome(expr string) outcome {
	n, err := parse(expr)
	if err != nil {
		return outcome{compileErr: true}
	}
	o := outcome{typ: n.typ().String()}
	v, err := n.eval(testVars)
	if err != nil {
		o.evalErr = true
		return o
	}
	switch n.typ() {
	case tInt:
		o.val = v.i
	case tUint:
		o.val = v.u
	case tDouble:
		o.val = v.f
	default:
		o.val = v.b
	}
	return o
}

func celEnv(t testing.TB) *cel.Env {
	env, err := cel.NewEnv(
		cel.Variable(VarDefaultENIs, cel.IntType),
		cel.Variable(VarIPsPerENI, cel.IntType),
		cel.Variable(VarMaxPods, cel.IntType),
	)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// TestAgreesWithCEL: hand-picked edges of CEL's grammar and arithmetic
// (literal signs, runs of unary operators, overflow at each end, the
// conversions' bounds, error absorption by && and ||) come out as they
// do in cel-go.
func TestAgreesWithCEL(t *testing.T) {
	env := celEnv(t)
	for _, e := range []string{
		"1 == 1.0", "1 < 1.5", "1u < 2", "true ? 1 : 1.0", "007", "08", "1.", ".5", "1e3", "0x10", "0X10", "0x10u",
		"-9223372036854775808", "--5", "---5", "- -5", "!!5", "-(-9223372036854775808)", "--9223372036854775808",
		"true < false", "1 < 2 == true", "int(1.9)", "int(-1.9)", "int(1e19)", "uint(-1)", "uint(-1.0)", "double(1u)",
		"int(18446744073709551615u)", "5 % -3", "-5 / 2", "1.0 % 2.0", "-1u", "1.0 / 0.0", "int(1.0/0.0)",
		"9223372036854775807 + 1", "1u - 2u", "false && (1/0 == 1)", "(1/0 == 1) && false", "(1/0 == 1) || true",
		"true ? 1 : 1/0", "1 // comment\n + 2", "1e-3", "1E3", "1.5e+2", "int(true)", "uint(1.5)", "1 ? 2 : 3",
		"int(9.223372036854775807e18)", "int(-9.223372036854775808e18)", "uint(1.8446744073709551615e19)",
		"0.0 == -0.0", "18446744073709551615u", "18446744073709551616u", "9223372036854775808", "-0x8000000000000000",
		"0x8000000000000000", "int(0.0/0.0)", "uint(0.0/0.0)", "0.0/0.0 == 0.0/0.0", "int(-0.5)", "uint(-0.5)",
		"-9223372036854775808 / -1", "-9223372036854775808 % -1", "1u / 0u", "1u % 0u", "0 % 0", "9223372036854775807 * 2",
		"-9223372036854775807 - 2", "1u + 18446744073709551615u", "2u * 9223372036854775808u", "1e400", "-1e400",
		"!false || 1/0 == 1", "1/0 == 1 || false", "true && 1/0 == 1", "1/0 == 1 || 1/0 == 2", "- 1u", "-0x10u",
		"1 < 2 < 3", "(1 < 2) < true", "1uu", "1u2", "12abc", "1e", "1.5.5", "0x", "0xg", "1 +", "()", "max_pods()",
		"int()", "int(1, 2)", "foo(1)", "int(double(max_pods) * 0.8)", "1 /* c */ + 1", "1\t+\r\n2", "0xffffffffffffffffu",
		"00x1", "1_000", "true ? true : false ? 1 : 2", "true ? 1 : false ? 2 : 3", "-max_pods", "--max_pods", "!max_pods",
		"!!max_pods", "int(-9223372036854775808.0)", "int(9223372036854775295.0)", "1e3u", "1.5u", ".5e1", "5.", "00.5",
		"true || false ? 1 : 2", "true?1:2", "1--1", "1---1", "-1.0", "--1.0", "-(1.5)", "-  0x10", "-9223372036854775809",
		"max_pods > 110 ? 110 : max_pods", "((default_enis - 1) * (ips_per_eni - 1)) + 2", "(default_enis * (ips_per_eni - 1)) + 2",
		"-9223372036854775808 * -1", "-1 * -9223372036854775808", "-9223372036854775807 - 1", "1 - -9223372036854775808",
		"true == false", "!!-max_pods", "!!--5", "!-5", "!!-5u", "-!true", "true != false", "false <= true", "max_pods >= 29 && max_pods <= 29", "!(max_pods == 29)",
	} {
		if want, got := celOutcome(t, env, e), ourOutcome(e); !want.same(got) {
			t.Errorf("%q: cel-go %v, maxpodsexpr %v", e, want, got)
		}
	}
}

// genExpr writes a random expression of the supported grammar, nested up
// to depth, with the literals where CEL's arithmetic has its edges.
func genExpr(r *rand.Rand, depth int) string {
	atoms := []string{"0", "1", "2", "7", "29", "-1", "-3", "9223372036854775807", "-9223372036854775808", "0x10", "007",
		"0u", "1u", "3u", "18446744073709551615u", "0xFFu", "0.0", "1.5", "-2.5", ".5", "1e3", "1e308", "-0.0",
		"true", "false", VarDefaultENIs, VarIPsPerENI, VarMaxPods}
	if depth == 0 || r.IntN(4) == 0 {
		return atoms[r.IntN(len(atoms))]
	}
	sub := func() string { return genExpr(r, depth-1) }
	switch r.IntN(7) {
	case 0:
		return []string{"-", "--", "!", "!!", "- "}[r.IntN(5)] + sub()
	case 1:
		return "(" + sub() + ")"
	case 2:
		return []string{"int", "uint", "double"}[r.IntN(3)] + "(" + sub() + ")"
	case 3:
		return sub() + " ? " + sub() + " : " + sub()
	default:
		ops := []string{"+", "-", "*", "/", "%", "<", "<=", ">", ">=", "==", "!=", "&&", "||"}
		return sub() + " " + ops[r.IntN(len(ops))] + " " + sub()
	}
}

// TestAgreesWithCELGenerated: thousands of generated expressions have the
// same type and value, or the same kind of error, in both. 4000: under
// make test's -race, 20000 took 107 s of one core, the unit tier's
// longest test by far (they agree on all 20000 too); the fuzzer
// (FuzzCompile) holds the same agreement on any input.
func TestAgreesWithCELGenerated(t *testing.T) {
	env := celEnv(t)
	r := rand.New(rand.NewPCG(17, 2026))
	n, compiled := 4000, 0
	if testing.Short() {
		n = 1000
	}
	for range n {
		e := genExpr(r, 4)
		want, got := celOutcome(t, env, e), ourOutcome(e)
		if !want.same(got) {
			t.Errorf("%q: cel-go %v, maxpodsexpr %v", e, want, got)
		}
		if !want.compileErr {
			compiled++
		}
	}
	// The generator must mostly make well-typed expressions, or the test
	// checks little beyond type errors.
	if compiled < n/5 {
		t.Errorf("only %d of %d generated expressions compiled", compiled, n)
	}
}

// FuzzCompile: any input; no panic, and whatever this package compiles
// and evaluates, cel-go comes to the same.
func FuzzCompile(f *testing.F) {
	for _, s := range []string{"max_pods", "max_pods > 110 ? 110 : max_pods", "int(double(max_pods) * 0.8)", "-9223372036854775808 / -1", "((((1))))", "1u - 2u", "!!5", "--5"} {
		f.Add(s)
	}
	env := celEnv(f)
	f.Fuzz(func(t *testing.T, s string) {
		got := ourOutcome(s)
		if got.compileErr || strings.ContainsRune(s, 0) {
			return
		}
		if want := celOutcome(t, env, s); !want.same(got) {
			t.Errorf("%q: cel-go %v, maxpodsexpr %v", s, want, got)
		}
	})
}
