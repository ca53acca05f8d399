package maxpodsexpr

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// typ is a value's CEL type; the checker knows every node's statically.
type typ uint8

const (
	tInt typ = iota
	tUint
	tDouble
	tBool
)

func (t typ) String() string {
	return [...]string{"int", "uint", "double", "bool"}[t]
}

// value is one CEL value; its type is its node's.
type value struct {
	i int64
	u uint64
	f float64
	b bool
}

// node is a checked expression.
type node interface {
	typ() typ
	eval(Vars) (value, error)
}

// Evaluation errors, with cel-go's words.
var (
	errOverflow     = errors.New("integer overflow")
	errUintOverflow = errors.New("unsigned integer overflow")
	errDivZero      = errors.New("division by zero")
	errModZero      = errors.New("modulus by zero")
)

type literal struct {
	t typ
	v value
}

func (n literal) typ() typ                 { return n.t }
func (n literal) eval(Vars) (value, error) { return n.v, nil }

type variable struct{ name string }

func (variable) typ() typ { return tInt }
func (n variable) eval(v Vars) (value, error) {
	switch n.name {
	case VarDefaultENIs:
		return value{i: int64(v.DefaultENIs)}, nil
	case VarIPsPerENI:
		return value{i: int64(v.IPsPerENI)}, nil
	default:
		return value{i: int64(v.MaxPods)}, nil
	}
}

type negate struct{ x node }

func (n negate) typ() typ { return n.x.typ() }
func (n negate) eval(v Vars) (value, error) {
	x, err := n.x.eval(v)
	if err != nil {
		return x, err
	}
	if n.x.typ() == tDouble {
		return value{f: -x.f}, nil
	}
	if x.i == math.MinInt64 {
		return value{}, errOverflow
	}
	return value{i: -x.i}, nil
}

type not struct{ x node }

func (not) typ() typ { return tBool }
func (n not) eval(v Vars) (value, error) {
	x, err := n.x.eval(v)
	return value{b: !x.b}, err
}

// logical is && or ||. As in CEL, the operands commute: a side that
// decides the result (false for &&, true for ||) wins over an error on
// the other side.
type logical struct {
	and  bool
	l, r node
}

func (logical) typ() typ { return tBool }
func (n logical) eval(v Vars) (value, error) {
	decides := !n.and
	l, lerr := n.l.eval(v)
	if lerr == nil && l.b == decides {
		return value{b: decides}, nil
	}
	r, rerr := n.r.eval(v)
	if rerr == nil && r.b == decides {
		return value{b: decides}, nil
	}
	if lerr != nil {
		return value{}, lerr
	}
	if rerr != nil {
		return value{}, rerr
	}
	return value{b: !decides}, nil
}

type conditional struct{ c, a, b node }

func (n conditional) typ() typ { return n.a.typ() }
func (n conditional) eval(v Vars) (value, error) {
	c, err := n.c.eval(v)
	if err != nil {
		return c, err
	}
	if c.b {
		return n.a.eval(v)
	}
	return n.b.eval(v)
}

// binary is an arithmetic or comparison operator on two operands of one
// type (CEL converts nothing implicitly).
type binary struct {
	op   string
	l, r node
}

func (n binary) typ() typ {
	switch n.op {
	case "+", "-", "*", "/", "%":
		return n.l.typ()
	}
	return tBool
}

