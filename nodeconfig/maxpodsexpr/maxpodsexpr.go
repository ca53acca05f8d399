// Package maxpodsexpr compiles and evaluates a NodeConfig's
// spec.kubelet.maxPodsExpression: a CEL expression over the instance's
// ENI facts that yields the node's maxPods. Validation (nodeconfig) and the
// plan (runtime/kubelet) share it, so an expression that validates is
// exactly one that the plan can run.
package maxpodsexpr

import (
	"errors"
	"fmt"

	"cel.dev/cel-go/cel"
)

// Variable names available to the expression, as in nodeadm.
const (
	VarDefaultENIs = "default_enis"
	VarIPsPerENI   = "ips_per_eni"
	VarMaxPods     = "max_pods"
)

// costLimit bounds evaluation work so a hostile expression cannot stall
// boot; real expressions (arithmetic, a ternary or two) cost well under 100.
const costLimit = 10000

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
	prg    cel.Program
}

// Env returns the CEL environment expressions are checked against: three
// int variables.
func Env() (*cel.Env, error) {
	env, err := cel.NewEnv(
		cel.Variable(VarDefaultENIs, cel.IntType),
		cel.Variable(VarIPsPerENI, cel.IntType),
		cel.Variable(VarMaxPods, cel.IntType),
	)
	if err != nil {
		return nil, fmt.Errorf("building the maxPodsExpression CEL environment: %w", err)
	}
	return env, nil
}

// Compile parses and type-checks an expression; its result type must be int.
// The error text is CEL's own, which points at the offending column.
func Compile(expr string) (*Expr, error) {
	env, err := Env()
	if err != nil {
		return nil, err
	}
	ast, iss := env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		return nil, fmt.Errorf("compiling %q: %w", expr, iss.Err())
	}
	if !ast.OutputType().IsExactType(cel.IntType) {
		return nil, fmt.Errorf("compiling %q: result is %s, want int", expr, ast.OutputType())
	}
	prg, err := env.Program(ast, cel.CostLimit(costLimit))
	if err != nil {
		return nil, fmt.Errorf("preparing %q: %w", expr, err)
	}
	return &Expr{source: expr, prg: prg}, nil
}

// String returns the expression's source.
func (e *Expr) String() string { return e.source }

// Eval runs the expression. A result below 1 is an error: a node that can
// run no pods is never what the user meant.
func (e *Expr) Eval(v Vars) (int, error) {
	out, _, err := e.prg.Eval(map[string]any{
		VarDefaultENIs: int64(v.DefaultENIs),
		VarIPsPerENI:   int64(v.IPsPerENI),
		VarMaxPods:     int64(v.MaxPods),
	})
	if err != nil {
		return 0, fmt.Errorf("evaluating %q: %w", e.source, err)
	}
	n, ok := out.Value().(int64)
	if !ok {
		return 0, fmt.Errorf("evaluating %q: result %v is not an int", e.source, out.Value())
	}
	if n < 1 {
		return 0, fmt.Errorf("evaluating %q: result %d, want at least 1", e.source, n)
	}
	if n > 1<<31-1 {
		return 0, errors.New("evaluating " + fmt.Sprintf("%q", e.source) + ": result too large")
	}
	return int(n), nil
}
