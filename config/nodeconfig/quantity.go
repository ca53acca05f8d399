package nodeconfig

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Quantity is a parsed resource quantity: only what validation needs.
type Quantity struct {
	Negative bool
	Zero     bool
}

// The errors are apimachinery's (k8s.io/apimachinery/pkg/api/resource),
// so that berth's message reads as the one kubelet would have printed.
var (
	errQuantityFormat  = errors.New("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
	errQuantitySuffix  = errors.New("unable to parse quantity's suffix")
	errQuantityNumeric = errors.New("unable to parse numeric part of quantity")
)

// ParseQuantity reads s as kubelet reads a resource quantity
// (resource.ParseQuantity), without linking apimachinery into PID 1: a
// port of its parseQuantityString and suffix rules, which take a sign, a
// number with an optional fraction (a lone "." or "+" is zero), and a
// decimal (n u m k M G T P E), binary (Ki ... Ei) or exponent (e3) suffix.
// quantity_test.go holds it to the real parser.
func ParseQuantity(s string) (Quantity, error) {
	fail := func(err error) (Quantity, error) { return Quantity{}, fmt.Errorf("quantity %q: %w", s, err) }
	if s == "" {
		return fail(errQuantityFormat)
	}
	positive, value, num, denom, suffix, ok := splitQuantity(s)
	if !ok {
		return fail(errQuantityFormat)
	}
	base, exponent, ok := quantitySuffix(suffix)
	if !ok {
		return fail(errQuantitySuffix)
	}
	zero := strings.Trim(num+denom, "0") == ""
	q := Quantity{Negative: !positive && !zero, Zero: zero}
	if !quantityFastPath(base, exponent, num, denom) && !strings.ContainsAny(value, "0123456789") {
		// apimachinery's slow path reads the number part as a decimal,
		// and one without a digit ("Ei", "+.") is none.
		return fail(errQuantityNumeric)
	}
	return q, nil
}

// maxQuantityExponent bounds an exponent suffix (1e3); kubelet would
// take up to int32's and compute the number.
const maxQuantityExponent = 1000

// quantitySuffix is apimachinery's suffix table: base 10 or 2 and the
// exponent.
func quantitySuffix(s string) (base, exponent int, ok bool) {
	dec := map[string]int{"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
	bin := map[string]int{"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
	if e, ok := dec[s]; ok {
		return 10, e, true
	}
	if e, ok := bin[s]; ok {
		return 2, e, true
	}
	if len(s) > 1 && (s[0] == 'e' || s[0] == 'E') {
		// berth's bound, not apimachinery's: it computes 10^e exactly,
		// and 100E008000000000000 held the fuzzer's call for minutes.
		e, err := strconv.ParseInt(s[1:], 10, 64)
		return 10, int(e), err == nil && e >= -maxQuantityExponent && e <= maxQuantityExponent
	}
	return 0, 0, false
}

// quantityFastPath says whether ParseQuantity takes its int64 path,
// which needs no decimal reading of the number part.
func quantityFastPath(base, exponent int, num, denom string) bool {
	if num == "" {
		num = "0"
	}
	scale, mantissa := exponent, int64(1)
	var precision int
	if base == 10 {
		precision = 18 - len(num) - len(denom)
	} else {
		scale = 0
		if exponent < 0 || len(denom) != 0 {
			return false
		}
		mantissa <<= uint(exponent)
		precision = 15 - len(num) - int(float32(exponent)*3/10) - 1
	}
	if precision < 0 || scale-len(denom) < -9 {
		return false
	}
	v, err := strconv.ParseInt(num+denom, 10, 64)
	if err != nil {
		return false
	}
	if v != 0 && (v*mantissa)/v != mantissa {
		return false // overflow
	}
	return true
}

// splitQuantity is apimachinery's parseQuantityString: sign, integer
// digits, fraction digits and suffix; ok is false where it returns
// ErrFormatWrong.
func splitQuantity(str string) (positive bool, value, num, denom, suffix string, ok bool) {
	positive = true
	pos, end := 0, len(str)
	if pos < end {
		switch str[0] {
		case '-':
			positive = false
			pos++
		case '+':
			pos++
		}
	}
	for pos < end && str[pos] == '0' {
		pos++
	}
	if pos >= end {
		return positive, "0", "0", "", "", true
	}
	i := pos
	for i < end && isDigit(str[i]) {
		i++
	}
	num, pos = str[pos:i], i
	if pos >= end {
		return positive, str, num, "", "", true
	}
	if str[pos] == '.' {
		pos++
		i := pos
		for i < end && isDigit(str[i]) {
			i++
		}
		denom, pos = str[pos:i], i
		if pos >= end {
			return positive, str, num, denom, "", true
		}
	}
	value = str[:pos]
	suffixStart := pos
	for pos < end && strings.IndexByte("eEinumkKMGTP", str[pos]) >= 0 {
		pos++
	}
	if pos < end && (str[pos] == '-' || str[pos] == '+') {
		pos++
	}
	for pos < end && isDigit(str[pos]) {
		pos++
	}
	if pos < end {
		return positive, value, num, denom, "", false
	}
	return positive, value, num, denom, str[suffixStart:], true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