func (n binary) eval(v Vars) (value, error) {
	l, err := n.l.eval(v)
	if err != nil {
		return l, err
	}
	r, err := n.r.eval(v)
	if err != nil {
		return r, err
	}
	switch n.l.typ() {
	case tInt:
		return intOp(n.op, l.i, r.i)
	case tUint:
		return uintOp(n.op, l.u, r.u)
	case tDouble:
		return doubleOp(n.op, l.f, r.f), nil
	}
	return value{b: compare(n.op, boolInt(l.b), boolInt(r.b))}, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// compare applies a comparison operator to an ordered pair.
func compare[T int | int64 | uint64 | float64](op string, x, y T) bool {
	switch op {
	case "==":
		return x == y
	case "!=":
		return x != y
	case "<":
		return x < y
	case "<=":
		return x <= y
	case ">":
		return x > y
	}
	return x >= y
}

func intOp(op string, x, y int64) (value, error) {
	switch op {
	case "+":
		r := x + y
		if (x^r)&(y^r) < 0 {
			return value{}, errOverflow
		}
		return value{i: r}, nil
	case "-":
		r := x - y
		if (x^y)&(x^r) < 0 {
			return value{}, errOverflow
		}
		return value{i: r}, nil
	case "*":
		if x == 0 || y == 0 {
			return value{}, nil
		}
		r := x * y
		if r/y != x || (x == -1 && y == math.MinInt64) || (y == -1 && x == math.MinInt64) {
			return value{}, errOverflow
		}
		return value{i: r}, nil
	case "/", "%":
		if y == 0 {
			if op == "/" {
				return value{}, errDivZero
			}
			return value{}, errModZero
		}
		if x == math.MinInt64 && y == -1 {
			return value{}, errOverflow
		}
		if op == "/" {
			return value{i: x / y}, nil
		}
		return value{i: x % y}, nil
	}
	return value{b: compare(op, x, y)}, nil
}

func uintOp(op string, x, y uint64) (value, error) {
	switch op {
	case "+":
		r, carry := bits.Add64(x, y, 0)
		if carry != 0 {
			return value{}, errUintOverflow
		}
		return value{u: r}, nil
	case "-":
		r, borrow := bits.Sub64(x, y, 0)
		if borrow != 0 {
			return value{}, errUintOverflow
		}
		return value{u: r}, nil
	case "*":
		hi, lo := bits.Mul64(x, y)
		if hi != 0 {
			return value{}, errUintOverflow
		}
		return value{u: lo}, nil
	case "/":
		if y == 0 {
			return value{}, errDivZero
		}
		return value{u: x / y}, nil
	case "%":
		if y == 0 {
			return value{}, errModZero
		}
		return value{u: x % y}, nil
	}
	return value{b: compare(op, x, y)}, nil
}

func doubleOp(op string, x, y float64) value {
	switch op {
	case "+":
		return value{f: x + y}
	case "-":
		return value{f: x - y}
	case "*":
		return value{f: x * y}
	case "/":
		return value{f: x / y}
	}
	return value{b: compare(op, x, y)}
}

// convert is int(), uint() or double() of a number.
type convert struct {
	to typ
	x  node
}

func (n convert) typ() typ { return n.to }
func (n convert) eval(v Vars) (value, error) {
	x, err := n.x.eval(v)
	if err != nil {
		return x, err
	}
	from := n.x.typ()
	switch n.to {
	case tInt:
		switch from {
		case tUint:
			if x.u > math.MaxInt64 {
				return value{}, errOverflow
			}
			return value{i: int64(x.u)}, nil
		case tDouble:
			// cel-go's bounds: both ends excluded, NaN refused.
			if math.IsNaN(x.f) || x.f <= math.MinInt64 || x.f >= math.MaxInt64 {
				return value{}, errOverflow
			}
			return value{i: int64(x.f)}, nil
		}
	case tUint:
		switch from {
		case tInt:
			if x.i < 0 {
				return value{}, errUintOverflow
			}
			return value{u: uint64(x.i)}, nil
		case tDouble:
			if math.IsNaN(x.f) || x.f < 0 || x.f >= math.MaxUint64 {
				return value{}, errUintOverflow
			}
			return value{u: uint64(x.f)}, nil
		}
	case tDouble:
		switch from {
		case tInt:
			return value{f: float64(x.i)}, nil
		case tUint:
			return value{f: float64(x.u)}, nil
		}
	}
	return x, nil
}

// maxDepth bounds the parser's recursion (parentheses, operands of
// operands): far beyond any real expression, short of a stack a hostile
// one could exhaust.
const maxDepth = 100

// parser is a recursive-descent parser over CEL's grammar, restricted to
// what this package supports, that checks types as it builds.
type parser struct {
	src   string
	pos   int
	tok   token
	depth int
}

type tokKind uint8

const (
	tkEOF tokKind = iota
	tkNum
	tkIdent
	tkOp
)

type token struct {
	kind tokKind
	text string
	pos  int
	// num.t is a number token's type; its value is read when the
	// parser knows whether a sign goes with it.
	num literal
}

// String names the token in an error.
func (t token) String() string {
	if t.kind == tkEOF {
		return "end of expression"
	}
	return strconv.Quote(t.text)
}

func parse(src string) (node, error) {
	p := &parser{src: src}
	if err := p.next(); err != nil {
		return nil, err
	}
	n, err := p.expr()
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tkEOF {
		return nil, p.errorf("Syntax error: unexpected %s", p.tok)
	}
	return n, nil
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("column %d: %s", p.tok.pos+1, fmt.Sprintf(format, args...))
}

// next reads the next token.
func (p *parser) next() error {
	s := p.src
	for p.pos < len(s) {
		c := s[p.pos]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' {
			p.pos++
			continue
		}
		if strings.HasPrefix(s[p.pos:], "//") {
			for p.pos < len(s) && s[p.pos] != '\n' {
				p.pos++
			}
			continue
		}
		break
	}
	start := p.pos
	p.tok = token{pos: start}
	if p.pos >= len(s) {
		p.tok.kind = tkEOF
		return nil
	}
	c := s[p.pos]
	switch {
	case isDigit(c) || (c == '.' && p.pos+1 < len(s) && isDigit(s[p.pos+1])):
		return p.number()
	case c == '_' || isLetter(c):
		for p.pos < len(s) && (s[p.pos] == '_' || isLetter(s[p.pos]) || isDigit(s[p.pos])) {
			p.pos++
		}
		p.tok.kind, p.tok.text = tkIdent, s[start:p.pos]
		return nil
	}
	for _, op := range []string{"<=", ">=", "==", "!=", "&&", "||", "+", "-", "*", "/", "%", "<", ">", "!", "?", ":", "(", ")", ","} {
		if strings.HasPrefix(s[p.pos:], op) {
			p.pos += len(op)
			p.tok.kind, p.tok.text = tkOp, op
			return nil
		}
	}
	switch c {
	case '"', '\'':
		return p.errorf("strings are not supported in maxPodsExpression")
	case '[', '{':
		return p.errorf("lists and maps are not supported in maxPodsExpression")
	case '.':
		return p.errorf("field selection is not supported in maxPodsExpression")
	}
	return p.errorf("unexpected character %q", c)
}

