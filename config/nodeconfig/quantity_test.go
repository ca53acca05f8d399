package nodeconfig

import (
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

var quantityCases = []string{
	"100m", "1", "0", "1.5Gi", "500Mi", "1e3", "1E-2", "2k", "+5", "-1Gi", "10%", "lots", "", " 1", "1 ",
	"1.2.3", ".5", "5.", ".", "1Ki", "1KI", "1ki", "1K", "3e", "3ee2", "1Gii", "0.000001", "-0", "1e+3", "1i", "1.0Ei",
}

// TestParseQuantityAgreesWithKubernetes holds berth's quantity reader to
// apimachinery's, which kubelet uses (a test import only: PID 1 does not
// link apimachinery).
func TestParseQuantityAgreesWithKubernetes(t *testing.T) {
	for _, s := range quantityCases {
		checkQuantity(t, s)
	}
}

func checkQuantity(t *testing.T, s string) {
	t.Helper()
	got, err := ParseQuantity(s)
	want, werr := resource.ParseQuantity(s)
	if (err == nil) != (werr == nil) {
		t.Fatalf("%q: berth says %v, Kubernetes says %v", s, err, werr)
	}
	if err == nil && (got.Negative != (want.Sign() < 0) || got.Zero != want.IsZero()) {
		t.Fatalf("%q: berth reads negative=%v zero=%v, Kubernetes %s", s, got.Negative, got.Zero, want.String())
	}
}

func FuzzParseQuantity(f *testing.F) {
	for _, s := range quantityCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 64 || exponentPast(s, maxQuantityExponent) {
			return // apimachinery's exponent arithmetic, not syntax; berth bounds it
		}
		checkQuantity(t, s)
	})
}

// exponentPast says whether s ends in an exponent suffix past max.
func exponentPast(s string, max int64) bool {
	i := strings.LastIndexAny(s, "eE")
	if i < 0 {
		return false
	}
	e, err := strconv.ParseInt(s[i+1:], 10, 64)
	return err == nil && (e > max || e < -max) || err != nil && strings.Trim(s[i+1:], "+-0123456789") == "" && len(s[i+1:]) > 3
}
