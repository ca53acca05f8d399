package main

import "testing"

func TestGCSettings(t *testing.T) {
	env := func(kv map[string]string) func(string) string {
		return func(k string) string { return kv[k] }
	}
	for _, tc := range []struct {
		env            map[string]string
		percent, limit int64
	}{
		{nil, pid1GCPercent, pid1MemoryLimit},
		{map[string]string{"GOGC": "off"}, -1, pid1MemoryLimit},
		{map[string]string{"GOMEMLIMIT": "64MiB"}, pid1GCPercent, -1},
		{map[string]string{"GOGC": "200", "GOMEMLIMIT": "1GiB"}, -1, -1},
	} {
		p, l := gcSettings(env(tc.env))
		if int64(p) != tc.percent || l != tc.limit {
			t.Errorf("env %v: percent %d limit %d, want %d %d", tc.env, p, l, tc.percent, tc.limit)
		}
	}
}