func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isLetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
func isHex(c byte) bool    { return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') }

// number reads an int (decimal or 0x hex), uint (u suffix) or double
// literal, CEL's NUM_INT, NUM_UINT and NUM_FLOAT.
func (p *parser) number() error {
	s, start := p.src, p.pos
	digits := func(ok func(byte) bool) int {
		n := 0
		for p.pos < len(s) && ok(s[p.pos]) {
			p.pos++
			n++
		}
		return n
	}
	t := tInt
	if strings.HasPrefix(s[p.pos:], "0x") && p.pos+2 < len(s) && isHex(s[p.pos+2]) {
		p.pos += 2
		digits(isHex)
	} else {
		digits(isDigit)
		if p.pos+1 < len(s) && s[p.pos] == '.' && isDigit(s[p.pos+1]) {
			p.pos++
			digits(isDigit)
			t = tDouble
		}
		if p.pos < len(s) && (s[p.pos] == 'e' || s[p.pos] == 'E') {
			save := p.pos
			p.pos++
			if p.pos < len(s) && (s[p.pos] == '+' || s[p.pos] == '-') {
				p.pos++
			}
			if digits(isDigit) == 0 {
				p.pos = save
			} else {
				t = tDouble
			}
		}
	}
	if t == tInt && p.pos < len(s) && (s[p.pos] == 'u' || s[p.pos] == 'U') {
		p.pos++
		t = tUint
	}
	p.tok.kind, p.tok.text, p.tok.num.t = tkNum, s[start:p.pos], t
	return nil
}

// literal gives the number token's value, negated when neg: CEL's
// grammar takes a minus sign into an int or double literal, so the most
// negative int is written as one.
func (p *parser) literal(neg bool) (node, error) {
	text, t := p.tok.text, p.tok.num.t
	sign := ""
	if neg {
		sign = "-"
	}
	switch t {
	case tDouble:
		f, err := strconv.ParseFloat(sign+text, 64)
		if err != nil {
			return nil, p.errorf("invalid double literal %s", text)
		}
		return literal{t: tDouble, v: value{f: f}}, nil
	case tUint:
		body := strings.TrimRight(text, "uU")
		base := 10
		if h, ok := strings.CutPrefix(body, "0x"); ok {
			body, base = h, 16
		}
		u, err := strconv.ParseUint(body, base, 64)
		if err != nil {
			return nil, p.errorf("invalid uint literal %s", text)
		}
		return literal{t: tUint, v: value{u: u}}, nil
	}
	body, base := text, 10
	if h, ok := strings.CutPrefix(body, "0x"); ok {
		body, base = h, 16
	}
	i, err := strconv.ParseInt(sign+body, base, 64)
	if err != nil {
		return nil, p.errorf("invalid int literal %s", text)
	}
	return literal{t: tInt, v: value{i: i}}, nil
}

func (p *parser) isOp(op string) bool { return p.tok.kind == tkOp && p.tok.text == op }

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return p.errorf("nested more than %d deep", maxDepth)
	}
	return nil
}

