package controlplane

import (
	"reflect"
	"testing"
)

func TestWithoutUninitialized(t *testing.T) {
	other := taint{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
	cloud := taint{"key": UninitializedTaint, "value": "true", "effect": "NoSchedule"}
	for _, tc := range []struct {
		in    []taint
		want  []taint
		found bool
	}{
		{nil, []taint{}, false},
		{[]taint{cloud}, []taint{}, true},
		{[]taint{other, cloud}, []taint{other}, true},
		{[]taint{other}, []taint{other}, false},
	} {
		got, found := withoutUninitialized(tc.in)
		if found != tc.found || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("withoutUninitialized(%v) = %v, %v; want %v, %v", tc.in, got, found, tc.want, tc.found)
		}
	}
}
