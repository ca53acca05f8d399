// Package maxpodsexpr compiles and evaluates a NodeConfig's
// spec.kubelet.maxPodsExpression: a CEL expression over the instance's
// ENI facts that yields the node's maxPods. Validation (nodeconfig) and the
// plan (runtime/kubelet) share it, so an expression that validates is
// exactly one that the plan can run.
//
// nodeadm hands the expression to cel-go with three int variables and
// CEL's standard environment. What people write there is arithmetic: the
// ENI formula, a cap, a ternary. cel-go would cost PID 1 6.7 MB of its
// 18 MB binary (37%) and 470 KB of heap allocated at start, most of it
// kept for the node's life, for that (issue 17), so this package
// implements the part of CEL such expressions use, to CEL's rules: int,
// uint, double and bool values; literals; the three variables; the
// arithmetic, comparison and logical operators and the conditional; the
// int(), uint() and double() conversions. Types are checked when
// compiling, as cel-go's checker does (no implicit conversions: 2 * 1.5
// is an error), and int and uint arithmetic fails on overflow and on
// division by zero. Anything else (strings, lists, maps, macros, other
// functions) is an error that says the construct is not supported. The
// tests compare every result with cel-go's own on generated expressions.
package maxpodsexpr

import (
	"fmt"
	"math"
)

// Variable names available to the expression, as in nodeadm.
const (
	VarDefaultENIs = "default_enis"
	VarIPsPerENI   = "ips_per_eni"
	VarMaxPods     = "max_pods"
)

// maxLen bounds an expression's source: with no loops in the language
// the work to check and run one is linear in its length.
const maxLen = 4096

// Vars are the inputs of an expression.
type Vars struct {
	// DefaultENIs is the instance type's default number of ENIs.
	DefaultENIs int
	// IPsPerENI is the number of IPv4 addresses per ENI.
	IPsPerENI int
	// MaxPods is the ENI formula's result, enis*(ips-1)+2.
	MaxPods int
}

// Expr is a compiled expression, safe for concurrent use.
type Expr struct {
	source string
	root   node
}

// Compile parses and type-checks an expression; its result type must be int.
func Compile(expr string) (*Expr, error) {
	if len(expr) > maxLen {
		return nil, fmt.Errorf("compiling maxPodsExpression: %d bytes long, at most %d", len(expr), maxLen)
	}
	root, err := parse(expr)
	if err != nil {
		return nil, fmt.Errorf("compiling %q: %w", expr, err)
	}
	if root.typ() != tInt {
		return nil, fmt.Errorf("compiling %q: result is %s, want int", expr, root.typ())
	}
	return &Expr{source: expr, root: root}, nil
}

// String returns the expression's source.
func (e *Expr) String() string { return e.source }

// Eval runs the expression. A result below 1 is an error: a node that can
// run no pods is never what the user meant.
func (e *Expr) Eval(v Vars) (int, error) {
	out, err := e.root.eval(v)
	if err != nil {
		return 0, fmt.Errorf("evaluating %q: %w", e.source, err)
	}
	n := out.i
	if n < 1 {
		return 0, fmt.Errorf("evaluating %q: result %d, want at least 1", e.source, n)
	}
	if n > math.MaxInt32 {
		return 0, fmt.Errorf("evaluating %q: result too large", e.source)
	}
	return int(n), nil
}