// expr = or ["?" or ":" expr]
func (p *parser) expr() (node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	c, err := p.or()
	if err != nil || !p.isOp("?") {
		return c, err
	}
	at := p.tok
	if err := p.next(); err != nil {
		return nil, err
	}
	a, err := p.or()
	if err != nil {
		return nil, err
	}
	if !p.isOp(":") {
		return nil, p.errorf("want ':' of the conditional, found %s", p.tok)
	}
	if err := p.next(); err != nil {
		return nil, err
	}
	b, err := p.expr()
	if err != nil {
		return nil, err
	}
	if c.typ() != tBool || a.typ() != b.typ() {
		return nil, overloadErr(at, "_?_:_", c, a, b)
	}
	return conditional{c, a, b}, nil
}

func overloadErr(at token, op string, args ...node) error {
	ts := make([]string, len(args))
	for i, a := range args {
		ts[i] = a.typ().String()
	}
	return fmt.Errorf("column %d: found no matching overload for '%s' applied to '(%s)'", at.pos+1, op, strings.Join(ts, ", "))
}

func (p *parser) or() (node, error)  { return p.logical("||", p.and) }
func (p *parser) and() (node, error) { return p.logical("&&", p.relation) }

func (p *parser) logical(op string, operand func() (node, error)) (node, error) {
	l, err := operand()
	for err == nil && p.isOp(op) {
		at := p.tok
		if err = p.next(); err != nil {
			break
		}
		var r node
		if r, err = operand(); err != nil {
			break
		}
		if l.typ() != tBool || r.typ() != tBool {
			return nil, overloadErr(at, "_"+op+"_", l, r)
		}
		l = logical{and: op == "&&", l: l, r: r}
	}
	return l, err
}

// binaryLevel parses one left-associative level of binary operators.
func (p *parser) binaryLevel(ops []string, operand func() (node, error), check func(op string, l, r node) bool) (node, error) {
	l, err := operand()
	if err != nil {
		return nil, err
	}
	for p.tok.kind == tkOp && contains(ops, p.tok.text) {
		at := p.tok
		if err := p.next(); err != nil {
			return nil, err
		}
		r, err := operand()
		if err != nil {
			return nil, err
		}
		if l.typ() != r.typ() || !check(at.text, l, r) {
			return nil, overloadErr(at, "_"+at.text+"_", l, r)
		}
		l = binary{op: at.text, l: l, r: r}
	}
	return l, nil
}

func contains(ops []string, s string) bool {
	for _, o := range ops {
		if o == s {
			return true
		}
	}
	return false
}

func (p *parser) relation() (node, error) {
	// Every type here is ordered and has equality.
	return p.binaryLevel([]string{"<", "<=", ">", ">=", "==", "!="}, p.addition, func(string, node, node) bool { return true })
}

func (p *parser) addition() (node, error) {
	return p.binaryLevel([]string{"+", "-"}, p.multiplication, func(_ string, l, _ node) bool { return l.typ() != tBool })
}

func (p *parser) multiplication() (node, error) {
	return p.binaryLevel([]string{"*", "/", "%"}, p.unary, func(op string, l, _ node) bool {
		return l.typ() != tBool && (op != "%" || l.typ() != tDouble)
	})
}

