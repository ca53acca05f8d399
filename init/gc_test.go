package main

import "testing"

func TestGCSettings(t *testing.T) {
	env := func(kv map[string]string) func(string) string {
		return func(k string) string { return kv[k] }
	}
	for _, tc := range []struct {
		env   map[string]string
		procs int
		want  runtimeSettings
	}{
		{nil, 2, runtimeSettings{pid1GCPercent, pid1MemoryLimit, -1}},
		{nil, pid1MaxProcs, runtimeSettings{pid1GCPercent, pid1MemoryLimit, -1}},
		{nil, 96, runtimeSettings{pid1GCPercent, pid1MemoryLimit, pid1MaxProcs}},
		{map[string]string{"GOGC": "off"}, 2, runtimeSettings{-1, pid1MemoryLimit, -1}},
		{map[string]string{"GOMEMLIMIT": "64MiB"}, 2, runtimeSettings{pid1GCPercent, -1, -1}},
		{map[string]string{"GOGC": "200", "GOMEMLIMIT": "1GiB", "GOMAXPROCS": "96"}, 96, runtimeSettings{-1, -1, -1}},
	} {
		if got := gcSettings(env(tc.env), tc.procs); got != tc.want {
			t.Errorf("env %v, %d Ps: %+v, want %+v", tc.env, tc.procs, got, tc.want)
		}
	}
}
