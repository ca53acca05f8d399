package supervise

import (
	"log/slog"
	"slices"
	"strings"
	"testing"
)

func TestClassify(t *testing.T) {
	for line, want := range map[string]slog.Level{
		`I1122 10:00:00.000000    1234 server.go:1] "Started kubelet"`:                                slog.LevelInfo,
		`W1122 10:00:00.000000    1234 warn.go:1] "something odd"`:                                    slog.LevelWarn,
		`E1122 10:00:00.000000    1234 reflector.go:1] x509: certificate signed by unknown authority`: slog.LevelError,
		`F1122 10:00:00.000000    1234 server.go:1] failed to run Kubelet`:                            slog.LevelError,
		`time="2026-11-22T10:00:00Z" level=info msg="containerd successfully booted"`:                 slog.LevelInfo,
		`time="2026-11-22T10:00:00Z" level=warning msg="deprecated"`:                                  slog.LevelWarn,
		`time="2026-11-22T10:00:00Z" level=error msg="failed to load plugin"`:                         slog.LevelError,
		`time="2026-11-22T10:00:00Z" level=fatal msg="bye"`:                                           slog.LevelError,
		`time="2026-11-22T10:00:00Z" level=debug msg="chatter"`:                                       slog.LevelDebug,
		`{"level":"error","msg":"x"}`:                                                                 slog.LevelError,
		`{"level":"warn","msg":"x"}`:                                                                  slog.LevelWarn,
		`time=2026-11-22T10:00:00Z level=ERROR msg=x`:                                                 slog.LevelError,
		`panic: runtime error: invalid memory address`:                                                slog.LevelError,
		`fatal error: concurrent map writes`:                                                          slog.LevelError,
		`Flag --foo has been deprecated`:                                                              slog.LevelInfo,
		`Error: unknown flag`:                                                                         slog.LevelInfo,
		``:                                                                                            slog.LevelInfo,
		`I12`:                                                                                         slog.LevelInfo,
	} {
		if got := Classify(line); got != want {
			t.Errorf("Classify(%q) = %v, want %v", line, got, want)
		}
	}
}

func FuzzClassify(f *testing.F) {
	f.Add(`E1122 10:00:00.000000 1 x.go:1] boom`)
	f.Add(`level=warn msg=x`)
	f.Fuzz(func(t *testing.T, line string) {
		switch l := Classify(line); l {
		case slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError:
		default:
			t.Fatalf("Classify(%q) = %v, not one of the four levels", line, l)
		}
	})
}

func TestReadLines(t *testing.T) {
	long := strings.Repeat("x", maxLine+100)
	in := "one\r\ntwo\n\n" + long + "\nlast-no-newline"
	var got []string
	readLines(strings.NewReader(in), func(s string) { got = append(got, s) })
	want := []string{"one", "two", "", long[:maxLine], "last-no-newline"}
	if !slices.Equal(got, want) {
		t.Errorf("readLines got %d lines %.60q, want %.60q", len(got), got, want)
	}
}