// unary follows CEL's grammar: a run of '-' or of '!' before a member,
// where an even run cancels out (unchecked, as in cel-go) and a single
// '-' before a number is the literal's sign.
func (p *parser) unary() (node, error) {
	if !p.isOp("-") && !p.isOp("!") {
		return p.member()
	}
	op, at, n := p.tok.text, p.tok, 0
	for p.isOp(op) {
		n++
		if err := p.next(); err != nil {
			return nil, err
		}
	}
	if op == "-" && n == 1 && p.tok.kind == tkNum && p.tok.num.t != tUint {
		lit, err := p.literal(true)
		if err != nil {
			return nil, err
		}
		return lit, p.next()
	}
	x, err := p.member()
	if err != nil || n%2 == 0 {
		return x, err
	}
	if op == "!" {
		if x.typ() != tBool {
			return nil, overloadErr(at, "!_", x)
		}
		return not{x}, nil
	}
	if x.typ() != tInt && x.typ() != tDouble {
		return nil, overloadErr(at, "-_", x)
	}
	return negate{x}, nil
}

// member is a primary: a literal, a variable, a conversion call or a
// parenthesised expression. Field selection and indexing, which CEL
// allows here, have nothing to apply to.
func (p *parser) member() (node, error) {
	tok := p.tok
	if neg, err := p.signedNumber(); err != nil || neg {
		if err != nil {
			return nil, err
		}
		lit, err := p.literal(true)
		if err != nil {
			return nil, err
		}
		return lit, p.next()
	}
	switch tok.kind {
	case tkNum:
		lit, err := p.literal(false)
		if err != nil {
			return nil, err
		}
		return lit, p.next()
	case tkIdent:
		if err := p.next(); err != nil {
			return nil, err
		}
		if p.isOp("(") {
			return p.call(tok)
		}
		switch tok.text {
		case VarDefaultENIs, VarIPsPerENI, VarMaxPods:
			return variable{tok.text}, nil
		case "true", "false":
			return literal{t: tBool, v: value{b: tok.text == "true"}}, nil
		case "null", "int", "uint", "double", "bool", "string", "bytes", "list", "map", "type", "dyn":
			return nil, fmt.Errorf("column %d: %s is not supported in maxPodsExpression", tok.pos+1, tok.text)
		}
		return nil, fmt.Errorf("column %d: undeclared reference to '%s'", tok.pos+1, tok.text)
	case tkOp:
		if tok.text == "(" {
			if err := p.next(); err != nil {
				return nil, err
			}
			x, err := p.expr()
			if err != nil {
				return nil, err
			}
			if !p.isOp(")") {
				return nil, p.errorf("want ')', found %s", p.tok)
			}
			return x, p.next()
		}
	}
	return nil, p.errorf("Syntax error: unexpected %s", tok)
}

// signedNumber says whether the parser is at a '-' that is an int or
// double literal's sign (CEL's literal rule), and if so moves to the
// number.
func (p *parser) signedNumber() (bool, error) {
	if !p.isOp("-") {
		return false, nil
	}
	pos, tok := p.pos, p.tok
	if err := p.next(); err != nil {
		return false, err
	}
	if p.tok.kind == tkNum && p.tok.num.t != tUint {
		return true, nil
	}
	p.pos, p.tok = pos, tok
	return false, nil
}

// call is int(x), uint(x) or double(x) of a number.
func (p *parser) call(fn token) (node, error) {
	to, ok := map[string]typ{"int": tInt, "uint": tUint, "double": tDouble}[fn.text]
	if !ok {
		if fn.text == VarDefaultENIs || fn.text == VarIPsPerENI || fn.text == VarMaxPods {
			return nil, fmt.Errorf("column %d: undeclared reference to '%s'", fn.pos+1, fn.text)
		}
		return nil, fmt.Errorf("column %d: function %s is not supported in maxPodsExpression (int, uint and double are)", fn.pos+1, fn.text)
	}
	if err := p.next(); err != nil {
		return nil, err
	}
	var args []node
	for !p.isOp(")") {
		if len(args) > 0 {
			if !p.isOp(",") {
				return nil, p.errorf("want ',' or ')', found %s", p.tok)
			}
			if err := p.next(); err != nil {
				return nil, err
			}
		}
		a, err := p.expr()
		if err != nil {
			return nil, err
		}
		args = append(args, a)
	}
	if err := p.next(); err != nil {
		return nil, err
	}
	if len(args) != 1 || args[0].typ() == tBool {
		return nil, overloadErr(fn, fn.text, args...)
	}
	return convert{to: to, x: args[0]}, nil
}
